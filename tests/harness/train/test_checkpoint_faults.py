"""Checkpoints that cannot be trusted or written never stop a point: a damaged, foreign,
crafted or non-regular checkpoint is moved aside (named in a warning) and the point trains
from scratch; a checkpoint that cannot be written is said once and training goes on; the
temporary files a kill leaves are removed at the next start; --no-resume trains from
scratch whatever checkpoint is kept."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import resource
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from harness.train import checkpoint
from harness.train.translation.data import TrainStream, make_batch
from harness.train.translation.train import Plan, train

IDS = {"<pad>": 0, "<s>": 2, "</s>": 3}
STEPS = 12


def _model() -> torch.nn.Module:
    """A one-parameter 'translation model': logits from w."""
    model = torch.nn.Module()
    model.w = torch.nn.Parameter(torch.zeros(1))
    model.forward = lambda src, tgt, src_key_padding_mask=None: (
        model.w.expand(src.size(0), tgt.size(1), 12) * torch.arange(12.0))
    return model


def _train(path: Path, resume: bool = True, steps: int = STEPS) -> tuple[object, list[int]]:
    """Train the tiny model with checkpoints at `path`; (log, the steps evaluated at)."""
    model, seen = _model(), []

    def evaluate() -> dict[str, float]:
        seen.append(len(seen))
        return {"dev_bleu_greedy": float(model.w.detach())}

    data = [make_batch([[5, 6, 7]], [[8, 9]], IDS)]
    plan = Plan(steps, 1e-2, 2, 0.0, 4, checkpoint=path, checkpoint_key="p", checkpoint_s=0.0,
                resume=resume)
    return train(model, TrainStream(data, 0), plan, torch.device("cpu"), 0, evaluate), seen


class Crafted:
    """A pickle that runs code when loaded with weights_only=False."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return os.mkdir, (str(self.marker),)


def _damage(path: Path, kind: str, tmp: Path) -> None:
    _train(path, steps=4)  # a sound checkpoint of step 4 first
    whole = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(whole[: len(whole) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(os.urandom(3000))
    elif kind == "not-a-dict":
        torch.save([1, 2, 3], path)
    elif kind == "other-point":
        state = torch.load(path, weights_only=True)
        torch.save({**state, "point_id": "another"}, path)
    elif kind == "other-model":
        state = torch.load(path, weights_only=True)
        torch.save({**state, "model": {"w": torch.zeros(3)}}, path)
    elif kind == "crafted":
        torch.save({"point_id": "p", "model": Crafted(tmp / "ran")}, path)
    elif kind == "folder":
        path.unlink()
        path.mkdir()
    elif kind == "symlink":
        (tmp / "elsewhere.pt").write_bytes(whole)
        path.unlink()
        path.symlink_to(tmp / "elsewhere.pt")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["truncated", "empty", "garbage", "not-a-dict", "other-point",
                                  "other-model", "crafted", "folder", "symlink"])
def test_an_unusable_checkpoint_is_moved_aside_and_the_point_trains_afresh(
        tmp_path: Path, kind: str, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "ckpt" / "c.pt"
    _damage(path, kind, tmp_path)
    capsys.readouterr()
    log, seen = _train(path)
    assert log.steps == STEPS and log.resumed_from == 0 and seen[0] == 0  # from scratch
    warnings = [x for x in capsys.readouterr().err.splitlines() if "warning" in x]
    assert len(warnings) == 1 and str(path) in warnings[0], warnings
    aside = [p.name for p in path.parent.iterdir() if ".unusable-" in p.name]
    assert len(aside) == 1 and aside[0] in warnings[0]
    assert checkpoint.load(path, "p")["log"]["steps"] == STEPS  # a sound one in its place
    assert not (tmp_path / "ran").exists()  # the crafted pickle's code never ran


def test_a_fifo_in_place_of_a_checkpoint_is_never_opened(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    os.mkfifo(path)
    done: list[object] = []
    reader = threading.Thread(target=lambda: done.append(checkpoint.load(path, "p")),
                              daemon=True)
    reader.start()
    reader.join(timeout=20)
    try:
        assert done == [None], "loading a FIFO blocked"
    finally:
        if not done:  # release the blocked reader: a writer opens and closes
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert not path.exists() and len(list(tmp_path.glob("c.pt.unusable-*"))) == 1


def test_a_checkpoint_that_cannot_be_written_is_said_once_and_training_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The folder cannot be made (a file stands where it would be): every write fails."""
    (tmp_path / "blocked").write_text("a file, not a folder")
    path = tmp_path / "blocked" / "c.pt"
    log, _ = _train(path)
    assert log.steps == STEPS and log.resumed_from == 0
    warnings = [x for x in capsys.readouterr().err.splitlines() if "warning" in x]
    assert len(warnings) == 1 and str(path) in warnings[0] and "without checkpoints" in \
        warnings[0], warnings


def _child(path: Path, mode: str, said: Path) -> None:
    """A training run in a process of its own (forked: no cold start), its stderr and result
    in `said`. "slow": every checkpoint's rename waits 2 s, so a kill lands while its
    temporary file is there; "disk-full": files this process writes stop at 64 KiB, as on a
    full disk."""
    sys.stderr = open(said, "w", buffering=1)  # noqa: SIM115 -- the process's whole life
    if mode == "slow":
        replace = os.replace

        def slow(*args: object, **kwargs: object) -> None:
            time.sleep(2)
            replace(*args, **kwargs)

        os.replace = slow
    elif mode == "disk-full":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
    torch.set_num_threads(1)
    model = _model()
    if mode == "disk-full":
        model.big = torch.nn.Parameter(torch.zeros(40000))  # 160 KB: past the limit
    data = [make_batch([[5, 6, 7]], [[8, 9]], IDS)]
    plan = Plan(8, 1e-2, 2, 0.0, 2, checkpoint=path, checkpoint_key="p", checkpoint_s=0.0)
    log = train(model, TrainStream(data, 0), plan, torch.device("cpu"), 0,
                lambda: {"dev_bleu_greedy": 0.0})
    print(f"steps {log.steps} resumed_from {log.resumed_from}", file=sys.stderr)


def _start(path: Path, mode: str, notes: Path) -> tuple[multiprocessing.Process, Path]:
    said = notes / f"said-{mode}-{time.monotonic_ns()}.txt"
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(path, mode, said))
    proc.start()
    return proc, said


def _finish(proc: multiprocessing.Process, said: Path) -> str:
    proc.join(timeout=60)
    assert proc.exitcode == 0, said.read_text()
    return said.read_text()


def test_a_full_disk_keeps_training_without_checkpoints(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    err = _finish(*_start(folder / "c.pt", "disk-full", tmp_path))
    assert "steps 8 resumed_from 0" in err
    warnings = [x for x in err.splitlines() if "warning" in x]
    assert len(warnings) == 1 and "c.pt" in warnings[0], err
    assert "Traceback" not in err and list(folder.iterdir()) == []  # no half file left


@pytest.mark.slow
def test_a_kill_during_a_checkpoint_write_leaves_nothing_that_blocks_the_rerun(
        tmp_path: Path) -> None:
    """kill -9 while a checkpoint's temporary file is there: the rerun removes it, resumes
    from the last whole checkpoint and completes the point."""
    path = tmp_path / "ckpt" / "c.pt"
    proc, _ = _start(path, "slow", tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.is_alive():
        if path.exists() and list(path.parent.glob(".c.pt.*.tmp")):  # the second write
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.join(timeout=60)
    assert proc.exitcode == -signal.SIGKILL, "the run ended before it could be killed"
    assert list(path.parent.glob(".c.pt.*.tmp"))  # what the kill left
    err = _finish(*_start(path, "fast", tmp_path))
    assert "steps 8 resumed_from " in err and "resumed_from 0" not in err, err
    assert list(path.parent.glob(".*.tmp")) == [] and "warning" not in err, err


def test_no_resume_trains_from_scratch_whatever_checkpoint_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    first, _ = _train(path)  # finished: its final checkpoint kept
    assert checkpoint.load(path, "p")["log"]["steps"] == STEPS
    resumed, seen_resumed = _train(path)
    assert resumed.resumed_from == STEPS and seen_resumed == []  # resume: nothing to train
    again, seen = _train(path, resume=False)
    assert again.resumed_from == 0 and seen[0] == 0 and len(seen) == 1 + STEPS // 4
    def curves(log) -> dict:  # noqa: ANN001 -- the measured seconds aside
        return {k: v for k, v in log.series.items() if k != "train_s"}

    assert curves(again) == curves(first) and again.flops == first.flops


def test_tvr_run_no_resume_reaches_the_runner(tmp_path: Path, monkeypatch) -> None:
    """`tvr run --no-resume` gives every point a context that says so (the translation
    runner passes it to its Plan); the default resumes."""
    import experiments
    from harness.cli import cli
    from harness.run import runner_table
    from harness.runner import Result

    seen: list[bool] = []

    def fake(point, ctx) -> Result:  # noqa: ANN001
        seen.append(ctx.resume)
        return Result({"x": 1.0})

    point = experiments.points("smoke")[0]
    monkeypatch.setitem(experiments.SUITES, "smoke", lambda: [point])
    monkeypatch.setitem(runner_table.RUNNERS, point.runner, fake)
    for flag in ("--resume", "--no-resume", "--no-resume"):
        result = CliRunner().invoke(cli, ["run", "smoke", flag, "--out", str(tmp_path),
                                          "--tracking-uri", "none"])
        assert result.exit_code == 0, result.output
    assert seen == [True, False, False]


def test_pickles_of_old_checkpoints_are_not_loaded(tmp_path: Path) -> None:
    """A checkpoint written by pickling arbitrary objects (the log as a class instance, as
    before) is refused by weights_only and moved aside, not executed."""
    path = tmp_path / "c.pt"
    with open(path, "wb") as f:
        pickle.dump({"point_id": "p", "log": Crafted(tmp_path / "ran")}, f)
    assert checkpoint.load(path, "p") is None and not (tmp_path / "ran").exists()
