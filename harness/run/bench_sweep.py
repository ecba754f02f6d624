"""`tvr bench`: our layers against PyTorch's, measured; harness.report.bench makes the table.

The measuring is harness.measure.compare's (one point = one interleaved comparison); this module
picks the points for the device and runs them as the suite "bench" (so rows, statuses and
MLflow runs are the sweep's), and returns the rows with the machine facts they ran under.
With oneDNN removed from the kernel candidates (`--no-onednn`) the suite is "bench-no-onednn":
its ratios answer another question (a machine whose fastest matmul is torch.mm) and are kept
apart.
`tvr bench --profile` instead returns torch.profiler's per-op tables of the transformer layer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from experiments import bench as grids
from experiments.spec import Point
from harness.measure.kernel_choice import use_measured_kernels
from harness.measure.kernels import onednn_disabled
from harness.measure.machine import machine_facts
from harness.results import read_results, results_path
from harness.run.sweep import SweepSummary, run_suite

SUITE = "bench"


def suite() -> str:
    """The suite (and folder) this process's bench rows go to."""
    return f"{SUITE}-no-onednn" if onednn_disabled() else SUITE


def resolve_dtype(dtype: str, device: torch.device) -> str:
    """"auto": fp32 on CPU (its fast matmul path), bf16 on CUDA (tensor cores, flash)."""
    if dtype == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    return dtype


def bench_points(device: torch.device, dtype: str, grid: str, compile: bool = False
                 ) -> list[Point]:
    points = grids.points(suite(), device.type, grid, resolve_dtype(dtype, device))
    return [replace(p, compile=True) for p in points] if compile else points


@dataclass
class BenchResult:
    summary: SweepSummary
    rows: pd.DataFrame  # this run's rows of <out>/<suite()>/results.csv
    facts: dict[str, Any]  # machine facts of the run (device_name, threads, torch_version)
    dtype: str  # the dtype the points ran in ("auto" resolved)


def run_bench(device: torch.device, dtype: str, grid: str, out_dir: Path, uri: str | None,
              min_run_time: float = 0.2, compile: bool = False, progress: bool = True
              ) -> BenchResult:
    """Measure every comparison of `grid` on `device`; the rows go to the suite's results."""
    points = bench_points(device, dtype, grid, compile)
    name = suite()
    summary = run_suite(name, points, device, out_dir, uri, resume=False,
                        min_run_time=min_run_time, progress=progress)
    rows = read_results(results_path(out_dir, name))
    rows = rows[rows["point_id"].isin({p.point_id for p in points})]
    return BenchResult(summary, rows, machine_facts(device), resolve_dtype(dtype, device))


def run_profile(device: torch.device, dtype: str, grid: str
                ) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """torch.profiler tables of our transformer layer (sdpa and math) against PyTorch's at the
    grid's first layer size: (what was profiled: sizes, dtype, device, threads; backend ->
    per-op table with ops as the index)."""
    from harness.measure.profile import layer_profile

    head = next(p for p in bench_points(device, dtype, grid)
                if p.subject == "transformer-layer")
    n_heads = dict(head.config)["n_heads"]
    dt = getattr(torch, head.dtype)
    kernels = use_measured_kernels(device, dt)  # the linear maps a timed bench would run
    setup = {"batch_size": head.batch_size, "seq_len": head.seq_len, "d_model": head.d_model,
             "n_heads": n_heads, "dtype": head.dtype, "device": device.type,
             "threads": torch.get_num_threads(), **kernels}
    tables = {backend: layer_profile(device, dt, head.batch_size, head.seq_len, head.d_model,
                                     n_heads, backend)
              for backend in ("sdpa", "math")}
    return setup, tables
