"""`tvr bench`: our layers against PyTorch's, the table of ratios, the headline verdicts.

The measuring is harness.measure.compare's (one point = one interleaved comparison); this module picks
the points for the device, runs them as the suite "bench" (so rows, statuses and MLflow runs
are the sweep's), and turns the rows into the printed and saved table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import torch

from experiments import bench as grids
from experiments.spec import Point
from harness.measure.compare import MFU_TARGET_CPU
from harness.measure.machine import machine_facts
from harness.results import read_results, results_path, write_atomic
from harness.run.sweep import SweepSummary, run_suite

SUITE = "bench"
TABLE_FILE = "table.md"


def resolve_dtype(dtype: str, device: torch.device) -> str:
    """"auto": fp32 on CPU (its fast matmul path), bf16 on CUDA (tensor cores, flash)."""
    if dtype == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    return dtype


def bench_points(device: torch.device, dtype: str, grid: str, compile: bool = False
                 ) -> list[Point]:
    points = grids.points(SUITE, device.type, grid, resolve_dtype(dtype, device))
    return [replace(p, compile=True) for p in points] if compile else points


@dataclass
class BenchResult:
    summary: SweepSummary
    rows: pd.DataFrame  # this run's rows of <out>/bench/results.csv
    markdown: str  # the table and verdicts, as printed and saved to <out>/bench/table.md
    table_path: Path


def run_bench(device: torch.device, dtype: str, grid: str, out_dir: Path, uri: str | None,
              min_run_time: float = 0.2, compile: bool = False, progress: bool = True
              ) -> BenchResult:
    """Measure every comparison of `grid` on `device`, write rows and the table."""
    points = bench_points(device, dtype, grid, compile)
    summary = run_suite(SUITE, points, device, out_dir, uri, resume=False,
                        min_run_time=min_run_time, progress=progress)
    rows = read_results(results_path(out_dir, SUITE))
    rows = rows[rows["point_id"].isin({p.point_id for p in points})]
    facts = machine_facts(device)
    header = (f"`tvr bench` ({grid} grid) on {facts['device_name']} ({device.type}, "
              f"{facts['threads']} threads), torch {facts['torch_version']}, "
              f"{resolve_dtype(dtype, device)}. Times: forward+backward in train mode, ours "
              "and PyTorch's interleaved; ms and ratio are medians of per-repetition medians "
              "(range: per-repetition ratios), best-of ratio = best ours / best PyTorch's; "
              "MFU = counted FLOPs / median time / best matmul rate in the same run.")
    markdown = "\n\n".join([header, render(ratio_table(rows)),
                              "\n".join(verdicts(rows, device))]) + "\n"
    table_path = out_dir / SUITE / TABLE_FILE
    write_atomic(table_path, markdown)
    return BenchResult(summary, rows, markdown, table_path)


def run_profile(device: torch.device, dtype: str, grid: str, out_dir: Path
                ) -> tuple[str, Path]:
    """torch.profiler table of our transformer layer (sdpa and math) against PyTorch's at the
    grid's first layer size; written to <out>/bench/profile.md."""
    from harness.measure.profile import layer_profile

    head = next(p for p in bench_points(device, dtype, grid) if p.mixer == "transformer-layer")
    dt = getattr(torch, head.dtype)
    parts = [f"torch.profiler, self time per op (ATen, oneDNN), ms per forward+backward "
             f"(train mode), B={head.batch_size}, n={head.seq_len}, d={head.d_model}, "
             f"h={head.config['n_heads']}, {head.dtype}, {device.type}, "
             f"{torch.get_num_threads()} threads."]
    for backend in ("sdpa", "math"):
        table = layer_profile(device, dt, head.batch_size, head.seq_len, head.d_model,
                              head.config["n_heads"], backend)
        parts.append(f"### ours ({backend}) vs nn.TransformerEncoderLayer\n\n"
                     + render(table.rename_axis("op").reset_index()))
    markdown = "\n\n".join(parts) + "\n"
    path = out_dir / SUITE / "profile.md"
    write_atomic(path, markdown)
    return markdown, path


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""  # pandas reads an empty cell as NaN


def _num(value: object, fmt: str) -> str:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(number) else format(number, fmt)


_COLUMNS = ("variant", "reference", "ours_ms", "ref_ms", "ratio", "ratio_min", "ratio_max",
            "ratio_best",
            "target", "meets_target", "mfu", "ref_mfu", "peak_flops_per_s", "peak_dtype",
            "kernel", "ref_kernel", "peak_kernel")


def _with_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with every column the table reads (a run of only failed points has none)."""
    return rows.reindex(columns=list(dict.fromkeys([*rows.columns, *_COLUMNS])))


def ratio_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per comparison: sizes, both times, the ratio and its per-repetition range,
    the target, MFU of ours and of PyTorch's layer, the kernels that ran, the status."""
    lines = []
    for _, r in _with_columns(rows).iterrows():
        ok = r["status"] == "ok"
        ratio = (f"{_num(r['ratio'], '.3f')} ({_num(r['ratio_min'], '.2f')}-"
                 f"{_num(r['ratio_max'], '.2f')})") if ok else r["status"]
        target = _num(r["target"], ".2f")
        if target:
            target = ("±" + _num(float(r["target"]) - 1, ".2f")
                      if r["variant"] == "harness-timer" else f"<= {target}")
            met = str(r["meets_target"]) == "True"
            target += " ok" if ok and met else " MISSED" if ok else ""
        mfu = _num(r["mfu"], ".2f")
        if mfu:
            mfu += f" / {_num(r['ref_mfu'], '.2f')}"
        lines.append({
            "comparison": _text(r["variant"]) or r["mixer"],
            "vs": _text(r["reference"]),
            "B,n,d": f"{r['batch_size']},{r['seq_len']},{r['d_model']}",
            "ours ms": _num(r["ours_ms"], ".4g"),
            "ref ms": _num(r["ref_ms"], ".4g"),
            "ratio (range)": ratio,
            "best-of ratio": _num(r["ratio_best"], ".3f"),
            "target": target,
            "MFU ours / ref": mfu,
            "kernel ours / ref": "/".join(k for k in (_text(r["kernel"]),
                                                      _text(r["ref_kernel"])) if k),
        })
    return pd.DataFrame(lines)


def render(table: pd.DataFrame) -> str:
    """A Markdown table without tabulate (a bare GPU machine may lack it)."""
    if table.empty:
        return "(no comparisons)"
    cols = list(table.columns)
    cells = [[str(v) for v in row] for row in table.itertuples(index=False)]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cols), rule, *(line(row) for row in cells)])


def verdicts(rows: pd.DataFrame, device: torch.device) -> list[str]:
    """The issue's targets, each as one line saying what was measured and whether it holds."""
    out = []
    ok = _with_columns(rows[rows["status"] == "ok"])
    for variant, what in (("transformer-layer/sdpa", "transformer layer (sdpa) vs "
                           "nn.TransformerEncoderLayer"),
                          ("transformer-layer/math", "transformer layer (math) vs "
                           "nn.TransformerEncoderLayer"),
                          ("lstm/fused", "fused LSTM vs nn.LSTM"),
                          ("gru/fused", "fused GRU vs nn.GRU"),
                          ("lstm/cell", "explicit-cell LSTM vs nn.LSTM"),
                          ("gru/cell", "explicit-cell GRU vs nn.GRU"),
                          ("harness-timer", "harness time_fn vs bare benchmark.Timer")):
        sel = ok[ok["variant"] == variant]
        if sel.empty:
            continue
        ratios, best = sel["ratio"].astype(float), sel["ratio_best"].astype(float)
        target = sel["target"].iloc[0]
        verdict = ""
        if isinstance(target, (int, float)) and not math.isnan(float(target)):
            met = int((sel["meets_target"].astype(str) == "True").sum())
            verdict = f"; target met at {met}/{len(sel)} sizes"
        out.append(f"- {what}: ratio {ratios.min():.3f}..{ratios.max():.3f} over "
                   f"{len(sel)} size(s), median {ratios.median():.3f}{verdict}; best-of "
                   f"ratio {best.min():.3f}..{best.max():.3f}")
    layer = ok[(ok["variant"] == "transformer-layer/sdpa") & (ok["seq_len"] == 512)
               & (ok["d_model"] == 512)]
    if not layer.empty:
        mfu = float(layer["mfu"].iloc[0])
        peak = float(layer["peak_flops_per_s"].iloc[0])
        line = (f"- MFU of the transformer layer (sdpa) at n = d = 512: {mfu:.2f} of a "
                f"measured {peak / 1e9:,.0f} GFLOP/s {layer['peak_dtype'].iloc[0]} matmul peak "
                f"(the faster of torch.mm and oneDNN: {layer['peak_kernel'].iloc[0]})")
        if device.type == "cpu":
            met = "met" if mfu >= MFU_TARGET_CPU else "MISSED"
            line += f" (CPU target >= {MFU_TARGET_CPU}: {met})"
        out.append(line)
    return out
