"""A third-party anchor for Table 2: JoeyNMT trained on exactly our split and our subwords,
decoded by its own beam search, detokenised by our tokenizer and scored by our sacrebleu call
(scripts/anchor).

export() writes, for a corpus (the Bible's split as bitext.bible() makes it at run time) and
our shared BPE: <folder>/data/{train,dev,test}.{src,trg}, each sentence as our BPE's pieces
separated by spaces (JoeyNMT reads them with `level: word`, so a piece is one token), the
training pairs of at most `max_tokens` pieces a side only (the filter of our runs); vocab.txt,
our vocabulary in id order, one piece a line (JoeyNMT's voc_file; it puts its specials first,
so its ids are ours with <unk> and <pad> swapped); {dev,test}.ref, the raw references.

run_anchor() trains JoeyNMT from a committed config (experiments/anchor/) in its own venv
(.venv-joeynmt: its protobuf pin conflicts with MLflow) with `python -m joeynmt train` on one
thread (or `threads`), under a wall-clock budget: when it runs out, the training gets SIGINT,
which JoeyNMT catches, saving a checkpoint. A stopped scripts/anchor resumes: each sitting
trains in its own model folder (model-<k>; JoeyNMT refuses an existing one) from the
previous sitting's latest.ckpt (`training.load_model`, with its optimizer, schedule, data
order and best score), on the budget left. Then `python -m joeynmt test` beam-decodes dev
and test with the best checkpoint by the config's early-stopping metric (and, when training
ended after its last validation, with the final weights too, kept if our dev BLEU is
higher); its pieces go back through our tokenizer (piece -> id -> decode) and are scored as runner
"translate" scores: a row in
<out>/translation-anchor/results.csv with the toolkit's version, the config's path and
sha256, the split's digest, and the hypotheses beside it; JoeyNMT's validations (greedy, BLEU
on the pieces) in series.csv. The config JoeyNMT runs is the committed one with its paths,
model folder and (resuming) load_model filled in, and data.*.max_length set to `max_tokens`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import Any

import torch
import yaml
from tokenizers import Tokenizer

from experiments.spec import TranslateOptions
from harness.errors import BadInput
from harness.files import write_atomic, write_lines
from harness.machines import this_machine
from harness.measure.machine import machine_facts
from harness.results import append_row, append_series, done_points, results_path, series_path
from harness.train.translation.bitext import Corpus, split_digest
from harness.train.translation.bpe import UNK
from harness.train.translation.scoring import score
from harness.train.translation.translate_runner import score_split

SUITE = "translation-anchor"
TOOLKIT = "joeynmt"
VENV = Path(".venv-joeynmt")
CONFIG = Path("experiments/anchor/joeynmt-transformer.yaml")
TRAIN_SECONDS = 3900  # the default wall-clock budget of training: 65 min
WORK = "checkpoints"  # <out>/<suite>/checkpoints/<digest>/: data, sittings (git-ignored)
STOP_WAIT_S = 600  # how long JoeyNMT may take to save its checkpoint after SIGINT


def thread_env(n: int) -> dict[str, str]:
    """The environment that runs JoeyNMT's torch on `n` CPU threads and no GPU."""
    return {"OMP_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n),
            "OPENBLAS_NUM_THREADS": str(n), "CUDA_VISIBLE_DEVICES": ""}


@dataclass(frozen=True)
class Export:
    folder: Path  # holds data/
    train_pairs: int
    too_long: int
    sentences: dict[str, int]
    epoch_tokens: int  # target pieces + EOS of the training pairs: JoeyNMT's tokens per epoch


def pieces(tok: Tokenizer, texts: list[str]) -> list[list[str]]:
    return [e.tokens for e in tok.encode_batch(texts)]


def from_pieces(tok: Tokenizer, lines: list[str]) -> list[str]:
    """Space-separated pieces back to text through our decoder (a piece we do not know,
    JoeyNMT's <unk> included, is <unk>, which decoding drops as it drops our own)."""
    unk = tok.token_to_id(UNK)
    ids = [[i if (i := tok.token_to_id(p)) is not None else unk for p in line.split(" ") if p]
           for line in lines]
    return tok.decode_batch(ids)


def export(corpus: Corpus, tok: Tokenizer, max_tokens: int, folder: Path) -> Export:
    """Write folder/data/ (module docstring); the same files for the same inputs."""
    data = folder / "data"
    sentences: dict[str, int] = {}
    too_long = 0
    epoch_tokens = 0
    for split in ("train", "dev", "test"):
        pairs = getattr(corpus, split)
        src, tgt = pieces(tok, [s for s, _ in pairs]), pieces(tok, [t for _, t in pairs])
        keep = range(len(pairs))
        if split == "train":
            keep = [i for i in keep if len(src[i]) <= max_tokens and len(tgt[i]) <= max_tokens]
            too_long = len(pairs) - len(keep)
            epoch_tokens = sum(len(tgt[i]) + 1 for i in keep)
        else:
            write_lines(data / f"{split}.ref", [pairs[i][1] for i in keep])
        write_lines(data / f"{split}.src", [" ".join(src[i]) for i in keep])
        write_lines(data / f"{split}.trg", [" ".join(tgt[i]) for i in keep])
        sentences[split] = len(keep)
    write_lines(data / "vocab.txt", [tok.id_to_token(i) for i in range(tok.get_vocab_size())])
    return Export(folder, sentences["train"], too_long, sentences, epoch_tokens)


def load_config(path: Path) -> dict[str, Any]:
    """The YAML config; BadInput when it is not a JoeyNMT config with a model."""
    try:
        cfg = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BadInput(f"--config {path}: cannot read it ({type(exc).__name__})") from None
    if not isinstance(cfg, dict) or not all(isinstance(cfg.get(k), dict)
                                            for k in ("data", "training", "testing", "model")):
        raise BadInput(f"--config {path}: not a JoeyNMT config (needs data, training, "
                       "testing and model sections)")
    return cfg


def sitting_config(cfg: dict[str, Any], max_tokens: int, model_dir: str,
                   load_model: str | None) -> dict[str, Any]:
    """The config a sitting runs: the committed one with our files, its model folder and
    the checkpoint it resumes from."""
    out = json.loads(json.dumps(cfg))  # a deep copy
    out["model_dir"], out["use_cuda"] = model_dir, False
    data = out["data"]
    data |= {"train": "data/train", "dev": "data/dev", "test": "data/test",
             "dataset_type": "plain"}
    for side, lang in (("src", "src"), ("trg", "trg")):
        data[side] = data.get(side, {}) | {"lang": lang, "level": "word",
                                           "voc_file": "data/vocab.txt",
                                           "max_length": max_tokens}
    out["training"].pop("load_model", None)
    if load_model:
        out["training"]["load_model"] = load_model
    return out


def toolkit_version(venv: Path) -> dict[str, str]:
    """JoeyNMT's and torch's versions in the venv, read from their installed metadata."""
    found: dict[str, str] = {}
    for dist_info in sorted(venv.glob("lib/python*/site-packages/*.dist-info")):
        name = PathDistribution(dist_info).metadata["Name"]
        if name and name.lower() in ("joeynmt", "torch"):
            found[name.lower()] = PathDistribution(dist_info).version
    if "joeynmt" not in found or not (venv / "bin" / "python").exists():
        raise BadInput(f"--venv {venv}: no JoeyNMT installed there (`make joeynmt` makes "
                       f"{VENV} in the repository)")
    return found


def installed(venv: Path) -> bool:
    """Whether JoeyNMT is installed in the venv, not half made (a failed pip install)."""
    try:
        toolkit_version(venv)
    except BadInput:
        return False
    return True


def _sittings(work: Path) -> list[Path]:
    return sorted((p for p in work.glob("model-*") if p.name[6:].isdigit()),
                  key=lambda p: int(p.name[6:]))


def _read_state(work: Path) -> dict[str, Any]:
    path = work / "sittings.json"
    return json.loads(path.read_text()) if path.exists() else {"sittings": {}}


def _write_state(work: Path, state: dict[str, Any]) -> None:
    write_atomic(work / "sittings.json", json.dumps(state, indent=1) + "\n")


def _spent(work: Path, state: dict[str, Any]) -> float:
    """Seconds the sittings trained; a sitting whose runner was killed outright (no
    seconds recorded) counts from its start to its log's last line."""
    total = 0.0
    for model_dir in _sittings(work):
        rec = state["sittings"].get(model_dir.name, {})
        if rec.get("seconds") is not None:
            total += rec["seconds"]
        elif "start" in rec and (model_dir / "train.log").exists():
            total += max(0.0, (model_dir / "train.log").stat().st_mtime - rec["start"])
    return total


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_spent(state: dict[str, Any]) -> float | None:
    """CPU seconds of the training sittings (the machine may be shared: wall-clock seconds
    alone do not say how much computing they bought); None if a sitting has none."""
    cpu = [rec.get("cpu_seconds") for rec in state["sittings"].values()]
    return None if None in cpu else sum(cpu)


def _joey(venv: Path, args: list[str], work: Path, log: Path, threads: int = 1
          ) -> subprocess.Popen:
    """`python -m joeynmt ARGS` in the venv, in `work`, on `threads` threads, in its own
    session (a stop of scripts/anchor reaches it as the SIGINT we send, so it saves a
    checkpoint)."""
    with open(log, "ab") as out:
        return subprocess.Popen([str((venv / "bin" / "python").absolute()), "-m", "joeynmt",
                                 *args], cwd=work, env=os.environ | thread_env(threads), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_hear_sigint)


def _hear_sigint() -> None:
    """In the child: SIGINT back to its default, so that Python turns it into the
    KeyboardInterrupt JoeyNMT catches (a shell starts background jobs with SIGINT ignored,
    and an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(proc: subprocess.Popen) -> int:
    """SIGINT (JoeyNMT saves a checkpoint and returns), then the exit code; killed if it
    takes longer than STOP_WAIT_S."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def train(venv: Path, cfg: dict[str, Any], work: Path, max_tokens: int, budget_s: float,
          echo: Callable[[str], None], threads: int = 1) -> dict[str, Any]:
    """Train in sittings until JoeyNMT ends by itself or the budget is spent; the state."""
    state = _read_state(work)
    while not state.get("ended"):
        done = _sittings(work)
        left = budget_s - _spent(work, state)
        if left <= 0:
            state["ended"] = "budget"
            break
        name = f"model-{len(done)}"
        resume = next((f"{d.name}/latest.ckpt" for d in reversed(done)
                       if (d / "latest.ckpt").exists()), None)
        config = work / f"{name}.yaml"
        write_atomic(config, yaml.safe_dump(sitting_config(cfg, max_tokens, name, resume),
                                            sort_keys=False))
        echo(f"anchor: training sitting {name} ({left:.0f} s of budget left"
             f"{', from ' + resume if resume else ''}); log {work / name}.out")
        state["sittings"][name] = {"start": time.time(), "seconds": None, "threads": threads}
        _write_state(work, state)
        start, cpu = time.monotonic(), _children_cpu()
        proc = _joey(venv, ["train", config.name, "--skip-test"], work, work / f"{name}.out",
                     threads)
        try:
            rc, ended = proc.wait(left), "finished"
        except subprocess.TimeoutExpired:
            rc, ended = _stop(proc), "budget"
        except BaseException:  # our own stop: JoeyNMT checkpoints, the next run resumes
            _stop(proc)
            state["sittings"][name] |= {"seconds": time.monotonic() - start,
                                        "cpu_seconds": _children_cpu() - cpu}
            _write_state(work, state)
            raise
        state["sittings"][name] |= {"seconds": time.monotonic() - start, "ended": ended,
                                    "cpu_seconds": _children_cpu() - cpu, "exit_code": rc}
        if rc != 0:
            _write_state(work, state)
            raise RuntimeError(f"JoeyNMT training exited with {rc}; see {work / name}.out")
        state["ended"] = ended
        _write_state(work, state)
    return state


def _latest(work: Path) -> Path:
    """The last checkpoint of the last sitting that saved one."""
    for d in reversed(_sittings(work)):
        if (d / "latest.ckpt").exists():
            return (d / "latest.ckpt").resolve()
    raise RuntimeError(f"JoeyNMT left no checkpoint under {work}")


def _best(work: Path) -> Path:
    """The best checkpoint by dev score: the best.ckpt of the last sitting that wrote one
    (a resumed sitting carries the best score on, so it writes one only to beat it); the
    last checkpoint if no validation ran."""
    for d in reversed(_sittings(work)):
        if (d / "best.ckpt").exists():
            return (d / "best.ckpt").resolve()
    return _latest(work)


def decode(venv: Path, cfg: dict[str, Any], work: Path, max_tokens: int, best: Path,
           threads: int = 1) -> tuple[dict[str, list[str]], float, float]:
    """Beam search with `best` on dev and test: the pieces per split, the seconds and the
    CPU seconds."""
    config = sitting_config(cfg, max_tokens, best.parent.name, None)
    config["testing"]["load_model"] = str(best)
    write_atomic(work / "decode.yaml", yaml.safe_dump(config, sort_keys=False))
    start, cpu = time.monotonic(), _children_cpu()
    proc = _joey(venv, ["test", "decode.yaml", "-o", "hyps"], work, work / "decode.out",
                 threads)
    try:
        rc = proc.wait()
    except BaseException:
        proc.kill()
        raise
    if rc != 0:
        raise RuntimeError(f"JoeyNMT decoding exited with {rc}; see {work / 'decode.out'}")
    out = {split: (work / f"hyps.{split}").read_text(encoding="utf-8").split("\n")[:-1]
           for split in ("dev", "test")}
    return out, time.monotonic() - start, _children_cpu() - cpu


_SCORE = re.compile(r"(\w+): ([-+0-9.eE]+|nan|inf)")


def curves(work: Path) -> dict[str, list[tuple[int, float]]]:
    """JoeyNMT's validations (greedy, on the pieces) over all sittings, by step."""
    out: dict[str, list[tuple[int, float]]] = {}
    for d in _sittings(work):
        path = d / "validations.txt"
        for line in path.read_text().splitlines() if path.exists() else []:
            values = dict(_SCORE.findall(line))
            step = int(float(values.pop("Steps")))
            for key, value in values.items():
                out.setdefault(f"toolkit_dev_{key.lower()}", []).append((step, float(value)))
    return out


def checkpoint_stats(path: Path) -> dict[str, Any]:
    """JoeyNMT's training statistics in a checkpoint (steps, target tokens, best score)."""
    return torch.load(path, map_location="cpu", weights_only=True)["stats_state"]


_PARAMS = re.compile(r"Total params: (\d+)")


def logged_params(work: Path) -> int:
    """The trainable parameters JoeyNMT counted (tied embeddings once; its positional
    encodings are buffers), from its first sitting's log."""
    found = _PARAMS.search((_sittings(work)[0] / "train.log").read_text(encoding="utf-8"))
    if found is None:
        raise RuntimeError(f"no parameter count in {_sittings(work)[0] / 'train.log'}")
    return int(found.group(1))


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _decode_checkpoints(venv: Path, cfg: dict[str, Any], work: Path, max_tokens: int,
                        corpus: Corpus, tok: Tokenizer, echo: Callable[[str], None],
                        threads: int) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The hypotheses (pieces, by split) of the checkpoint kept, and the row's columns on
    the choice. JoeyNMT validates every validation_freq updates: training that ends between
    two validations (the budget, `updates`) leaves final weights it never scored, decoded
    too and kept if their dev BLEU (ours, beam search) is higher than its best's."""
    best, final = _best(work), _latest(work)
    chosen: dict[str, Any] = {}
    for kind, ckpt in (("best", best), ("final", final)):
        if kind == "final" and final == best:
            continue
        echo(f"anchor: decoding dev and test with {ckpt.relative_to(work)} ({kind})")
        hyps, seconds, cpu = decode(venv, cfg, work, max_tokens, ckpt, threads)
        dev = score(from_pieces(tok, hyps["dev"]), [t for _, t in corpus.dev])["bleu"]
        chosen[f"{kind}_checkpoint_dev_bleu"] = dev
        chosen[f"{kind}_checkpoint_step"] = checkpoint_stats(ckpt)["steps"]
        chosen["decode_s"] = chosen.get("decode_s", 0.0) + seconds
        chosen["decode_cpu_s"] = chosen.get("decode_cpu_s", 0.0) + cpu
        if kind == "best" or dev > chosen["best_checkpoint_dev_bleu"]:
            kept, chosen["checkpoint"] = hyps, kind
    return kept, chosen


def run_digest(point_id: str) -> str:
    """The run's short name: 12 hex digits of its point id's SHA-256, in its work folder's
    name and its output files'."""
    return hashlib.sha256(point_id.encode()).hexdigest()[:12]


def work_folder(out_dir: Path, point_id: str, model: str) -> Path:
    """The run's work folder: its exported data, sittings and checkpoints."""
    return Path(out_dir) / SUITE / WORK / f"{model}-{run_digest(point_id)}"


def _config_columns(cfg: dict[str, Any]) -> dict[str, Any]:
    """A row's columns read from the toolkit's configuration: width, seed, depth, batch,
    beam."""
    enc, dec, testing = cfg["model"]["encoder"], cfg["model"]["decoder"], cfg["testing"]
    return {"d_model": enc.get("hidden_size", 0), "seed": cfg.get("random_seed", 0),
            "n_layers": enc.get("num_layers"), "decoder_layers": dec.get("num_layers"),
            "batch_tokens": cfg["training"].get("batch_size"),
            "batch_type": cfg["training"].get("batch_type", "sentence"),
            "beam": testing.get("beam_size"), "alpha": testing.get("beam_alpha")}


def _training_columns(work: Path, state: dict[str, Any], data: Export, budget_s: float
                      ) -> dict[str, Any]:
    """A row's columns read from the training the work folder holds: parameters, time,
    sittings, updates, epochs, the toolkit's best checkpoint, the pairs trained on."""
    last = checkpoint_stats(_latest(work))
    return {"n_params": logged_params(work), "train_s": _spent(work, state),
            "train_cpu_s": cpu_spent(state),
            "train_budget_s": budget_s, "train_ended": state["ended"],
            "sittings": len(_sittings(work)), "updates": last["steps"],
            "epochs": last["total_tokens"] / data.epoch_tokens,
            "train_tokens": last["total_tokens"], "best_step": last["best_ckpt_iter"],
            "toolkit_best_dev_bleu_pieces_greedy": last["best_ckpt_score"],
            "train_pairs": data.train_pairs, "train_pairs_too_long": data.too_long}


def run_anchor(config_path: Path, out_dir: Path, corpus: Corpus, tok: Tokenizer,
               max_tokens: int, venv: Path = VENV, budget_s: float = TRAIN_SECONDS,
               resume: bool = True, echo: Callable[[str], None] = print,
               shown: Path | None = None, extra: dict[str, Any] | None = None,
               threads: int = 1) -> dict[str, Any] | None:
    """Export, train, decode, score; the row written (None: already done, resume).
    `shown`: the config's path as the row names it (default: as given); `extra`: more
    columns for the row; `threads`: JoeyNMT's CPU threads from here on (each sitting's in
    its state; the row's CPU seconds are the fair measure of work across them)."""
    versions = toolkit_version(venv)
    cfg = load_config(config_path)
    sha = hashlib.sha256(Path(config_path).read_bytes()).hexdigest()
    model = Path(config_path).stem
    bpe = tok.get_vocab_size()
    point_id = (f"anchor-{model}-{corpus.name}-split{split_digest(corpus)}-bpe{bpe}"
                f"-max{max_tokens}-budget{budget_s:g}-cfg{sha[:12]}")
    machine, table = this_machine(), results_path(out_dir, SUITE)
    if resume and point_id in done_points(table, "cpu", machine):
        echo(f"anchor: {point_id} is done on {machine} (in {table}); --no-resume reruns it")
        return None
    work = work_folder(out_dir, point_id, model)
    if not resume and work.exists():
        import shutil

        shutil.rmtree(work)
    data = export(corpus, tok, max_tokens, work)
    state = train(venv, cfg, work, max_tokens, budget_s, echo, threads)
    kept, chosen = _decode_checkpoints(venv, cfg, work, max_tokens, corpus, tok, echo, threads)
    stem = f"{model}-s{cfg.get('random_seed', 0)}-{run_digest(point_id)}-cpu-{machine}"
    files: dict[str, list[str]] = {}
    values: dict[str, Any] = {}
    for split in ("dev", "test"):
        refs = [t for _, t in getattr(corpus, split)]
        values |= score_split(split, from_pieces(tok, kept[split]), refs, corpus,
                              TranslateOptions(), stem, files)
    for rel, lines in files.items():
        write_lines(table.parent / rel, lines)
    facts = machine_facts(torch.device("cpu")) | {
        "threads": threads, "torch_version": versions.get("torch", ""),
        "host": socket.gethostname(),
        "executor": "subprocess", "nice": os.nice(0), "git_commit": _git_commit()}
    read = _config_columns(cfg)
    row = {"suite": SUITE, "point_id": point_id, "runner": TOOLKIT, "model": model, "mixer": "",
           "seq_len": 0, "d_model": read.pop("d_model"), "batch_size": 0,
           "device": "cpu", "dtype": "float32", "seed": read.pop("seed"),
           "status": "ok", "machine": machine, "study": "anchor",
           "toolkit": TOOLKIT, "toolkit_version": versions["joeynmt"],
           "config": str(shown or config_path), "config_sha256": sha, "corpus": corpus.name,
           "split": split_digest(corpus), "bpe": bpe, "max_tokens": max_tokens,
           **read, **values, **_training_columns(work, state, data, budget_s),
           **chosen, **(extra or {}),
           "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           **facts}
    append_row(table, row)
    append_series(series_path(out_dir, SUITE), point_id, curves(work), machine)
    return row
