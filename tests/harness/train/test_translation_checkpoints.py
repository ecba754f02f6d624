"""A translation training point survives being killed: a subprocess training a tiny model
is sent SIGKILL mid-run, the same training resumed from its last checkpoint ends with the
weights, curves and FLOPs of an uninterrupted run; checkpoints of finished points go away
unless kept; early stopping ends on the best weights."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from harness.runner import Context
from harness.train import checkpoint
from harness.train.translation.train import Plan, TrainLog

ROOT = Path(__file__).resolve().parents[3]
STEPS = 60
KILL_AT = 20  # updates at least: the kill lands a third of the way in

# One tiny training run: a Transformer on random pairs. argv: checkpoint path, result path,
# seconds to sleep per evaluation (so a kill can land mid-run).
SCRIPT = textwrap.dedent("""
    import sys, time, torch
    import models
    from pathlib import Path
    from harness.train.translation.data import TrainStream, make_batch
    from harness.train.translation.train import Plan, loss_of, train

    ckpt, out, nap = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    ids = {"<pad>": 0, "<s>": 2, "</s>": 3}
    def pairs(n):
        return [torch.randint(4, 40, (int(torch.randint(3, 9, (1,), generator=g)),),
                              generator=g).tolist() for _ in range(n)]
    data = [make_batch(pairs(4), pairs(4), ids) for _ in range(6)]
    torch.manual_seed(0)
    model = models.build("transformer", vocab_size=40, d_model=16, n_heads=2, d_ff=32,
                         n_layers=1, dropout=0.3)
    def evaluate():
        time.sleep(nap)
        with torch.no_grad():
            model.eval()
            value = -float(loss_of(model, data[0], 0.0))
            model.train()
        return {"dev_bleu_greedy": value}
    plan = Plan(STEPS, 3e-3, max(1, STEPS // 10), 0.1, 5, checkpoint=ckpt, checkpoint_key="p",
                checkpoint_s=0.0)
    log = train(model, TrainStream(data, 7), plan, torch.device("cpu"), 7, evaluate)
    torch.save({"model": model.state_dict(), "log": log}, out)
""").replace("STEPS", str(STEPS))


def _run(tmp: Path, name: str, nap: float, wait: bool = True) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp / f"{name}.pt"),
                             str(tmp / f"{name}.out"), str(nap)], env=env)
    if wait:
        assert proc.wait(timeout=300) == 0
    return proc


def _without_seconds(log: TrainLog) -> tuple:
    series = {k: v for k, v in log.series.items() if k != "train_s"}
    return series, log.flops, log.steps, log.best, log.best_step


@pytest.mark.slow
def test_a_killed_point_resumes_to_the_uninterrupted_numbers(tmp_path) -> None:
    _run(tmp_path, "whole", 0.0)
    proc = _run(tmp_path, "killed", 0.05, wait=False)
    deadline = time.monotonic() + 240
    reached = 0
    while time.monotonic() < deadline and proc.poll() is None:
        state = _peek(tmp_path / "killed.pt")
        reached = state["log"]["steps"] if state else 0
        if reached >= KILL_AT:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    assert proc.wait(timeout=60) == -signal.SIGKILL, "the run ended before it could be killed"
    assert KILL_AT <= checkpoint.load(tmp_path / "killed.pt", "p")["log"]["steps"] < STEPS
    assert not (tmp_path / "killed.out").exists()
    _run(tmp_path, "killed", 0.0)  # the same command again: resumes from the checkpoint
    whole = torch.load(tmp_path / "whole.out", weights_only=False)
    resumed = torch.load(tmp_path / "killed.out", weights_only=False)
    assert resumed["log"].resumed_from >= KILL_AT and whole["log"].resumed_from == 0
    assert _without_seconds(resumed["log"]) == _without_seconds(whole["log"])
    for key, value in whole["model"].items():
        torch.testing.assert_close(resumed["model"][key], value, rtol=0, atol=0)


def _peek(path: Path) -> dict | None:
    """The checkpoint if one is there and whole (os.replace makes every file seen whole);
    read as it is, never cleaned up or moved aside under the writer (checkpoint.load)."""
    try:
        return torch.load(path, weights_only=True)
    except FileNotFoundError:
        return None


def test_a_checkpoint_of_another_point_is_moved_aside(tmp_path, capsys) -> None:
    assert checkpoint.save(tmp_path / "c.pt", {"point_id": "other"})
    assert checkpoint.load(tmp_path / "c.pt", "p") is None
    [aside] = [p.name for p in tmp_path.iterdir()]  # no temporary file left
    assert aside.startswith("c.pt.unusable-") and "belongs to point 'other'" in \
        capsys.readouterr().err


def test_finished_points_remove_their_checkpoint_unless_kept(tmp_path) -> None:
    from experiments.translation import translation_tiny
    point = translation_tiny()[-1]
    for keep in (False, True):
        ctx = Context(torch.device("cpu"), cache_dir=tmp_path, keep_checkpoints=keep)
        path = checkpoint.point_path(point, ctx)
        assert path.parent == tmp_path / point.suite / "checkpoints"
        checkpoint.save(path, {"point_id": point.point_id})
        checkpoint.finished(path, ctx)
        assert path.exists() == keep


@pytest.mark.slow
@pytest.mark.parametrize(("key", "values", "best"), [
    ("dev_bleu_greedy", [0.0, 1.0, 3.0, 2.0, 2.5, 1.0, 0.5, 9.0], 3.0),  # highest is best
    ("dev_ppl", [900.0, 80.0, 20.0, 30.0, 25.0, 60.0, 70.0, 5.0], 20.0)])  # lowest is best
def test_early_stopping_ends_on_the_best_weights(key, values, best) -> None:
    """Patience on greedy dev BLEU (the default) or on dev perplexity (stop_on = dev_ppl):
    best at the 2nd evaluation after step 0, 3 evaluations without a better one stop the
    run at step 50, and the model ends with the weights it had at its best."""
    from harness.train.translation.data import TrainStream, make_batch
    from harness.train.translation.train import train

    ids = {"<pad>": 0, "<s>": 2, "</s>": 3}
    data = [make_batch([[5, 6, 7]], [[8, 9]], ids)]
    model = torch.nn.Module()
    model.w = torch.nn.Parameter(torch.zeros(1))
    model.forward = lambda src, tgt, src_key_padding_mask=None: (  # logits from w
        model.w.expand(src.size(0), tgt.size(1), 12) * torch.arange(12.0))
    scores = iter(values)
    seen = []

    def evaluate() -> dict[str, float]:
        seen.append(model.w.detach().clone())
        return {key: next(scores)}

    plan = Plan(70, 1e-2, 7, 0.0, 10, patience=3, key=key)
    log = train(model, TrainStream(data, 0), plan, torch.device("cpu"), 0, evaluate)
    assert (log.best, log.best_step, log.stopped_early, log.steps) == (best, 20, True, 50)
    assert torch.equal(model.w.detach(), seen[2]) and not math.isinf(log.best)


def test_a_run_stopped_on_perplexity_reports_the_bleu_of_its_best_weights() -> None:
    """best_dev_bleu_greedy is the curve's BLEU where the rule's best was (its perplexity's
    least under stop_on = dev_ppl), not the best BLEU the curve reached elsewhere."""
    from experiments.spec import TranslateOptions
    from harness.train.translation.translate_runner import convergence

    series = {"dev_bleu_greedy": [(0, 0.0), (100, 9.0), (200, 8.5)],
              "dev_ppl": [(0, 900.0), (100, 30.0), (200, 25.0)]}
    log = TrainLog(series=series, best=25.0, best_step=200)
    assert convergence(log, TranslateOptions(stop_on="dev_ppl"))["best_dev_bleu_greedy"] == 8.5
    log = TrainLog(series=series, best=9.0, best_step=100)
    assert convergence(log, TranslateOptions())["best_dev_bleu_greedy"] == 9.0
    never = TrainLog(series=series | {"dev_ppl": [(0, math.inf), (100, math.inf)]})
    assert math.isnan(convergence(never, TranslateOptions(stop_on="dev_ppl"))
                      ["best_dev_bleu_greedy"])  # no finite perplexity: no best, no BLEU
    with pytest.raises(ValueError, match="stop_on 'dev_loss': one of dev_bleu_greedy"):
        TranslateOptions(stop_on="dev_loss")  # a Python suite's typo, refused as it is built


def test_throughput_is_rates_over_update_seconds_and_mfu_over_the_peak() -> None:
    from harness.measure.compare import peak_rate
    from harness.train.translation.translate_runner import throughput

    log = TrainLog(flops=4_000_000_000, seconds=2.0)
    out = throughput(10_000, log, torch.device("cpu"))
    peak = peak_rate(torch.device("cpu"), torch.get_num_threads())  # cached: the same one
    assert out == {"train_tokens_per_s": 5_000.0, "train_flops_per_s": 2e9,
                   "peak_flops_per_s": peak, "mfu": 2e9 / peak}
    assert 1e8 < peak < 1e14 and throughput(1, TrainLog(), torch.device("cpu")) == {}


@pytest.mark.parametrize(("curve", "flat"), [
    ([0.0, 8.0, 9.8, 10.0, 10.1, 10.2], True),  # +0.4 on 9.8: flattened
    ([0.0, 0.04, 0.07, 0.18, 0.31], False),  # small in BLEU, but still near zero and rising
    ([0.0, 8.0, 9.0, 10.0, 11.0], False),  # +2 BLEU over the last three evaluations
    ([0.0, 1.0], False)])  # too short to say
def test_a_dev_curve_has_flattened_only_when_its_last_gains_are_small(curve, flat) -> None:
    from experiments.spec import TranslateOptions
    from harness.train.translation.translate_runner import convergence

    log = TrainLog(series={"dev_bleu_greedy": [(i * 100, v) for i, v in enumerate(curve)]})
    assert convergence(log, TranslateOptions())["converged"] == int(flat)
