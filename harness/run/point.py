"""One point measured: its runner called, every failure turned into a status, the wall
clock around it; and the device a sweep's points run on. Below both the sweep and the
executors, which call it wherever a point runs.

A failing point never raises: CUDA (or host) out-of-memory becomes "oom", a point predicted
over --max-memory becomes "skipped" with the prediction, any other exception becomes
"error" with its message and traceback.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import torch

from experiments.spec import CAST_RUNNERS, Point
from harness.errors import BadInput
from harness.measure.kernel_choice import use_measured_kernels
from harness.measure.machine import Occupancy
from harness.run.runner_table import PREDICTORS, RUNNERS
from harness.runner import Context, Result

# Runners whose numbers are times: their point gets its device to itself (one GPU, or on a
# CPU node every core of the node), so no other point shares the cores it is timing on.
TIMED_RUNNERS = CAST_RUNNERS


def resolve_device(name: str) -> torch.device:
    """"auto" picks CUDA when present; asking for CUDA without it is bad input, not a crash."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: no CUDA device is available here; use --device cpu")
    if name not in ("cpu", "cuda"):
        raise BadInput(f"unknown device {name!r}; valid: auto, cpu, cuda")
    return torch.device(name)


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)


def run_point(point: Point, ctx: Context, max_memory: int | None
              ) -> tuple[Result, str | None]:
    """The point's result (status ok, diverged, skipped, oom or error) and, for an error, its
    traceback; never raises except KeyboardInterrupt."""
    predicted: dict[str, Any] = {}
    try:
        if max_memory is not None and point.runner in PREDICTORS:
            predicted["predicted_bytes"] = PREDICTORS[point.runner](point, ctx.device)
            if predicted["predicted_bytes"] > max_memory:
                return Result(predicted, status="skipped", message=(
                    f"predicted {predicted['predicted_bytes']:,} bytes > "
                    f"--max-memory {max_memory:,}")), None
        # the kernels this machine runs fastest, measured once per host (not timed here);
        # a compiled point's graphs take inductor's GEMMs whatever the eager choice
        kernels = {"linear_kernel": "inductor"} if point.compile else \
            use_measured_kernels(ctx.device, getattr(torch, point.dtype))
        started = time.perf_counter()
        with Occupancy() as occupancy:
            result = RUNNERS[point.runner](point, ctx)
        # a time measured beside other work says little: the row says how busy it was
        busy = occupancy.values() if point.runner in TIMED_RUNNERS else {}
        result.values = predicted | result.values | busy | kernels | {
            "wall_s": time.perf_counter() - started}
        return result, None
    except Exception as exc:  # a failed point is a row, never a crashed sweep
        status = "oom" if _is_oom(exc) else "error"
        message = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        return Result(predicted, status=status, message=message), traceback.format_exc()
    finally:
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()  # an OOM must not poison the next point


@dataclass
class Measured:
    """One finished point: the runner's result, its traceback for an error, and the facts of
    the process that measured it (the node, for Ray)."""

    point: Point
    result: Result
    trace: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    started_ms: int | None = None  # wall clock, so the point's MLflow run spans what it did
    ended_ms: int | None = None


def measure(point: Point, ctx: Context, max_memory: int | None,
            facts: dict[str, Any] | None = None) -> Measured:
    """run_point, timed on the wall clock."""
    started_ms = int(time.time() * 1000)
    result, trace = run_point(point, ctx, max_memory)
    return Measured(point, result, trace, facts or {}, started_ms, int(time.time() * 1000))
