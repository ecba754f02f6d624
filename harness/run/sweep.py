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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import models
from experiments.spec import Point
from harness.errors import BadInput
from harness.measure.compare import run_compare
from harness.measure.machine import machine_facts
from harness.measure.timing import measure_layer, saved_tensor_bytes
from harness.report.table1 import run_path, run_seq_ops
from harness.results import append_row, append_series, done_points, results_path, series_path
from harness.run.progress import progress_bar
from harness.run.tracking import Tracker
from harness.train.points import run_train
from harness.train.probes import run_attn_init, run_grad_distance, run_layer_grads

# Measures whose runners cast the layer to Point.dtype and honour Point.compile; `tvr run
# --dtype/--compile` changes only these points.
CAST_MEASURES = ("layer", "compare")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(name: str) -> torch.device:
    """"auto" picks CUDA when present; asking for CUDA without it is bad input, not a crash."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: no CUDA device is available here; use --device cpu")
    if name not in ("cpu", "cuda"):
        raise BadInput(f"unknown device {name!r}; valid: auto, cpu, cuda")
    return torch.device(name)


# ---------------------------------------------------------------- runners, one per Point.measure


def _layer_input(point: Point, device: torch.device, batch: int, n: int) -> torch.Tensor:
    return torch.randn(batch, n, point.d_model, device=device, dtype=DTYPES[point.dtype])


def _build_mixer(point: Point, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(point.seed)
    module = models.mixer(point.mixer, point.d_model, **point.config)
    return module.to(device=device, dtype=DTYPES[point.dtype]).train()


def predict_layer_bytes(point: Point, device: torch.device) -> int:
    """Predicted training footprint of a layer point: activations saved for backward, measured
    at n = 8, 16, 32 with batch 1 and extrapolated with the exact quadratic through them
    (attention's n^2 term, recurrence's n term), times the batch; plus weights and grads."""
    module = _build_mixer(point, device)
    ns = np.array([8, 16, 32])
    saved = [saved_tensor_bytes(lambda n=n: module(_layer_input(point, device, 1, int(n))),
                                module.parameters()) for n in ns]
    coeffs = np.polyfit(ns, saved, 2)
    per_seq = max(0.0, float(np.polyval(coeffs, point.seq_len)))
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    return int(point.batch_size * per_seq + 2 * params)


def run_layer(point: Point, device: torch.device, min_run_time: float) -> dict[str, Any]:
    module = _build_mixer(point, device)
    x = _layer_input(point, device, point.batch_size, point.seq_len)
    return measure_layer(module, x, min_run_time=min_run_time, compile=point.compile)


# A runner returns the point's metrics. Two optional keys are not metrics: "status" (e.g.
# "diverged", for a run that ended without an exception but did not succeed, with "message")
# and "series" ({name: [(step, value), ...]}, logged to MLflow with step= and stored in
# <out>/<suite>/series.csv).
Runner = Callable[[Point, torch.device, float], dict[str, Any]]
RUNNERS: dict[str, Runner] = {
    "seq-ops": run_seq_ops,  # Table 1's sequential operations (autograd graph depth)
    "path": run_path,  # Table 1's maximum path length
    "layer": run_layer,
    "compare": run_compare,  # ours vs PyTorch's layer, interleaved (tvr bench)
    "train": run_train,  # train a model on a task: final metrics + curves
    "attn-init": run_attn_init,  # q.k variance, attention entropy, softmax Jacobian at init
    "layer-grads": run_layer_grads,  # per-layer gradient norm at init
    "grad-distance": run_grad_distance,  # ||dL_t/dx_{t-k}|| vs k, at init and trained
}
PREDICTORS: dict[str, Callable[[Point, torch.device], int]] = {
    "layer": predict_layer_bytes,
}


# ---------------------------------------------------------------- the sweep


@dataclass
class SweepSummary:
    suite: str
    results: Path
    statuses: Counter = field(default_factory=Counter)
    resumed: int = 0  # points skipped because they were already done (ok or diverged)
    wall_s: float = 0.0

    def line(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items())) or "nothing run"
        resumed = f"; {self.resumed} already done, skipped (--no-resume reruns them)" \
            if self.resumed else ""
        return f"{self.suite}: {counts}{resumed} in {self.wall_s:.1f} s -> {self.results}"


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)


def run_point(
    point: Point, device: torch.device, max_memory: int | None, min_run_time: float
) -> tuple[str, str, dict[str, Any]]:
    """(status, message, metrics) for one point; never raises except KeyboardInterrupt.
    metrics may hold "series" (see RUNNERS)."""
    metrics: dict[str, Any] = {}
    try:
        if max_memory is not None and point.measure in PREDICTORS:
            metrics["predicted_bytes"] = PREDICTORS[point.measure](point, device)
            if metrics["predicted_bytes"] > max_memory:
                return "skipped", (f"predicted {metrics['predicted_bytes']:,} bytes > "
                                   f"--max-memory {max_memory:,}"), metrics
        started = time.perf_counter()
        metrics |= RUNNERS[point.measure](point, device, min_run_time)
        metrics["wall_s"] = time.perf_counter() - started
        return metrics.pop("status", "ok"), metrics.pop("message", ""), metrics
    except Exception as exc:  # a failed point is a row, never a crashed sweep
        status = "oom" if _is_oom(exc) else "error"
        metrics["traceback"] = traceback.format_exc()  # to <suite>/errors.log, not the row
        return status, f"{type(exc).__name__}: {exc}".splitlines()[0][:500], metrics
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()  # an OOM must not poison the next point


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
    """Measure every point not already done on this device; one results row and one MLflow
    child run each."""
    path = results_path(out_dir, suite)
    summary = SweepSummary(suite, path)
    done = done_points(path, device.type) if resume else set()
    todo = [p for p in points if p.point_id not in done]
    summary.resumed = len(points) - len(todo)
    facts = machine_facts(device)
    started = time.perf_counter()
    params = {"suite": suite, "device": str(device), "points": len(points),
              "min_run_time": min_run_time, "max_memory": max_memory, **facts}
    with Tracker(tracking_uri, suite, out_dir, params) as tracker:
        bar = progress_bar(todo, suite, enabled=progress)
        for point in bar:
            bar.set_postfix_str(point.point_id, refresh=True)
            status, message, metrics = run_point(point, device, max_memory, min_run_time)
            series = metrics.pop("series", None)
            trace = metrics.pop("traceback", None)
            if trace:  # the row keeps one line; the whole story goes beside it
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path.parent / "errors.log", "a", encoding="utf-8") as log:
                    log.write(f"=== {point.point_id}\n{trace}\n")
            fields = asdict(point)
            del fields["knobs"]
            row = {**fields, "point_id": point.point_id, "device": device.type,
                   "status": status, **point.config, **metrics, **facts, "message": message}
            if series:  # before the row: a row marked done always has its curves
                append_series(series_path(out_dir, suite), point.point_id, series)
            append_row(path, row)
            numbers = {k: v for k, v in metrics.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}
            texts = {k: v for k, v in metrics.items() if k not in numbers}
            tracker.log_point(point.point_id, {**fields, **point.config, **texts}, numbers,
                              status, message, series)
            summary.statuses[status] += 1
        bar.close()
        summary.wall_s = time.perf_counter() - started
        if path.exists():
            tracker.log_artifact(path)
    return summary
