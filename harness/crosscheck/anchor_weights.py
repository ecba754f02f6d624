"""JoeyNMT's trained Transformer run by our code: is a BLEU gap between the anchor
(harness.crosscheck.anchor) and our Transformer in the model and decoding, or in the
training? If our decoding of JoeyNMT's weights scores what JoeyNMT's own does, it is training.

from_joeynmt() maps a JoeyNMT 2.3 post-LN Transformer's state dict to our names: q/k/v
layers joined into in_proj rows [W^Q; W^K; W^V], output_layer -> out_proj, pwff_layer.{0,3}
-> ffn.linear{1,2}, a layer's LayerNorms in order -> norm1..; the tied embedding's rows moved
from JoeyNMT's ids to ours by piece. Bridged outside the weights: its LayerNorm eps 1e-6
(ours 1e-5, not in TransformerConfig: set on the built modules) and the </s> it appends to
every source (with_eos).

    python -m harness.crosscheck.anchor_weights CKPT_DIR [--ckpt FILE]

CKPT_DIR: an anchor work folder (<out>/translation-anchor/checkpoints/<run>/: data/,
model-<k>/). Compares teacher-forced log-probabilities with JoeyNMT's own forward (in
.venv-joeynmt), decodes dev with our greedy and beam search (beam 4, read at its alpha 0.6
and at every alpha of our grid, the one our rule would choose as `beam4_our_rule`), rescores
JoeyNMT's hyps.dev, and measures its dev perplexity as our rows' dev_ppl is (JoeyNMT's own
"ppl" is exp of its label-smoothed KL loss, not comparable); writes one file per run,
<out>/translation-anchor/crosscheck/<run>.json (`written_to`). scripts/anchor runs it after
training a Transformer config, so every seed of the toolkit is read under our rule too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import yaml
from tokenizers import Tokenizer

import models
from harness.crosscheck.anchor import VENV, from_pieces, thread_env
from harness.files import read_lines, write_atomic
from harness.measure.kernel_swap import use_kernels
from harness.train.translation.bpe import BOS, EOS, PAD, special_ids
from harness.train.translation.data import batches
from harness.train.translation.scoring import score
from harness.train.translation.train import perplexity
from harness.train.translation.translate_runner import by_alpha, translate
from models.transformer import Transformer

JOEY_EPS = 1e-6  # JoeyNMT's LayerNorm eps
SHOWN = ("bleu", "chrf", "len_ratio", "repeat_rate")
FOLDER = "crosscheck"  # beside the work folders' parent: <out>/translation-anchor/crosscheck/


def written_to(work: Path) -> Path:
    """Where the cross-check of the run in `work` goes (committed; its work folder is not)."""
    return work.parent.parent / FOLDER / f"{work.name}.json"


def _layer(state: dict[str, torch.Tensor], src: str, dst: str, attns: list[tuple[str, str]],
           norms: list[str]) -> dict[str, torch.Tensor]:
    """One JoeyNMT layer's weights under our names (module docstring)."""
    def _wb(s: str, d: str) -> dict[str, torch.Tensor]:
        return {f"{dst}.{d}.{p}": state[f"{src}.{s}.{p}"] for p in ("weight", "bias")}
    out = {}
    for s, d in attns:
        out |= {f"{dst}.{d}.in_proj.{p}": torch.cat([state[f"{src}.{s}.{x}_layer.{p}"]
                                                     for x in "qkv"]) for p in ("weight", "bias")}
        out |= _wb(f"{s}.output_layer", f"{d}.out_proj")
    for i, s in enumerate([*norms, "feed_forward.layer_norm"], 1):
        out |= _wb(s, f"norm{i}")
    return out | _wb("feed_forward.pwff_layer.0", "ffn.linear1") \
        | _wb("feed_forward.pwff_layer.3", "ffn.linear2")


def from_joeynmt(state: dict[str, torch.Tensor], joey_vocab: list[str], our_vocab: list[str],
                 n_heads: int, eps: float = JOEY_EPS) -> Transformer:
    """Our Transformer (eval mode) computing what JoeyNMT's does, on our token ids;
    joey_vocab/our_vocab: the same pieces, each in its own id order."""
    lut = state["src_embed.lut.weight"]
    if not all(torch.equal(state.get(k, lut), lut)
               for k in ("trg_embed.lut.weight", "decoder.output_layer.weight")):
        raise ValueError("untied JoeyNMT embeddings/output layer; ours ties all three")
    if sorted(joey_vocab) != sorted(our_vocab):
        raise ValueError("the two vocabularies hold different pieces")
    joey_id = {p: i for i, p in enumerate(joey_vocab)}
    rows = lut[torch.tensor([joey_id[p] for p in our_vocab])]  # our id -> JoeyNMT's row
    n_layers = sum(k.endswith("src_src_att.q_layer.weight") for k in state)
    if n_layers != sum(k.endswith("trg_trg_att.q_layer.weight") for k in state) \
            or "encoder.layer_norm.weight" in state:
        raise ValueError("need equal encoder/decoder depth and post-LN (no final LayerNorm)")
    d_ff, d_model = state["encoder.layers.0.feed_forward.pwff_layer.0.weight"].shape
    mapped = {"embed.weight": rows, "head.proj.weight": rows}
    for i in range(n_layers):
        mapped |= _layer(state, f"encoder.layers.{i}", f"encoder.{i}",
                         [("src_src_att", "self_attn")], ["layer_norm"])
        mapped |= _layer(state, f"decoder.layers.{i}", f"decoder.{i}",
                         [("trg_trg_att", "self_attn"), ("src_trg_att", "multihead_attn")],
                         ["x_layer_norm", "dec_layer_norm"])
    model = use_kernels(models.build(
        "transformer", vocab_size=len(our_vocab), d_model=d_model, n_layers=n_layers,
        n_heads=n_heads, d_ff=d_ff, dropout=0.0, norm="post", pos_encoding="sinusoidal",
        tie_weights=True))
    model.load_state_dict(mapped, strict=True)
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm):
            m.eps = eps
    return model.eval()


def with_eos(src: list[list[int]], eos: int) -> list[list[int]]:
    """Each source with EOS appended, as JoeyNMT trains and decodes."""
    return [[*s, eos] for s in src]


def load(ckpt: Path, our_vocab: list[str]) -> tuple[Transformer, dict]:
    """Our model from a JoeyNMT checkpoint (config.yaml, trg_vocab.txt beside), its stats."""
    cfg = yaml.safe_load((ckpt.parent / "config.yaml").read_text())
    saved = torch.load(ckpt, map_location="cpu", weights_only=True)
    return from_joeynmt(saved["model_state"], read_lines(ckpt.parent / "trg_vocab.txt"),
                        our_vocab, cfg["model"]["encoder"]["num_heads"]), saved["stats_state"]


_JOEY = """
import json, sys, torch, yaml; from pathlib import Path; from types import SimpleNamespace
from joeynmt.config import _check_special_symbols; from joeynmt.model import build_model
from joeynmt.helpers import read_list_from_file; from joeynmt.vocabulary import Vocabulary
a = json.loads(sys.argv[1]); ckpt = Path(a["ckpt"])
cfg = yaml.safe_load((ckpt.parent / "config.yaml").read_text())
sym = SimpleNamespace(**_check_special_symbols(cfg["data"].get("special_symbols", {})))
vocab = Vocabulary(read_list_from_file(ckpt.parent / "trg_vocab.txt"), sym)
model = build_model(cfg["model"], vocab, vocab).eval()
model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True)["model_state"])
pad, V = vocab.pad_index, vocab.lookup
def padded(rows): return torch.tensor([r + [pad] * (max(map(len, rows)) - len(r)) for r in rows])
src = padded([[V(p) for p in s] + [vocab.eos_index] for s in a["src"]])
trg = padded([[vocab.bos_index] + [V(p) for p in t] for t in a["trg"]])
with torch.no_grad():
    out = model._encode_decode(src=src, trg_input=trg, src_mask=(src != pad)[:, None],
                               src_length=(src != pad).sum(1), trg_mask=(trg != pad)[:, None])[0]
torch.save({"logp": out.log_softmax(-1), "itos": vocab._itos}, a["out"])
"""


def joeynmt_logprobs(ckpt: Path, src: list[list[str]], trg: list[list[str]], our_vocab:
                     list[str], venv: Path = VENV) -> torch.Tensor:
    """JoeyNMT's own teacher-forced log-probabilities (B, 1 + max target length, V) of
    `trg` pieces given `src` pieces (it appends the source EOS), columns in our id order."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "logp.pt"
        arg = json.dumps({"ckpt": str(Path(ckpt).resolve()), "src": src, "trg": trg,
                          "out": str(out)})
        subprocess.run([str(venv / "bin" / "python"), "-c", _JOEY, arg], check=True,
                       env=os.environ | thread_env(1), capture_output=True)
        got = torch.load(out, weights_only=True)
    joey_id = {p: i for i, p in enumerate(got["itos"])}
    return got["logp"][..., torch.tensor([joey_id[p] for p in our_vocab])]


def our_logprobs(model: Transformer, src: list[list[int]], trg: list[list[int]],
                 pad: int, bos: int) -> torch.Tensor:
    """Our model's teacher-forced log-probabilities, as joeynmt_logprobs (sources as given)."""
    s, t = (torch.tensor([r + [pad] * (max(map(len, rows)) - len(r)) for r in rows])
            for rows in (src, [[bos, *y] for y in trg]))
    with torch.no_grad():
        return model(s, t, s == pad).log_softmax(-1)


def _tokenizer(vocab: list[str], cache: Path) -> Tokenizer | None:
    """The cached BPE (<out>/bpe/) whose vocabulary is `vocab` in id order; None if none."""
    toks = (Tokenizer.from_file(str(p)) for p in sorted(cache.glob("*.json")))
    return next((t for t in toks
                 if [t.id_to_token(i) for i in range(t.get_vocab_size())] == vocab), None)


def under_each_alpha(model: Transformer, tok: Tokenizer, src: list[list[int]],
                     refs: list[str]) -> dict:
    """One beam search (beam 4) read under every length penalty of our grid (ALPHAS, as our
    runs choose theirs on dev): `beam4` at the toolkit's own 0.6, dev BLEU at each alpha,
    and the alpha our rule would choose with its scores (`beam4_our_rule`)."""
    from experiments.translation import ALPHAS

    start = time.perf_counter()
    found = by_alpha(model, tok, src, torch.device("cpu"), 4, tuple(sorted({0.6, *ALPHAS})))
    seconds = time.perf_counter() - start
    scored = {a: score(h, refs) for a, h in found.items()}
    chosen = max(ALPHAS, key=lambda a: (scored[a]["bleu"], -abs(a - 0.6)))
    return {"beam4": scored[0.6] | {"alpha": 0.6, "seconds": seconds},
            "beam4_our_rule": scored[chosen] | {"alpha": chosen},
            "beam4_bleu_by_alpha": {f"{a:g}": scored[a]["bleu"] for a in ALPHAS}}


class NotAnchorRun(ValueError):
    """A folder or venv the cross-check cannot read (one line for the user)."""


def check(work: Path, ckpt: Path | None = None,
          echo: Callable[[str], None] = print) -> Path:
    """Cross-check the run in `work` (its last sitting's latest.ckpt, or `ckpt`), write
    written_to(work) and return it; NotAnchorRun where the folder, venv or BPE is missing."""
    torch.set_num_threads(1)
    work = Path(work).resolve()
    n, data = 8, work / "data"  # n: dev sentences of the log-probability check
    sittings = sorted(work.glob("model-*/latest.ckpt"), key=lambda p: int(p.parent.name[6:]))
    if not (data / "vocab.txt").is_file() or not (ckpt or sittings):
        raise NotAnchorRun(f"{work} is not an anchor work folder (data/vocab.txt and "
                           "model-<k>/latest.ckpt); see results/translation-anchor/checkpoints/")
    if not (VENV / "bin" / "python").is_file():
        raise NotAnchorRun(f"no JoeyNMT venv at {VENV}; scripts/anchor says how to make it")
    vocab = read_lines(data / "vocab.txt")
    if (tok := _tokenizer(vocab, work.parents[2] / "bpe")) is None:
        raise NotAnchorRun(f"no BPE in {work.parents[2] / 'bpe'} has the run's vocabulary; "
                           "`scripts/anchor` caches it when it exports the data")
    ids = {p: i for i, p in enumerate(vocab)}
    ckpt = (ckpt or sittings[-1]).resolve()
    model, stats = load(ckpt, vocab)
    src_p, trg_p = ([line.split(" ") for line in read_lines(data / f"dev.{side}")]
                    for side in ("src", "trg"))
    src = with_eos([[ids[p] for p in s] for s in src_p], ids[EOS])
    refs = read_lines(data / "dev.ref")
    joey = joeynmt_logprobs(ckpt, src_p[:n], trg_p[:n], vocab)
    ours = our_logprobs(model, src[:n], [[ids[p] for p in t] for t in trg_p[:n]], ids[PAD],
                        ids[BOS])
    mask = torch.tensor([[j <= len(t) for j in range(joey.size(1))] for t in trg_p[:n]])
    result = {"checkpoint": os.path.relpath(ckpt), "step": stats["steps"],
              "dev_sentences": len(refs), "check_sentences": n,
              "check_positions": int(mask.sum()), "layernorm_eps": JOEY_EPS,
              "logprob_max_abs_diff": float((ours - joey).abs()[mask].max())}
    echo(json.dumps(result))
    dev = batches(src, [[ids[p] for p in t] for t in trg_p], special_ids(tok), 64)
    result["dev_ppl"] = perplexity(model, dev, torch.device("cpu"))  # as our rows' dev_ppl
    echo(f"dev perplexity (no smoothing, EOS included): {result['dev_ppl']:.2f}")
    own = work / "hyps.dev"  # the anchor's beam search of its last checkpoint, rescored
    if own.exists() and sittings and ckpt == sittings[-1].resolve():
        result["joeynmt_own_beam"] = score(from_pieces(tok, read_lines(own)), refs)
    for name, source in (("greedy", src), ("greedy_no_src_eos", [s[:-1] for s in src])):
        start = time.perf_counter()
        s = score(translate(model, tok, source, torch.device("cpu"), 0), refs)
        result[name] = s | {"seconds": time.perf_counter() - start}
    result |= under_each_alpha(model, tok, src, refs)
    for name, s in ((k, v) for k, v in result.items() if isinstance(v, dict) and "bleu" in v):
        echo(f"{name:>18}: " + "  ".join(f"{k} {s[k]:.3f}" for k in SHOWN))
    write_atomic(path := written_to(work), json.dumps(result, indent=1) + "\n")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpt_dir", type=Path)
    ap.add_argument("--ckpt", type=Path, help="default: the last sitting's latest.ckpt")
    args = ap.parse_args()
    try:
        path = check(args.ckpt_dir, args.ckpt, lambda line: print(line, flush=True))
    except NotAnchorRun as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
