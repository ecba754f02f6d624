"""Checkpoints of a training point, so a killed or preempted point resumes where it was.

A checkpoint holds everything the rest of the run depends on (harness.train.trainer writes
it): the model, the optimiser and schedule states, the torch RNG state (dropout), and the
study's own state: the step reached (the data position: every study's batches are a pure
function of seed and step), the log so far (curves, FLOPs, seconds), the running sums and
the early-stopping state (the best weights and when they were seen). Resuming from it gives
the numbers an uninterrupted run gives, the measured seconds aside.

It holds tensors and plain data only (dicts, lists, tuples, numbers, text) and is read with
torch.load(weights_only=True), so a crafted file cannot run code. It is written atomically
(a temporary file in the same folder, then os.replace), so a kill while writing leaves the
previous checkpoint whole; the temporary files a kill leaves are removed at the next start.
A checkpoint that cannot be used (not a regular file, damaged, another point's or another
model's) is moved aside, named in a warning, and the point starts afresh; one that cannot
be written (a full disk, a read-only folder) is said once, and training goes on without.
"""

from __future__ import annotations

import io
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from experiments.spec import Point
from harness.console import say
from harness.files import write_atomic
from harness.runner import Context

CHECKPOINTS = "checkpoints"  # the folder, beside the suite's results.csv


def point_path(point: Point, ctx: Context) -> Path | None:
    """<out>/<suite>/checkpoints/<model>-s<seed>-<digest>-<device>.pt (Point.digest, the
    digest of its config_key, as before ids were short: an older run's checkpoint is found);
    None without an output folder."""
    if ctx.cache_dir is None:
        return None
    name = f"{point.subject}-s{point.seed}-{point.digest}-{ctx.device.type}.pt"
    return ctx.cache_dir / point.suite / CHECKPOINTS / name


def finished(path: Path | None, ctx: Context) -> None:
    """A finished point's checkpoint goes, unless the sweep keeps them."""
    if path is not None and not ctx.keep_checkpoints:
        path.unlink(missing_ok=True)


def save(path: Path, state: dict[str, Any]) -> bool:
    """torch.save(state) to `path`, atomically; False (and a warning) where the file cannot
    be written: the caller trains on without checkpoints."""
    buffer = io.BytesIO()
    torch.save(state, buffer)  # in memory first: a failure past here is the disk's
    try:
        write_atomic(path, buffer.getvalue())
    except OSError as e:
        say(f"warning: cannot write checkpoint {path} ({e.strerror or e}); this point trains "
            "on without checkpoints (a kill now restarts it from scratch)")
        return False
    return True


def load(path: Path, key: str,
         model: Mapping[str, torch.Tensor] | None = None) -> dict[str, Any] | None:
    """The checkpoint at `path` if it is this point's (it holds `key`, the point's
    config_key, and fits `model`'s state dict when given), else None: no file, or one moved
    aside with a warning. Temporary files a killed writer left beside it are removed first."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)  # this point's own writer: no other runs it now
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return _aside(path, f"cannot be read ({e.strerror})")
    if not stat.S_ISREG(mode):
        return _aside(path, "is not a regular file")
    try:
        state = torch.load(io.BytesIO(_read(path)), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 -- whatever a damaged file raises, it is unusable
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        return _aside(path, f"cannot be read ({type(e).__name__}: {first})")
    if not isinstance(state, dict):
        return _aside(path, f"holds a {type(state).__name__}, not a checkpoint")
    if state.get("point_id") != key:
        return _aside(path, f"belongs to point {str(state.get('point_id'))[:80]!r}")
    if model is not None and not _fits(state.get("model"), model):
        return _aside(path, "holds another model's weights (names or shapes differ)")
    return state


def _read(path: Path) -> bytes:
    """The file's bytes, opened without blocking or following a link, and checked to be a
    regular file once open (a FIFO put in its place meanwhile is never read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return f.read()


def _fits(saved: Any, model: Mapping[str, torch.Tensor]) -> bool:
    """Whether saved weights have exactly the model's names and shapes."""
    if not isinstance(saved, dict) or saved.keys() != model.keys():
        return False
    return all(isinstance(saved[k], torch.Tensor) and saved[k].shape == v.shape
               for k, v in model.items())


def _aside(path: Path, why: str) -> None:
    """Move an unusable checkpoint out of the way (kept for a look), say so; None."""
    backup = path.with_name(f"{path.name}.unusable-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        os.replace(path, backup)
    except OSError as e:
        say(f"warning: checkpoint {path} {why} and cannot be moved aside ({e.strerror}); "
            "this point starts from scratch")
        return None
    say(f"warning: checkpoint {path} {why}: moved aside to {backup.name}; this point "
        "starts from scratch")
    return None
