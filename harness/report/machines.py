"""Two machines side by side: per-point ratios of what both measured (`tvr compare`)."""

from __future__ import annotations

import pandas as pd

# Measured per point; ratios B / A. Time depends on the machine; counted FLOPs, saved bytes
# and (same seed, same CPU kernels) losses should not, so a ratio other than 1 there flags
# a difference in code or library rather than in hardware.
METRICS = ("fwd_ms", "fwdbwd_ms", "ours_ms", "ratio", "train_s", "flops_fwd", "saved_bytes",
           "seq_ops", "path_length", "final_loss")


def machine_ratios(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per point both measured ok on the same device: each metric on A, on B, B/A."""
    key = ["suite", "point_id", "device"]
    ok_a, ok_b = (f[f["status"] == "ok"] for f in (a, b))
    both = ok_a.merge(ok_b, on=key, suffixes=("_a", "_b"))
    rows = []
    for metric in METRICS:
        if f"{metric}_a" not in both or f"{metric}_b" not in both:
            continue
        va = pd.to_numeric(both[f"{metric}_a"], errors="coerce")
        vb = pd.to_numeric(both[f"{metric}_b"], errors="coerce")
        part = both[key].assign(metric=metric, a=va, b=vb, ratio=vb / va)
        rows.append(part[va.notna() & vb.notna()])
    if not rows:
        return pd.DataFrame(columns=[*key, "metric", "a", "b", "ratio"])
    return pd.concat(rows, ignore_index=True)


def summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Per suite and metric: points compared, median, min and max of B/A."""
    grouped = ratios.groupby(["suite", "metric"], sort=False)["ratio"]
    return grouped.agg(points="count", median="median", min="min", max="max").reset_index()
