"""The third-party anchor (harness.crosscheck.anchor): the export gives back our text
through our decoder and filters training pairs as our runs do; with JoeyNMT installed in
.venv-joeynmt, a tiny config trains a few updates and lands a row scored by our scorer, and
its weights loaded into our Transformer give JoeyNMT's own log-probabilities."""

from __future__ import annotations

import json
import sys
from importlib.machinery import SourceFileLoader
from importlib.metadata import PathDistribution
from pathlib import Path
from types import ModuleType

import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.crosscheck import anchor, anchor_recipe, anchor_weights
from harness.files import read_lines
from harness.results import read_results, results_path
from harness.train.translation.bitext import Corpus
from harness.train.translation.bpe import shared_bpe
from harness.train.translation.scoring import score

REPO = Path(__file__).resolve().parents[3]
JOEY = REPO / anchor.VENV
JOEY_OK = anchor.installed(JOEY)

WORDS = ["In", "the", "beginning", "God", "created", "heaven", "and", "earth.", "Mulungu",
         "analenga", "kumwamba", "ndi", "dziko", "lapansi,", "\"Ine", "ndine", "3:16", "1,000;"]
TRAIN = tuple((f"{a} {b} {c}", f"{c} {a} {b} {d}") for a, b, c, d in
              zip(WORDS, WORDS[3:] + WORDS[:3], WORDS[7:] + WORDS[:7], WORDS[11:] + WORDS[:11],
                  strict=True))
LONG = (" ".join(["one", "two"] * 15), " ".join(["long"] * 40))  # over 24 pieces a side
CORPUS = Corpus("tiny-test", TRAIN * 3 + (LONG,),
                dev=TRAIN[:4], test=TRAIN[4:9])


def test_export_round_trips_through_our_decoder_and_filters_as_we_do(tmp_path: Path) -> None:
    tok = shared_bpe(CORPUS, 80, None)
    data = anchor.export(CORPUS, tok, 24, tmp_path)
    d = tmp_path / "data"
    assert data.too_long == 1 and data.train_pairs == len(TRAIN) * 3  # the 40-piece pair
    for split, pairs in (("train", CORPUS.train[:-1]), ("dev", CORPUS.dev),
                         ("test", CORPUS.test)):
        src, trg = read_lines(d / f"{split}.src"), read_lines(d / f"{split}.trg")
        assert anchor.from_pieces(tok, src) == [s for s, _ in pairs]
        assert anchor.from_pieces(tok, trg) == [t for _, t in pairs]
        assert all(" ".join(e.tokens) == line for e, line in
                   zip(tok.encode_batch([t for _, t in pairs]), trg, strict=True))
    assert read_lines(d / "test.ref") == [t for _, t in CORPUS.test]
    vocab = read_lines(d / "vocab.txt")
    assert vocab == [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    assert data.epoch_tokens == sum(len(line.split(" ")) + 1
                                    for line in read_lines(d / "train.trg"))
    assert anchor.from_pieces(tok, ["<unk> " + read_lines(d / "dev.trg")[0]]) == [CORPUS.dev[0][1]]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=30))
def test_any_text_of_known_words_round_trips(words: list[str]) -> None:
    tok = _tok()
    text = " ".join(words)
    assert anchor.from_pieces(tok, [" ".join(p) for p in anchor.pieces(tok, [text])]) == [text]


_TOK = []


def _tok():
    if not _TOK:
        _TOK.append(shared_bpe(CORPUS, 80, None))
    return _TOK[0]


@pytest.mark.parametrize("name", ["joeynmt-transformer", "joeynmt-rnn"])
def test_committed_configs_are_joeynmt_s_at_our_sizes(name: str) -> None:
    from experiments.translation import CPU, CPU_D_MODEL

    cfg = anchor.load_config(REPO / "experiments" / "anchor" / f"{name}.yaml")
    assert cfg["joeynmt_version"] == "2.3.0" and cfg["use_cuda"] is False
    assert cfg["testing"]["beam_size"] == 4 and cfg["testing"]["beam_alpha"] == 0.6
    for side in ("src", "trg"):
        assert cfg["data"][side]["level"] == "word"
        assert cfg["data"][side]["max_length"] == CPU["max_tokens"]
    assert cfg["model"]["encoder"]["embeddings"]["embedding_dim"] == CPU_D_MODEL
    run = anchor.sitting_config(cfg, 24, "model-1", "model-0/latest.ckpt")
    assert run["data"]["src"]["max_length"] == 24 and run["model_dir"] == "model-1"
    assert run["training"]["load_model"] == "model-0/latest.ckpt"
    assert run["model"] == cfg["model"] and run["testing"] == cfg["testing"]


def _script():
    loader = SourceFileLoader("anchor_script", str(REPO / "scripts" / "anchor"))
    module = ModuleType(loader.name)
    module.__file__ = loader.path
    loader.exec_module(module)
    return module


@pytest.mark.parametrize(("venv_ok", "args", "said"), [
    (False, ["--config", "bad.yaml"], "no JoeyNMT installed"),
    (True, ["--config", "bad.yaml"], "not a JoeyNMT config"),
    (True, ["--recipe", "no-such-search"], "not a search"),
    (True, ["--threads", "0"], "--threads 0: between 1 and 1024"),
    (True, ["--seed", "-1"], "--seed -1: between 0 and 2147483647"),
    (True, ["--recipe", "translation-cpu-tune"], "no finished trial of transformer")])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path, monkeypatch, capsys,
                                               venv_ok: bool, args: list[str], said: str):
    venv = tmp_path / "venv"
    if venv_ok:  # a venv with JoeyNMT's metadata: the config is checked next
        info = venv / "lib" / "python3.11" / "site-packages" / "joeynmt-2.3.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: joeynmt\nVersion: 2.3.0\n")
        (venv / "bin").mkdir()
        (venv / "bin" / "python").write_text("")
    (tmp_path / "bad.yaml").write_text("model: {}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["scripts/anchor", *args, "--out",
                                      str(tmp_path / "out"), "--venv", str(venv)])
    assert _script().main() == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and said in err
    assert not (tmp_path / "out" / "bpe").exists()  # refused before any work


def test_another_seed_is_the_same_config_but_its_seed_line_under_its_own_folder(tmp_path):
    """--seed N: the config's bytes but for random_seed, under seed-N/ with the same file
    name (the row's model is the file's stem: the seeds of one model average together); the
    config's own seed is the config itself (the committed rows stay the runs they were)."""
    config = REPO / anchor.CONFIG
    own = yaml.safe_load(config.read_text())["random_seed"]
    assert _script().with_seed(config, own, tmp_path) == config
    path = _script().with_seed(config, 7, tmp_path)
    assert path.name == config.name and path.parent.name == "seed-7"
    before, after = config.read_text().splitlines(), path.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [(f"random_seed: {own}", "random_seed: 7")]


def _tiny_config(tmp_path: Path) -> Path:
    """The committed Transformer config at toy sizes and 6 updates, Post-LN (the layout our
    Transformer takes JoeyNMT's weights in, as the searched recipe's)."""
    cfg = yaml.safe_load((REPO / anchor.CONFIG).read_text())
    for side in ("encoder", "decoder"):
        cfg["model"][side] |= {"num_layers": 1, "num_heads": 2, "hidden_size": 16,
                               "ff_size": 32, "layer_norm": "post"}
        cfg["model"][side]["embeddings"]["embedding_dim"] = 16
    cfg["training"] |= {"batch_size": 200, "validation_freq": 3, "logging_freq": 3,
                        "updates": 6}
    cfg["testing"] |= {"batch_size": 400}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.mark.slow
@pytest.mark.skipif(not JOEY_OK,
                    reason=f"JoeyNMT is not installed in {JOEY} (make joeynmt)")
def test_joeynmt_trains_and_its_row_is_scored_by_our_scorer(tmp_path: Path) -> None:
    tok = _tok()
    config = _tiny_config(tmp_path)
    lines: list[str] = []
    row = anchor.run_anchor(config, tmp_path, CORPUS, tok, 24, JOEY, 300, echo=lines.append)
    assert row is not None
    [stored] = read_results(results_path(tmp_path, anchor.SUITE)).to_dict("records")
    version = next(PathDistribution(p).version
                   for p in JOEY.glob("lib/python*/site-packages/joeynmt-*.dist-info"))
    assert stored["toolkit"] == "joeynmt" and stored["toolkit_version"] == version
    assert stored["updates"] == 6 and stored["train_ended"] == "finished"
    assert stored["n_params"] > 0 and stored["config_sha256"] == row["config_sha256"]
    suite = results_path(tmp_path, anchor.SUITE).parent
    for split, pairs in (("dev", CORPUS.dev), ("test", CORPUS.test)):
        hyps = read_lines(suite / stored[f"{split}_hypotheses"])
        assert len(hyps) == len(pairs) == stored[f"{split}_sentences"]
        assert read_lines(suite / stored[f"{split}_references"]) == [t for _, t in pairs]
        ours = score(hyps, [t for _, t in pairs])  # our scorer on the saved hypotheses
        assert stored[f"{split}_bleu"] == pytest.approx(ours["bleu"])
        assert stored[f"{split}_chrf"] == pytest.approx(ours["chrf"])
        assert stored["bleu_signature"] == ours["bleu_signature"]
        assert stored["chrf_signature"] == ours["chrf_signature"]
    # a rerun skips the finished row
    assert anchor.run_anchor(config, tmp_path, CORPUS, tok, 24, JOEY, 300,
                             echo=lines.append) is None
    assert "is done" in lines[-1]
    # its weights in our Transformer give its own teacher-forced log-probabilities
    [ckpt] = (suite / "checkpoints").glob("*/model-*/latest.ckpt")
    vocab = read_lines(ckpt.parent.parent / "data" / "vocab.txt")
    pieces = [[tok.id_to_token(i) for i in tok.encode(t).ids] for _, t in CORPUS.dev]
    want = anchor_weights.joeynmt_logprobs(ckpt, pieces[1:], pieces[:-1], vocab, JOEY)
    ids = {p: i for i, p in enumerate(vocab)}
    model, _ = anchor_weights.load(ckpt, vocab)
    got = anchor_weights.our_logprobs(
        model, anchor_weights.with_eos([[ids[p] for p in s] for s in pieces[1:]], ids["</s>"]),
        [[ids[p] for p in t] for t in pieces[:-1]], ids["<pad>"], ids["<s>"])
    valid = torch.tensor([[j <= len(t) for j in range(want.size(1))] for t in pieces[:-1]])
    torch.testing.assert_close(got[valid], want[valid])
    # and the cross-check scripts/anchor runs after training writes the run's file
    (tmp_path / "bpe").mkdir()
    tok.save(str(tmp_path / "bpe" / "tiny.json"))  # where scripts/anchor caches its BPE
    work = anchor.work_folder(tmp_path, stored["point_id"], stored["model"])
    assert work == ckpt.parent.parent
    written = anchor_weights.check(work, echo=lines.append)
    assert written == suite / "crosscheck" / f"{work.name}.json"
    check = json.loads(written.read_text())
    assert check["logprob_max_abs_diff"] < 1e-4 and check["dev_sentences"] == len(CORPUS.dev)
    assert check["joeynmt_own_beam"]["bleu"] == pytest.approx(stored["dev_bleu"])
    assert check["beam4_our_rule"]["bleu"] == max(check["beam4_bleu_by_alpha"].values())
    # an earlier checkpoint is read alike, but the toolkit's own hypotheses (of its last) not
    earlier = next(p for p in work.glob("model-*/*.ckpt") if p.resolve() != ckpt.resolve())
    check = json.loads(anchor_weights.check(work, earlier, echo=lines.append).read_text())
    assert "joeynmt_own_beam" not in check and check["step"] < stored["updates"]


RECIPE = {"peak_lr": 8e-4, "warmup_steps": 1500, "dropout": 0.06, "label_smoothing": 0.2,
          "batch_tokens": 2048, "n_layers": 1, "norm": "post", "attn_dropout": 0.14}
OWN = ("num_layers", "dropout", "embeddings", "hidden_dropout", "layer_norm")


@pytest.mark.parametrize("name", ["joeynmt-transformer", "joeynmt-rnn"])
def test_with_recipe_puts_our_searched_recipe_in_joeynmt_s_keys(name: str) -> None:
    cfg = anchor.load_config(REPO / "experiments" / "anchor" / f"{name}.yaml")
    model = anchor_recipe.our_model(cfg)
    assert model == {"joeynmt-transformer": "transformer", "joeynmt-rnn": "lstm-attention"}[name]
    recipe = RECIPE if model == "transformer" else {k: v for k, v in RECIPE.items()
                                                    if k not in ("norm", "attn_dropout")}
    out = anchor_recipe.with_recipe(cfg, recipe, 3497, 194, 3505)
    train = out["training"]
    assert (train["learning_rate"], train["learning_rate_warmup"]) == (8e-4, 1500)
    assert train["scheduling"] == "warmupinversesquareroot" and "patience" not in train
    assert (train["optimizer"], train["adam_betas"], train["weight_decay"]) == \
        ("adam", [0.9, 0.98], 0.0)
    assert (train["batch_size"], train["batch_type"], train["label_smoothing"]) == \
        (3505, "token", 0.2)
    assert (train["normalization"], train["early_stopping_metric"]) == ("tokens", "bleu")
    assert (train["updates"], train["validation_freq"]) == (3497, 194)
    assert train["validation_freq"] % train["logging_freq"] == 0  # JoeyNMT requires it
    assert train["learning_rate_min"] < 8e-4 * (1500 / 3497) ** 0.5  # never stops it early
    for side in ("encoder", "decoder"):
        stack = out["model"][side]
        assert stack["num_layers"] == 1 and stack["dropout"] == 0.06
        assert stack["embeddings"]["dropout"] == 0.06
        assert stack.get("layer_norm") == ("post" if model == "transformer" else None)
        if "hidden_dropout" in cfg["model"][side]:
            assert stack["hidden_dropout"] == 0.06
        # sizes, attention and the rest are the config's own
        assert {k: v for k, v in stack.items() if k not in OWN} == \
            {k: v for k, v in cfg["model"][side].items() if k not in OWN}
    assert out["testing"] == cfg["testing"] and out["data"] == cfg["data"]


def test_batch_size_for_replays_joeynmt_s_token_batches() -> None:
    # pairs of 9 pieces a side: 10 padded tokens each, all of them real target tokens; a
    # batch closes once pairs x 10 reaches its size, so 41-50 hold 5 pairs, 50 tokens
    assert anchor_recipe.batch_size_for([(9, 9)] * 100, 50) == 41
    assert anchor_recipe.batch_size_for([(9, 9)] * 100, 51) == 51
    # a long source pads the batch: fewer target tokens for the same size
    mixed = [(39, 9), (9, 9)] * 50
    assert anchor_recipe.batch_size_for(mixed, 50) > \
        anchor_recipe.batch_size_for([(9, 9)] * 100, 50)


@pytest.mark.slow
def test_batch_size_for_predicts_the_committed_anchors_tokens_per_update() -> None:
    """The committed JoeyNMT run (batch_size 4096, our Bible split and BPE) carried
    train_tokens / updates target tokens per update; the replay of its sampler, asked for
    that many, gives back its size to within 1%."""
    from experiments.translation import TUNED
    from harness.train.translation.bitext import bible, split_digest

    [row] = [r for r in read_results(results_path(REPO / "results", anchor.SUITE)).to_dict(
        "records") if r["model"] == "joeynmt-transformer"]
    corpus = bible()
    assert row["split"] == split_digest(corpus) and row["batch_tokens"] == 4096
    tok = shared_bpe(corpus, TUNED["bpe"], None)
    lengths = anchor_recipe.train_lengths(corpus, tok, TUNED["max_tokens"])
    assert len(lengths) == row["train_pairs"]
    size = anchor_recipe.batch_size_for(lengths, row["train_tokens"] / row["updates"])
    assert size == pytest.approx(4096, rel=0.01)


def _trial(out: Path, model: str, value: float, pruned: bool = False) -> None:
    """A finished trial's row as the tuning search writes it (the columns read here)."""
    from harness.results import append_row

    row = {"suite": "translation-cpu-tune", "point_id": f"trial-{model}-{value}",
           "runner": "translate", "model": model, "device": "cpu", "machine": "m",
           "status": "ok", "best_dev_bleu_greedy": value, "stopped_by":
           "pruned" if pruned else "budget", "steps_run": 1800, "train_flops": 6e13,
           "eval_flops": 6e13 / 18, "train_tokens": 1800 * 50, **RECIPE}
    append_row(results_path(out, "translation-cpu-tune"), row)


def test_recipe_option_writes_the_best_trials_recipe_or_says_what_is_missing(tmp_path):
    script = _script()
    config = REPO / anchor.CONFIG
    with pytest.raises(script.BadInput, match="no finished trial of transformer"):
        script.searched_trial(config, "translation-cpu-tune", tmp_path)
    with pytest.raises(script.BadInput, match="not a search"):
        script.searched_trial(config, "no-such-search", tmp_path)
    _trial(tmp_path, "transformer", 5.0)
    _trial(tmp_path, "transformer", 9.0, pruned=True)  # pruned: not a recipe
    _trial(tmp_path, "transformer", 7.0)
    trial = script.searched_trial(config, "translation-cpu-tune", tmp_path)
    assert trial["point_id"] == "trial-transformer-7.0"
    lengths = [(9, 9)] * 100
    path, extra = script.write_searched(config, trial, "translation-cpu-tune", tmp_path, lengths)
    assert path == (tmp_path / anchor.SUITE / "joeynmt-transformer-searched.yaml").resolve()
    assert extra == {"recipe": "translation-cpu-tune", "recipe_trial": "trial-transformer-7.0",
                     "recipe_unmatched": "source_eos attn_dropout init",  # as defaults
                     "recipe_tokens_per_update": 50.0}
    assert anchor_recipe.unmatched(RECIPE | {"source_eos": True, "init": "xavier"}) == [
        "attn_dropout"]  # the toolkit's own choices match
    written = anchor.load_config(path)
    assert written == anchor_recipe.with_recipe(anchor.load_config(config), RECIPE, 1800, 100, 41)
    assert "trial-transformer-7.0" in path.read_text()
    first = path.read_bytes()
    script.write_searched(config, trial, "translation-cpu-tune", tmp_path, lengths)
    assert path.read_bytes() == first  # the same config, so a stopped run resumes


@pytest.mark.slow
@pytest.mark.skipif(not JOEY_OK,
                    reason=f"JoeyNMT is not installed in {JOEY}")
def test_joeynmt_s_schedule_is_ours_one_update_later() -> None:
    """JoeyNMT sets the rate after each update, so its update k + 1 runs at our rate of
    update k, and its first at the peak (the optimizer's initial rate)."""
    import subprocess

    from harness.train.translation.train import schedule

    code = ("import torch; from joeynmt.builders import WarmupInverseSquareRootScheduler as S\n"
            "o = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=8e-4)\n"
            "s = S(o, peak_rate=8e-4, warmup=50, min_rate=1e-8)\n"
            "for k in range(300):\n    s.step(k); print(o.param_groups[0]['lr'])")
    out = subprocess.run([str(JOEY / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, check=True, env={"CUDA_VISIBLE_DEVICES": ""}).stdout
    ours = schedule(8e-4, 50)
    theirs = [float(x) for x in out.split()]
    assert theirs == pytest.approx([ours(k) for k in range(1, 301)], rel=1e-9)
