"""`tvr bench` on paper: the table of ratios, the headline verdicts and the profile tables.

Everything here reads measured rows (and the machine facts they were measured with); the
measuring is harness.run.bench_sweep's. The targets each comparison was held to are recorded in its
row (column `target`); the one target that is not a ratio, the transformer layer's MFU on
CPU, is this module's MFU_TARGET_CPU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from harness.files import write_atomic
from harness.report.markdown import markdown_table

TABLE_FILE = "table.md"  # under <out>/bench/
PROFILE_FILE = "profile.md"
# Model FLOPs utilisation the transformer layer (sdpa) should reach on CPU at n = d = 512 in
# fp32, as a share of the best measured matmul rate in the same run.
MFU_TARGET_CPU = 0.5
# variant -> what the verdict line calls it, in the order the lines are printed
VERDICTS = (("transformer-layer/sdpa", "transformer layer (sdpa) vs nn.TransformerEncoderLayer"),
            ("transformer-layer/math", "transformer layer (math) vs nn.TransformerEncoderLayer"),
            ("lstm/fused", "fused LSTM vs nn.LSTM"),
            ("gru/fused", "fused GRU vs nn.GRU"),
            ("lstm/cell", "explicit-cell LSTM vs nn.LSTM"),
            ("gru/cell", "explicit-cell GRU vs nn.GRU"),
            ("harness-timer", "harness time_fn vs bare benchmark.Timer"))


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


def _target_cell(r: pd.Series, ok: bool) -> str:
    """"<= 0.90 ok", "±0.03 MISSED", or "" for a comparison that is reported only."""
    target = _num(r["target"], ".2f")
    if not target:
        return ""
    target = ("±" + _num(float(r["target"]) - 1, ".2f")
              if r["variant"] == "harness-timer" else f"<= {target}")
    met = str(r["meets_target"]) == "True"
    return target + (" ok" if ok and met else " MISSED" if ok else "")


def ratio_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per comparison: sizes, both times, the ratio and its per-repetition range,
    the target, MFU of ours and of PyTorch's layer, the kernels that ran, the status."""
    lines = []
    for _, r in _with_columns(rows).iterrows():
        ok = r["status"] == "ok"
        ratio = (f"{_num(r['ratio'], '.3f')} ({_num(r['ratio_min'], '.2f')}-"
                 f"{_num(r['ratio_max'], '.2f')})") if ok else r["status"]
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
            "target": _target_cell(r, ok),
            "MFU ours / ref": mfu,
            "kernel ours / ref": "/".join(k for k in (_text(r["kernel"]),
                                                      _text(r["ref_kernel"])) if k),
        })
    return pd.DataFrame(lines)


def _mfu_verdict(ok: pd.DataFrame, device_type: str) -> str | None:
    """The transformer layer's MFU at n = d = 512, judged against MFU_TARGET_CPU on CPU."""
    layer = ok[(ok["variant"] == "transformer-layer/sdpa") & (ok["seq_len"] == 512)
               & (ok["d_model"] == 512)]
    if layer.empty:
        return None
    mfu = float(layer["mfu"].iloc[0])
    peak = float(layer["peak_flops_per_s"].iloc[0])
    line = (f"- MFU of the transformer layer (sdpa) at n = d = 512: {mfu:.2f} of a "
            f"measured {peak / 1e9:,.0f} GFLOP/s {layer['peak_dtype'].iloc[0]} matmul peak "
            f"(the fastest of the matmul candidates: {layer['peak_kernel'].iloc[0]})")
    if device_type == "cpu":
        met = "met" if mfu >= MFU_TARGET_CPU else "MISSED"
        line += f" (CPU target >= {MFU_TARGET_CPU}: {met})"
    return line


# The swap points of harness.measure.kernels, as kernel_lines names them (column <point>_kernel).
SWAP_POINTS = {"linear": "linear maps (projections, FFN)",
               "qkv": "self-attention QKV projection",
               "ffn": "FFN first map and its ReLU",
               "attention": "attention (what attn_backend=auto runs)"}


def kernel_lines(rows: pd.DataFrame) -> list[str]:
    """Which kernel each measured swap point ran on (columns <point>_kernel, SWAP_POINTS)
    and the timings that chose it (<point>_kernel_ms), one line per distinct choice in
    these rows."""
    out = []
    for point, what in SWAP_POINTS.items():
        col = f"{point}_kernel"
        if col not in rows:
            continue
        ms = rows[f"{col}_ms"] if f"{col}_ms" in rows else pd.Series("", rows.index)
        for kernel, timing in dict.fromkeys(zip(rows[col], ms, strict=True)):
            if not _text(kernel):
                continue
            how = (f" (won, forward+backward ms at representative sizes: "
                   f"{_text(timing).replace(':', ' ').replace(';', ', ')})" if _text(timing)
                   else " (the only candidate)")
            out.append(f"- kernel chosen by measurement on this machine: {what} -> "
                       f"{kernel}{how}")
    return out


def verdicts(rows: pd.DataFrame, device_type: str) -> list[str]:
    """One line per comparison kind: the ratios measured over its sizes and, where its rows
    carry a target, at how many sizes it was met; then the MFU line. `device_type` is "cpu"
    or "cuda" (the MFU target applies on CPU only)."""
    out = []
    ok = _with_columns(rows[rows["status"] == "ok"])
    for variant, what in VERDICTS:
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
    mfu = _mfu_verdict(ok, device_type)
    return out + kernel_lines(ok) + ([mfu] if mfu else [])


def bench_markdown(rows: pd.DataFrame, facts: Mapping[str, Any], grid: str, dtype: str,
                   device_type: str) -> str:
    """The text `tvr bench` prints and saves: what ran where, the ratio table, the verdicts.
    `facts` are the machine facts the rows were measured with (device_name, threads,
    torch_version); `dtype` is the one the points ran in."""
    header = (f"`tvr bench` ({grid} grid) on {facts['device_name']} ({device_type}, "
              f"{facts['threads']} threads), torch {facts['torch_version']}, "
              f"{dtype}. Times: forward+backward in train mode, ours "
              "and PyTorch's interleaved; ms and ratio are medians of per-repetition medians "
              "(range: per-repetition ratios), best-of ratio = best ours / best PyTorch's; "
              "MFU = counted FLOPs / median time / best matmul rate in the same run.")
    table = markdown_table(ratio_table(rows), empty="(no comparisons)")
    return "\n\n".join([header, table, "\n".join(verdicts(rows, device_type))]) + "\n"


def profile_markdown(setup: Mapping[str, Any], tables: Mapping[str, pd.DataFrame]) -> str:
    """torch.profiler's per-op tables (one per attention backend, ops as the index) under a
    line saying what was profiled: `setup` has batch_size, seq_len, d_model, n_heads, dtype,
    device (type), threads and (when chosen) linear_kernel."""
    s = setup
    parts = [f"torch.profiler, self time per op (ATen, oneDNN), ms per forward+backward "
             f"(train mode), B={s['batch_size']}, n={s['seq_len']}, d={s['d_model']}, "
             f"h={s['n_heads']}, {s['dtype']}, {s['device']}, {s['threads']} threads"
             + (f", linear maps on {s['linear_kernel']}" if s.get("linear_kernel") else "")
             + "".join(f", {p} on {s[f'{p}_kernel']}" for p in ("qkv", "ffn", "attention")
                       if s.get(f"{p}_kernel")) + "."]
    for backend, table in tables.items():
        parts.append(f"### ours ({backend}) vs nn.TransformerEncoderLayer\n\n"
                     + markdown_table(table.rename_axis("op").reset_index()))
    return "\n\n".join(parts) + "\n"


def write_markdown(bench_dir: Path, name: str, markdown: str) -> Path:
    """Save `markdown` as <bench_dir>/<name> (TABLE_FILE, PROFILE_FILE), atomically."""
    path = bench_dir / name
    write_atomic(path, markdown)
    return path
