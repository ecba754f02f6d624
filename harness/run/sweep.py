"""Run a suite's points one by one; every point ends as exactly one row with a status.

A failing point never stops the sweep: CUDA (or host) out-of-memory becomes "oom", a point
predicted over --max-memory becomes "skipped" with the prediction, any other exception becomes
"error" with its message. Rows are written atomically after each point, so a killed run loses
at most the point in flight, and --resume skips the points already "ok".
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from experiments.spec import Point
from harness.errors import BadInput
from harness.measure.machine import machine_facts
from harness.results import (
    SERIES_FILE,
    append_row,
    append_series,
    done_points,
    read_results,
    read_series,
    results_path,
    this_machine,
)
from harness.run.progress import progress_bar
from harness.run.runners import PREDICTORS, RUNNERS
from harness.run.tracking import Tracker
from harness.runner import Context, Result


def resolve_device(name: str) -> torch.device:
    """"auto" picks CUDA when present; asking for CUDA without it is bad input, not a crash."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: no CUDA device is available here; use --device cpu")
    if name not in ("cpu", "cuda"):
        raise BadInput(f"unknown device {name!r}; valid: auto, cpu, cuda")
    return torch.device(name)


# ---------------------------------------------------------------- the sweep


@dataclass
class SweepSummary:
    suite: str
    results: Path
    statuses: Counter = field(default_factory=Counter)
    resumed: int = 0  # points this machine had already done (ok or diverged), skipped
    wall_s: float = 0.0
    synced: int = 0  # stored rows logged to MLflow late (written before a kill)
    tracking_off: str | None = None  # why tracking stopped, if it did

    def line(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items())) or "nothing run"
        resumed = (f"; {self.resumed} already done on this machine, skipped (--no-resume "
                   "reruns them)") if self.resumed else ""
        synced = f"; {self.synced} stored rows logged to MLflow late" if self.synced else ""
        return (f"{self.suite}: {counts}{resumed}{synced} in {self.wall_s:.1f} s -> "
                f"{self.results}")


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
        started = time.perf_counter()
        result = RUNNERS[point.runner](point, ctx)
        result.values = predicted | result.values | {"wall_s": time.perf_counter() - started}
        return result, None
    except Exception as exc:  # a failed point is a row, never a crashed sweep
        status = "oom" if _is_oom(exc) else "error"
        message = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        return Result(predicted, status=status, message=message), traceback.format_exc()
    finally:
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()  # an OOM must not poison the next point


def _record(point: Point, result: Result, trace: str | None, path: Path,
            device: torch.device, facts: dict[str, Any], tracker: Tracker) -> None:
    """Write the point's row to `path` (curves and traceback beside it); log it to MLflow."""
    if trace:  # the row keeps one line; the whole story goes beside it
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / "errors.log", "a", encoding="utf-8") as log:
            log.write(f"=== {point.point_id}\n{trace}\n")
    fields, columns = point.fields(), point.columns()
    row = {**fields, "point_id": point.point_id, "device": device.type,
           "status": result.status, **columns, **result.values, **facts,
           "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "message": result.message}
    if result.series:  # before the row: a row marked done always has its curves
        append_series(path.parent / SERIES_FILE, point.point_id, result.series,
                      facts["machine"])
    append_row(path, row)
    numbers = {k: v for k, v in result.values.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    texts = {k: v for k, v in result.values.items() if k not in numbers}
    tracker.log_point(point.point_id, {**fields, **columns, **texts}, numbers,
                      result.status, result.message, result.series, facts["machine"],
                      device.type)


def run_suite(
    suite: str,
    points: list[Point],
    device: torch.device,
    out_dir: Path,
    tracking_uri: str | None,
    resume: bool = True,
    max_memory: int | None = None,
    min_run_time: float = 0.2,
    progress: bool = True,
) -> SweepSummary:
    """Measure every point not already done on this device of this machine; one results row
    and one MLflow child run each."""
    path = results_path(out_dir, suite)
    summary = SweepSummary(suite, path)
    machine = this_machine()
    done = done_points(path, device.type, machine) if resume else set()
    todo = [p for p in points if p.point_id not in done]
    summary.resumed = len(points) - len(todo)
    facts = {"machine": machine, **machine_facts(device)}
    started = time.perf_counter()
    params = {"suite": suite, "device": str(device), "points": len(points),
              "min_run_time": min_run_time, "max_memory": max_memory, **facts}
    ctx = Context(device, min_run_time, results_dir=path.parent)
    with Tracker(tracking_uri, suite, out_dir, params) as tracker:
        summary.synced = _sync_mine(tracker, path, device.type, machine)
        bar = progress_bar(todo, suite, enabled=progress)
        for point in bar:
            # a sweep beside this one in the same folder may have measured it meanwhile
            if resume and point.point_id in done_points(path, device.type, machine):
                summary.resumed += 1
                continue
            bar.set_postfix_str(point.point_id, refresh=True)
            result, trace = run_point(point, ctx, max_memory)
            _record(point, result, trace, path, device, facts, tracker)
            summary.statuses[result.status] += 1
        bar.close()
        summary.wall_s = time.perf_counter() - started
        if path.exists():
            tracker.log_artifact(path)
        summary.tracking_off = None if tracker.error is None else str(tracker.error)
    return summary


def _sync_mine(tracker: Tracker, path: Path, device: str, machine: str) -> int:
    """Log to MLflow this machine's rows that a killed run wrote but never logged."""
    if tracker.error is not None or not tracker.enabled or not path.exists():
        return 0
    rows = read_results(path)
    mine = rows[(rows["machine"].astype(str) == machine) & (rows["device"] == device)]
    series = read_series(path.parent.parent, path.parent.name) \
        if (path.parent / SERIES_FILE).exists() else None
    return tracker.sync(mine, series)
