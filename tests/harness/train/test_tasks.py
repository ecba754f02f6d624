"""Task generators: hand-checked answers, framings, determinism, held-out sets, the corpus."""

from __future__ import annotations

import math
import re
import socket

import pytest
import torch

import models
from harness.train import corpus
from harness.train.batch import BOS, N_SPECIAL, PAD, SEP, Batch, Task, suffix_batch
from harness.train.corpus import corpus_task
from harness.train.tasks import (
    adding_answers,
    copy_answers,
    distance_k_targets,
    held_out,
    make_task,
    mqar_answers,
    reverse_answers,
    sort_answers,
    task_names,
)

pytestmark = pytest.mark.usefixtures("one_thread")

SYNTHETIC = ["copy", "reverse", "sort", "mqar", "adding", "distance-k"]
T = torch.tensor


def test_names() -> None:
    assert task_names() == [*SYNTHETIC, "corpus"]


# Hand-checked answers -----------------------------------------------------------------

def test_copy_reverse_sort_by_hand() -> None:
    x = T([[3, 5, 7], [9, 4, 4]])
    assert copy_answers(x).tolist() == [[3, 5, 7], [9, 4, 4]]
    assert reverse_answers(x).tolist() == [[7, 5, 3], [4, 4, 9]]
    assert sort_answers(T([[7, 3, 5, 3]])).tolist() == [[3, 3, 5, 7]]


def test_mqar_by_hand() -> None:
    # pairs (3 -> 9), (4 -> 8), (5 -> 9); queries 4, 5, 3
    raw = T([[3, 9, 4, 8, 5, 9, 4, 5, 3]])
    assert mqar_answers(raw, n_pairs=3).tolist() == [[8, 9, 9]]


def test_adding_by_hand() -> None:
    v = 10
    digit = lambda d: N_SPECIAL + d  # noqa: E731
    marked = lambda d: N_SPECIAL + v + d  # noqa: E731
    raw = T([[digit(2), marked(7), digit(1), marked(6)],  # 7 + 6 = 13 -> 3
             [marked(0), digit(9), marked(4), digit(9)]])  # 0 + 4 = 4
    assert adding_answers(raw, v).tolist() == [[digit(3)], [digit(4)]]


def test_distance_k_by_hand() -> None:
    targets, mask = distance_k_targets(T([[3, 4, 5, 6, 7]]), k=2)
    assert targets[mask].tolist() == [3, 4, 5]
    assert mask.tolist() == [[False, False, True, True, True]]


def test_suffix_framings_by_hand() -> None:
    x, y = T([[3, 5, 7]]), T([[7, 5, 3]])
    lm = suffix_batch(x, y, "lm")
    assert lm.tokens.tolist() == [[3, 5, 7, SEP, 7, 5]]
    assert lm.targets.tolist() == [[5, 7, SEP, 7, 5, 3]]
    assert lm.mask.tolist() == [[False, False, False, True, True, True]]
    s2s = suffix_batch(x, y, "seq2seq")
    assert s2s.src.tolist() == [[3, 5, 7]]
    assert s2s.tgt_in.tolist() == [[BOS, 7, 5]]
    assert s2s.tgt_out.tolist() == [[7, 5, 3]]
    assert s2s.mask.all()


# Generated batches obey the task's rule ------------------------------------------------

def _answers_lm(b: Batch) -> torch.Tensor:
    return b.targets[b.mask].view(b.batch_size, -1)


@pytest.mark.parametrize("name,rule", [("copy", copy_answers), ("reverse", reverse_answers),
                                       ("sort", sort_answers)])
def test_sequence_tasks_generated(name: str, rule) -> None:
    n = 6
    lm = make_task(name, n, 8, "lm", seed=1).train_batch(0, 16)
    x = lm.tokens[:, :n]
    assert (lm.tokens[:, n] == SEP).all()
    assert torch.equal(_answers_lm(lm), rule(x))
    s2s = make_task(name, n, 8, "seq2seq", seed=1).train_batch(0, 16)
    assert torch.equal(s2s.tgt_out, rule(s2s.src))


def test_mqar_generated() -> None:
    n, v = 4, 16
    b = make_task("mqar", n, v, "lm", seed=2).train_batch(0, 8)
    assert b.mask.sum(-1).tolist() == [n] * 8  # every key queried once
    for row in range(8):
        pairs = b.tokens[row, :2 * n].view(n, 2)
        keys = pairs[:, 0]
        assert len(set(keys.tolist())) == n
        assert (keys < N_SPECIAL + v // 2).all() and (pairs[:, 1] >= N_SPECIAL + v // 2).all()
        store = dict(pairs.tolist())
        queried = b.tokens[row][b.mask[row]]
        assert b.targets[row][b.mask[row]].tolist() == [store[q] for q in queried.tolist()]
    s2s = make_task("mqar", n, v, "seq2seq", seed=2, n_queries=2).train_batch(0, 8)
    assert s2s.src.shape == (8, 2 * n + 2) and s2s.tgt_out.shape == (8, 2)
    assert torch.equal(s2s.tgt_out, mqar_answers(s2s.src, n))


def test_adding_generated() -> None:
    n, v = 8, 10
    task = make_task("adding", n, v, "seq2seq", seed=3)
    assert task.vocab_size == N_SPECIAL + 2 * v
    b = task.train_batch(0, 64)
    marks = b.src >= N_SPECIAL + v
    assert (marks.sum(-1) == 2).all()
    assert (marks[:, : n // 2].sum(-1) == 1).all()  # one mark in each half
    assert torch.equal(b.tgt_out, adding_answers(b.src, v))


def test_distance_k_generated() -> None:
    b = make_task("distance-k", 10, 8, "lm", seed=4, k=3).train_batch(5, 4)
    assert torch.equal(b.targets[:, 3:], b.tokens[:, :-3])
    assert not b.mask[:, :3].any() and (b.targets[:, :3] == PAD).all()


@pytest.mark.parametrize("name", SYNTHETIC)
@pytest.mark.parametrize("framing", ["lm", "seq2seq"])
def test_ids_fit_vocab_and_models_run(name: str, framing: str) -> None:
    task = make_task(name, 4, 16, framing, seed=0)
    assert isinstance(task, Task)
    batches = [task.train_batch(0, 4), *task.eval_batches(4, 1, seq_len=8)]
    for b in batches:
        tensors = [b.tokens] if framing == "lm" else [b.src, b.tgt_in]
        assert all(int(t.max()) < task.vocab_size for t in [*tensors, b.targets])
    arch = "transformer-lm" if framing == "lm" else "transformer"
    model = models.build(arch, preset="tiny", vocab_size=task.vocab_size, d_model=16,
                         n_layers=1, n_heads=2, d_ff=16)
    for b in batches:
        assert b.logits(model).shape == (*b.targets.shape, task.vocab_size)


# Determinism and held-out sets ------------------------------------------------------------

@pytest.mark.parametrize("name", SYNTHETIC)
def test_deterministic_in_seed_and_step(name: str) -> None:
    a, b = make_task(name, 6, 16, "lm", seed=7), make_task(name, 6, 16, "lm", seed=7)
    assert torch.equal(a.train_batch(3, 8).tokens, b.train_batch(3, 8).tokens)
    assert not torch.equal(a.train_batch(3, 8).tokens, a.train_batch(4, 8).tokens)
    other = make_task(name, 6, 16, "lm", seed=8)
    assert not torch.equal(a.train_batch(3, 8).tokens, other.train_batch(3, 8).tokens)
    ev1, ev2 = a.eval_batches(8, 2), b.eval_batches(8, 2)
    assert all(torch.equal(x.tokens, y.tokens) for x, y in zip(ev1, ev2, strict=True))


def _raw(task, b: Batch) -> torch.Tensor:
    return b.src if task.framing == "seq2seq" else b.tokens[:, : task.seq_len]


def test_eval_set_held_out_by_construction() -> None:
    # 4^4 = 256 possible inputs: a random eval set would share many with training
    task = make_task("copy", 4, 4, "seq2seq", seed=0)
    train = {tuple(r) for s in range(50) for r in task.train_batch(s, 32).src.tolist()}
    evals = {tuple(r) for b in task.eval_batches(32, 4) for r in b.src.tolist()}
    assert len(train) > 200 and len(evals) > 5
    assert not train & evals
    assert held_out(torch.tensor(sorted(evals))).all()
    assert not held_out(torch.tensor(sorted(train))).any()


def test_length_generalisation_sets() -> None:
    task = make_task("reverse", 5, 8, "lm", seed=0)
    for n in (10, 20):
        (b,) = task.eval_batches(4, 1, seq_len=n)
        assert b.tokens.shape == (4, 2 * n) and b.model_len == 2 * n
        assert torch.equal(_answers_lm(b), b.tokens[:, :n].flip(-1))
    mq = make_task("mqar", 2, 16, "seq2seq", seed=0).eval_batches(4, 1, seq_len=8)[0]
    assert mq.src.shape == (4, 24)


# Bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("args,kw,needle", [
    (("copyy", 4, 8), {}, "'copyy'"),
    (("copy", 0, 8), {}, "seq_len 0"),
    (("copy", True, 8), {}, "seq_len True"),
    (("copy", 4, 1), {}, "alphabet_size 1"),
    (("copy", 4, None), {}, "alphabet_size"),
    (("copy", 4, 8, "mlm"), {}, "'mlm'"),
    (("copy", 4, 8, "lm", -1), {}, "seed -1"),
    (("copy", 4, 8), {"k": 2}, "'k'"),
    (("mqar", 5, 8), {}, "alphabet_size 8"),
    (("mqar", 2, 8), {"n_queries": 3}, "n_queries 3"),
    (("distance-k", 4, 8), {"k": 4}, "seq_len 4"),
    (("distance-k", 4, 8), {"k": 0}, "k 0"),
    (("adding", 1, 8), {}, "seq_len 1"),
    (("corpus", 16, 8), {}, "alphabet_size 8"),
    (("corpus", 16, None, "seq2seq"), {}, "'seq2seq'"),
    (("corpus", 16), {"path": "/nonexistent/text.txt"}, "/nonexistent/text.txt"),
])
def test_bad_input(args: tuple, kw: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=re.escape(needle)):
        make_task(*args, **kw)


def test_unknown_task_lists_choices() -> None:
    with pytest.raises(ValueError, match="valid: copy, reverse, sort, mqar"):
        make_task("nope", 4, 8)


def test_bad_eval_length() -> None:
    with pytest.raises(ValueError, match="alphabet_size 8"):  # 8 pairs need 8 keys of 4
        make_task("mqar", 2, 8).eval_batches(4, 1, seq_len=8)


# The corpus ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kjv():
    return corpus_task(seq_len=32, seed=0)


def test_corpus_loads_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*a, **k):
        raise AssertionError("the corpus must load without the network")

    monkeypatch.setattr(socket, "socket", no_network)
    corpus._encoded.cache_clear()  # really read the file now, not a cached copy
    corpus.load_kjv.cache_clear()
    task = make_task("corpus", 16, seed=0)
    assert task.decode(task.train_ids[:40]) == "In the beginning God created the heavens"


def test_corpus_text_and_split(kjv) -> None:
    text = kjv.decode(kjv.train_ids[:2000])
    assert text.startswith("In the beginning God created the heavens and the earth.\nAnd the")
    assert not re.search(r"\d", text)  # chapter:verse labels stripped
    assert kjv.vocab_size == len(kjv.chars) == 63 and kjv.reports_bpc
    total = kjv.train_ids.numel() + kjv.val_ids.numel()
    assert kjv.val_ids.numel() == int(total * 0.05)
    assert kjv.decode(kjv.val_ids[-30:]).endswith("Christ be with you all. Amen.")  # Rev 22:21
    again = corpus_task(seq_len=64, seed=5)
    assert torch.equal(again.val_ids, kjv.val_ids)  # split fixed, independent of seed


def test_corpus_batches(kjv) -> None:
    b = kjv.train_batch(3, 4)
    assert b.tokens.shape == (4, 32) and b.mask.all()
    assert torch.equal(b.tokens[:, 1:], b.targets[:, :-1])  # next-character targets
    assert torch.equal(b.tokens, kjv.train_batch(3, 4).tokens)
    ev = kjv.eval_batches(8, 2)
    assert torch.equal(ev[1].tokens, kjv.eval_batches(8, 2)[1].tokens)
    val = kjv.decode(kjv.val_ids)
    assert all(kjv.decode(row) in val for b in ev for row in b.tokens)
    assert kjv.eval_batches(2, 1, seq_len=128)[0].tokens.shape == (2, 128)


def test_corpus_from_path(tmp_path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("abcab" * 40, encoding="utf-8")
    task = make_task("corpus", 8, path=str(path), val_fraction=0.1)
    assert task.chars == ("a", "b", "c") and task.val_ids.numel() == 20
    assert task.decode(task.train_batch(0, 1).tokens[0]) in "abcab" * 3
    assert math.isclose(task.val_ids.numel() / 200, 0.1)


def test_corpus_unigram_baseline_by_hand(tmp_path) -> None:
    """"ab" * 100 and a validation split of the same text: frequencies 1/2 each (add-one
    smoothing on 180 counted characters keeps them equal), so exactly 1 bit per character."""
    path = tmp_path / "ab.txt"
    path.write_text("ab" * 100, encoding="utf-8")
    task = make_task("corpus", 4, path=str(path), val_fraction=0.1)
    assert task.unigram_bits_per_char() == pytest.approx(1.0)
    skew = tmp_path / "skew.txt"
    skew.write_text("aaab" * 50, encoding="utf-8")
    task = make_task("corpus", 4, path=str(skew), val_fraction=0.2)
    counts = torch.bincount(task.train_ids, minlength=2).double() + 1
    expected = -torch.log2(counts / counts.sum())[task.val_ids].mean()
    assert task.unigram_bits_per_char() == pytest.approx(float(expected))
    assert task.unigram_bits_per_char() < 1.0  # skewed text: frequencies help
