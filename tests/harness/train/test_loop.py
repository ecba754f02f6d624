"""The training loop: schedules, learning, divergence, determinism, evaluation, matching."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch
from torch import nn

import models
from harness.train.batch import Batch
from harness.train.corpus import corpus_task
from harness.train.loop import (
    TIMING_KEYS,
    TrainConfig,
    evaluate,
    lr_at,
    matched_config,
    param_count,
    train,
)
from harness.train.tasks import make_task

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = dict(d_model=32, n_layers=1, n_heads=2, d_ff=64, dropout=0.0)


def tiny_lm(vocab_size: int, **kw) -> nn.Module:
    return models.build("transformer-lm", preset="tiny", vocab_size=vocab_size, **(TINY | kw))


# Schedules ------------------------------------------------------------------------------

@pytest.mark.parametrize("step", [1, 10, 100, 3999, 4000, 4001, 20000])
def test_noam_matches_formula(step: int) -> None:
    cfg = TrainConfig(schedule="noam", lr=1.0, warmup=4000, steps=30000)
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)  # the paper's eq. 3
    assert lr_at(step, cfg, d_model=512) == pytest.approx(expected, rel=1e-12)


def test_noam_peaks_at_warmup() -> None:
    cfg = TrainConfig(schedule="noam", lr=2.0, warmup=100, steps=1000)
    lrs = [lr_at(s, cfg, 64) for s in range(1, 1001)]
    assert max(range(1000), key=lrs.__getitem__) + 1 == 100
    assert lrs[99] == pytest.approx(2.0 * 64**-0.5 * 100**-0.5)


def test_cosine_and_constant_match_formula() -> None:
    cos = TrainConfig(schedule="cosine", lr=1e-3, warmup=10, steps=110)
    assert lr_at(5, cos) == pytest.approx(5e-4)
    assert lr_at(10, cos) == pytest.approx(1e-3)
    assert lr_at(60, cos) == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr_at(110, cos) == pytest.approx(0.0, abs=1e-15)
    const = TrainConfig(lr=3e-4, warmup=4)
    assert [lr_at(s, const) for s in (1, 2, 4, 5, 500)] == pytest.approx(
        [7.5e-5, 1.5e-4, 3e-4, 3e-4, 3e-4])
    assert lr_at(1, TrainConfig(lr=3e-4)) == 3e-4


def test_schedule_bad_input() -> None:
    with pytest.raises(ValueError, match="'linear'"):
        TrainConfig(schedule="linear")
    with pytest.raises(ValueError, match="warmup 0"):
        TrainConfig(schedule="noam")
    with pytest.raises(ValueError, match="d_model"):
        lr_at(1, TrainConfig(schedule="noam", warmup=10))
    with pytest.raises(ValueError, match="step 0"):
        lr_at(0, TrainConfig())
    for kw, needle in [({"steps": 0}, "steps 0"), ({"lr": -1.0}, "lr -1.0"),
                       ({"clip": 0.0}, "clip 0.0"), ({"target_accuracy": 1.5}, "1.5")]:
        with pytest.raises(ValueError, match=re.escape(needle)):
            TrainConfig(**kw)


# Learning, early stop, records ----------------------------------------------------------

@pytest.mark.slow
def test_tiny_transformer_learns_copy() -> None:
    task = make_task("copy", 4, 8, "lm", seed=0)
    seen: list[dict] = []
    result = train(tiny_lm(task.vocab_size), task,
                   TrainConfig(steps=150, batch_size=32, lr=3e-3, eval_every=50),
                   on_eval=seen.append)
    assert result.status == "ok" and result.steps_run == 150
    assert [r["step"] for r in result.history] == [0, 50, 100, 150]
    assert seen == result.history
    first, last = result.history[0], result.final
    assert last["loss"] < 0.5 * first["loss"]
    assert last["accuracy"] > first["accuracy"] + 0.3
    assert {"loss", "accuracy", "seq_accuracy", "grad_norm", "lr", "tokens", "tokens_per_s",
            "wall_s", "train_loss"} <= set(last)
    assert "bits_per_char" not in last  # synthetic tokens are not characters
    assert last["tokens"] == 150 * 32 * 8  # 4 inputs + SEP + 3 answer tokens read per row
    assert result.n_params == sum(p.numel() for p in tiny_lm(task.vocab_size).parameters())


@pytest.mark.slow
def test_early_stop_records_target() -> None:
    task = make_task("copy", 3, 4, "lm", seed=0)
    cfg = TrainConfig(steps=2000, batch_size=32, lr=3e-3, eval_every=25, target_accuracy=0.9)
    result = train(tiny_lm(task.vocab_size), task, cfg)
    assert result.status == "ok" and result.steps_to_target is not None
    assert result.steps_run == result.steps_to_target < 2000
    assert result.steps_to_target % 25 == 0 and result.final["accuracy"] >= 0.9
    assert result.tokens_to_target == result.steps_to_target * 32 * 6
    assert result.wall_to_target == result.final["wall_s"] > 0


def test_seq2seq_lstm_loss_falls() -> None:
    task = make_task("reverse", 3, 4, "seq2seq", seed=0)
    model = models.build("lstm", preset="tiny", vocab_size=task.vocab_size, d_model=32,
                         n_layers=1)
    result = train(model, task, TrainConfig(steps=60, batch_size=32, lr=1e-2, eval_every=60))
    assert result.final["loss"] < 0.8 * result.history[0]["loss"]


def test_clip_bounds_the_update() -> None:
    task = make_task("copy", 3, 4, "lm", seed=0)
    clipped, free = tiny_lm(task.vocab_size), tiny_lm(task.vocab_size)
    free.load_state_dict(clipped.state_dict())
    before = [p.detach().clone() for p in clipped.parameters()]
    # Adam is nearly scale-invariant, but a clip of 1e-6 brings gradients down toward eps,
    # so a clipped run must end with different parameters than an unclipped one
    train(clipped, task, TrainConfig(steps=3, batch_size=8, eval_every=3, clip=1e-6))
    train(free, task, TrainConfig(steps=3, batch_size=8, eval_every=3))
    moved = [not torch.equal(a, b) for a, b in zip(before, clipped.parameters(), strict=True)]
    assert any(moved)
    assert any(not torch.equal(a, b)
               for a, b in zip(clipped.parameters(), free.parameters(), strict=True))


def test_corpus_bits_per_char() -> None:
    task = corpus_task(seq_len=32, seed=0)
    result = train(tiny_lm(task.vocab_size), task,
                   TrainConfig(steps=40, batch_size=16, lr=3e-3, eval_every=20, eval_batches=2))
    bpc = [r["bits_per_char"] for r in result.history]
    assert all(math.isfinite(b) for b in bpc)
    assert bpc[-1] < math.log2(task.vocab_size) and bpc[-1] < bpc[0]
    assert bpc[-1] == pytest.approx(result.final["loss"] / math.log(2))


# Divergence and determinism -------------------------------------------------------------

class NaNAfter(nn.Module):
    """Wraps a model; its forward returns NaN logits from call `n` on (evaluation included)."""

    def __init__(self, inner: nn.Module, n: int) -> None:
        super().__init__()
        self.inner, self.n, self.calls = inner, n, 0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = self.inner(tokens)
        return out * math.nan if self.calls >= self.n else out


def test_nan_loss_is_diverged_with_its_step() -> None:
    task = make_task("copy", 3, 4, "lm", seed=0)
    model = NaNAfter(tiny_lm(task.vocab_size), n=6)  # 2 eval batches at step 0, then steps
    cfg = TrainConfig(steps=50, batch_size=8, eval_every=10, eval_batches=2)
    result = train(model, task, cfg)
    assert result.status == "diverged"
    assert result.diverged_at == result.steps_run == 4
    assert math.isnan(result.final["train_loss"])
    assert [r["step"] for r in result.history] == [0]


def test_huge_lr_diverges() -> None:
    task = make_task("copy", 3, 4, "lm", seed=0)
    result = train(tiny_lm(task.vocab_size), task,
                   TrainConfig(steps=20, batch_size=8, eval_every=20, lr=1e30))
    assert result.status == "diverged" and result.diverged_at == 2  # first update: params ~1e30
    assert result.steps_run == 2 and result.steps_to_target is None


@pytest.mark.slow
def test_two_runs_bitwise_identical() -> None:
    task = make_task("sort", 4, 6, "lm", seed=3)
    cfg = TrainConfig(steps=30, batch_size=16, lr=2e-3, eval_every=10, seed=11,
                      schedule="cosine", warmup=5, clip=1.0)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = tiny_lm(task.vocab_size, dropout=0.1)  # dropout exercises the loop's RNG
        result = train(model, task, cfg)
        runs.append((result, [p.detach().clone() for p in model.parameters()]))
    (a, pa), (b, pb) = runs
    strip = lambda h: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in h]  # noqa: E731
    assert strip(a.history) == strip(b.history)  # == on floats: bitwise
    assert all(torch.equal(x, y) for x, y in zip(pa, pb, strict=True))
    torch.manual_seed(0)
    other = train(tiny_lm(task.vocab_size, dropout=0.1), task, dataclasses.replace(cfg, seed=12))
    assert strip(other.history) != strip(a.history)


def test_train_leaves_global_rng_alone() -> None:
    task = make_task("copy", 3, 4, "lm", seed=0)
    model = tiny_lm(task.vocab_size)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train(model, task, TrainConfig(steps=2, batch_size=4, eval_every=2))
    assert torch.equal(torch.rand(3), expected)


# evaluate() on hand-made logits ---------------------------------------------------------

class Fixed(nn.Module):
    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = nn.Parameter(logits)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.logits


def test_evaluate_by_hand() -> None:
    targets = torch.tensor([[1, 2, 0], [1, 1, 1]])
    mask = torch.tensor([[False, True, True], [True, True, False]])
    predicted = torch.tensor([[0, 2, 0], [1, 0, 0]])  # row 0 all counted right; row 1 one wrong
    logits = torch.nn.functional.one_hot(predicted, 3).float() * 100.0
    batch = Batch("lm", targets=targets, mask=mask, tokens=torch.zeros(2, 3, dtype=torch.long))
    out = evaluate(Fixed(logits), [batch])
    assert out["accuracy"] == 3 / 4 and out["seq_accuracy"] == 1 / 2
    assert out["n_eval_tokens"] == 4
    assert out["loss"] == pytest.approx(100.0 / 4, rel=1e-6)  # one wrong logit gap of 100
    assert out["bits_per_token"] == pytest.approx(out["loss"] / math.log(2))


# Parameter matching ---------------------------------------------------------------------

@pytest.mark.parametrize("target,archs", [("transformer-lm", ["lstm-lm", "gru-lm"]),
                                          ("transformer", ["lstm", "gru"])])
def test_matched_within_ten_percent(target: str, archs: list[str]) -> None:
    base = dict(models.PRESETS["tiny"])
    goal = param_count(target, **base)
    for arch in archs:
        cfg = matched_config(arch, goal, base)
        assert "n_heads" not in cfg and "d_ff" not in cfg
        got = param_count(arch, **cfg)
        assert abs(got - goal) <= 0.10 * goal
        assert got == sum(p.numel() for p in models.build(arch, **cfg).parameters())
        smaller = param_count(arch, **(cfg | {"d_model": cfg["d_model"] - 1}))
        assert abs(smaller - goal) >= abs(got - goal)  # the closest d_model, not just any


def test_matched_keeps_heads_divisible_and_fails_loudly() -> None:
    base = dict(models.PRESETS["tiny"])
    lstm = dict(vocab_size=64, d_model=96, n_layers=2, dropout=0.0)
    cfg = matched_config("transformer-lm", param_count("lstm-lm", **lstm), base)
    assert cfg["d_model"] % base["n_heads"] == 0
    with pytest.raises(ValueError, match="cannot match 10 parameters"):
        matched_config("lstm-lm", 10, base)
