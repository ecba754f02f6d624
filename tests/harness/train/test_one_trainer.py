"""The studies train as they did before their training loops were merged into one: a
language-model point (also clipped, and diverging), a synthetic-task point (MQAR), a
translation point (also diverging) and that translation point stopped and resumed train for
50 updates to exactly the per-update losses, gradient norms, dev curves, statuses and row
values recorded in one_trainer.json by the code of the commit the file names (`record()`
below wrote it, from a `git archive` of that commit).

Every point evaluates after every update (eval_every=1), so each curve point's train_loss is
that update's loss. The swap points of harness.measure.kernels are pinned to their fallbacks
(F.linear, split QKV, separate FFN, math attention): a sweep picks them per machine by timing
(harness.measure.kernel_choice), which would let two processes differ. Clock-derived values
(seconds, rates, MFU) are left out; everything else compares with float equality.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from experiments.spec import Point, TaskSpec, TrainOptions, TranslateOptions
from harness.measure import kernels
from harness.run.runner_table import RUNNERS
from harness.runner import Context, Result

FIXTURE = Path(__file__).with_name("one_trainer.json")
STEPS = 50
INTERRUPT_AT = 25  # the resumed point is stopped at this update's evaluation
# clock-derived row values and curves: they differ between any two runs
CLOCK = {"train_s", "tokens_per_s", "wall_to_target", "train_tokens_per_s", "train_flops_per_s",
         "peak_flops_per_s", "mfu", "seconds_to_bleu", "decode_sent_per_s_cached",
         "decode_sent_per_s_uncached", "threads_used"}
SWAP_POINTS = (kernels.LINEAR, kernels.QKV, kernels.FFN, kernels.ATTENTION)


# The points as their suites declared them at the fixture's commit, written out here so that
# a later change to a suite leaves this test alone: convergence-quick's first ffn-width
# Transformer LM, rematch-quick's first MQAR point, translation-tiny's Transformer.
LM = Point("convergence-quick", "train", "transformer-lm", 32, 64, 32, study="ffn-width",
           config=(("d_ff", 64), ("dropout", 0.0), ("n_heads", 4), ("n_layers", 2),
                   ("norm", "pre"), ("pos_encoding", "sinusoidal")),
           options=TrainOptions(TaskSpec("corpus"), steps=150, lr=1e-3, eval_every=50))
MQAR = Point("rematch-quick", "train", "mixer-lm", 2, 32, 32, study="mqar-state",
             config=(("d_ff", 128), ("dropout", 0.0), ("mixer_kind", "self-attention"),
                     ("n_heads", 4), ("n_layers", 2), ("pos_encoding", "sinusoidal")),
             options=TrainOptions(TaskSpec("mqar", 16), steps=400, lr=3e-3, eval_every=100,
                                  target=0.99))
MT = Point("translation-tiny", "translate", "transformer", 0, 32, 16, study="table2",
           config=(("d_ff", 512), ("dropout", 0.1), ("n_heads", 4), ("n_layers", 2),
                   ("norm", "post"), ("pos_encoding", "sinusoidal")),
           options=TranslateOptions(steps=12, bpe=400, max_tokens=24, eval_every=6,
                                    eval_sentences=4, final_sentences=8, eval_max_words=16,
                                    speed_sentences=2, target_bleu=0.01,
                                    alphas=(0.6, 1.0, 2.0)))


def points() -> dict[str, Point]:
    """The points, shortened to STEPS updates with an evaluation after each."""
    short = {name: replace(p, options=replace(p.options, steps=STEPS, eval_every=1))
             for name, p in (("lm", LM), ("mqar", MQAR), ("translation", MT))}
    lm_opts, mt_opts = short["lm"].options, short["translation"].options
    # clipped, and diverging: an Adam step of lr 1e3 (1e6 for translation) blows up within
    # a few updates (the LM's gradient is the first thing not finite, at a finite loss)
    return short | {"lm-clip": replace(short["lm"], options=replace(lm_opts, clip=0.5)),
                    "lm-diverged": replace(short["lm"], options=replace(lm_opts, lr=1e3)),
                    "translation-diverged": replace(short["translation"], options=replace(
                        mt_opts, peak_lr=1e6))}


@contextmanager
def pinned_kernels() -> Iterator[None]:
    """Each swap point on its fallback candidate, restored afterwards."""
    cpu = torch.device("cpu")
    before = {p: kernels.backend(p, cpu, torch.float32) for p in SWAP_POINTS}
    for p in SWAP_POINTS:
        kernels.use_backend(p, kernels.candidates(p, cpu, torch.float32)[-1])
    try:
        yield
    finally:
        for p, name in before.items():
            kernels.use_backend(p, name)


def _kept(result: Result) -> dict[str, Any]:
    """A run's status, curves and row values, clock-derived ones left out, as JSON keeps them."""
    run = {"status": result.status, "message": result.message,
           "series": {k: [[s, v] for s, v in pts] for k, pts in sorted(result.series.items())
                      if k not in CLOCK},
           "values": {k: v for k, v in sorted(result.values.items()) if k not in CLOCK}}
    return json.loads(json.dumps(run))


class Interrupted(Exception):
    """Stands for a kill: raised at an evaluation, before that evaluation's checkpoint."""


def _interrupt(point: Point, flops: int, curve: dict[str, list[tuple[int, float]]]) -> bool:
    if curve["train_loss"][-1][0] >= INTERRUPT_AT:
        raise Interrupted
    return False


def _run(point: Point, ctx: Context) -> Result:
    torch.manual_seed(0)  # whatever ran before: the runner seeds what it uses
    return RUNNERS[point.runner](point, ctx)


def runs(out: Path) -> dict[str, dict[str, Any]]:
    """Every point's kept run, and the translation point's stopped at INTERRUPT_AT and run
    again from its checkpoint ("translation-resumed")."""
    ctx = Context(torch.device("cpu"), cache_dir=out, machine="fixture")
    kept: dict[str, dict[str, Any]] = {}
    with pinned_kernels():
        for name, point in points().items():
            kept[name] = _kept(_run(point, ctx))
        mt = points()["translation"]
        with pytest.raises(Interrupted):
            _run(mt, replace(ctx, prune=_interrupt))
        kept["translation-resumed"] = _kept(_run(mt, ctx))
    return kept


def record(path: Path = FIXTURE, commit: str = "") -> None:
    """Write the fixture from this checkout's code, naming its commit (`commit`: for a copy
    of a commit's tree outside git, `git archive`)."""
    import tempfile

    commit = commit or subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                      text=True, check=True,
                                      cwd=Path(__file__).parent).stdout.strip()
    with tempfile.TemporaryDirectory() as out:
        kept = runs(Path(out))
    path.write_text(json.dumps({"commit": commit, "steps": STEPS, "runs": kept}, indent=1)
                    + "\n")


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("out")  # the BPE, learned once


@pytest.fixture(scope="module")
def measured(out) -> dict[str, dict[str, Any]]:
    return runs(out)


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict[str, Any]]:
    return json.loads(FIXTURE.read_text())["runs"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lm", "lm-clip", "lm-diverged", "mqar", "translation",
                                  "translation-resumed", "translation-diverged"])
def test_a_point_trains_to_the_recorded_losses(name, measured, recorded) -> None:
    got, want = measured[name], recorded[name]
    assert (got["status"], want["status"]) == ("diverged" if "diverged" in name else "ok",) * 2
    if want["status"] == "ok":
        assert len(want["series"]["train_loss"]) == STEPS  # one curve point per update
    assert got["message"] == want["message"]
    for key, curve in want["series"].items():
        assert got["series"][key] == curve, key
    for key, value in want["values"].items():
        assert _same(got["values"][key], value), key


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a row's "not measured")."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


@pytest.mark.slow
def test_a_resumed_point_ends_as_the_uninterrupted_one(measured) -> None:
    whole, resumed = measured["translation"], measured["translation-resumed"]
    assert (whole["values"]["resumed_from_step"], resumed["values"]["resumed_from_step"]) \
        == (0, INTERRUPT_AT - 1)
    assert resumed | {"values": resumed["values"] | {"resumed_from_step": 0}} == whole


@pytest.mark.slow
def test_a_translation_point_clips_as_a_task_point_does(out, recorded) -> None:
    """A translation point's clip (none before the loops were merged) reaches the trainer:
    its first update, taken before clipping matters to any loss, as recorded, then not."""
    mt = points()["translation"]
    with pinned_kernels():
        got = _run(replace(mt, options=replace(mt.options, clip=0.05)),
                   Context(torch.device("cpu"), cache_dir=out, machine="fixture"))
    losses = [[s, v] for s, v in got.series["train_loss"]]
    want = recorded["translation"]["series"]["train_loss"]
    assert losses[0] == want[0] and losses[1] != want[1]
