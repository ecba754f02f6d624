"""Two machines side by side: per-point ratios of what both measured (`tvr compare`)."""

from __future__ import annotations

import pandas as pd

from harness.schema import Parts

# Measured per point; ratios B / A. Time depends on the machine; counted FLOPs, saved bytes
# and (same seed, same CPU kernels) losses should not, so a ratio other than 1 there flags
# a difference in code or library rather than in hardware.
METRICS = ("fwd_ms", "fwdbwd_ms", "ours_ms", "ratio", "train_s", "flops_fwd", "saved_bytes",
           "seq_ops", "path_length", "final_loss")
# What a time depends on besides the machine: a point measured under different conditions
# on A and B is not a like-for-like comparison. `busy`: measured beside other work.
CONDITIONS = ("threads", "dtype", "device", "busy")
# How busy the machine was: a condition's evidence, never a measurement of the point
NOT_MEASURED = ("load_avg", "cpu_share")
KEY = ["suite", "point_id"]


def _condition(frame: pd.DataFrame, name: str) -> pd.Series:
    """A condition column as text; a row from before `busy` was recorded counts as idle."""
    if name not in frame:
        return pd.Series("False" if name == "busy" else "", index=frame.index)
    values = frame[name].astype(str).where(frame[name].notna(), "")
    if name == "busy":
        return values.replace({"": "False", "1": "True", "0": "False", "1.0": "True",
                               "0.0": "False"})
    return values.str.removesuffix(".0")  # 1.0 threads is 1


def _pairs(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The points both measured ok, one row each, with A's and B's conditions."""
    ok_a, ok_b = (f[f["status"] == "ok"].copy() for f in (a, b))
    for frame in (ok_a, ok_b):
        for name in CONDITIONS:
            frame[f"cond_{name}"] = _condition(frame, name)
    both = ok_a.merge(ok_b, on=KEY, suffixes=("_a", "_b"))
    # a point both measured on the same device pairs those rows, not its CPU row with a CUDA one
    same = both["cond_device_a"] == both["cond_device_b"]
    has_same = same.groupby([both[k] for k in KEY]).transform("any") if len(both) else same
    return both[same | ~has_same]


def differences(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """One line per condition (threads, dtype, device, busy) that differs between A and B on
    the points both measured: `threads: A 1, B 2 on 18 points`."""
    both = _pairs(a, b)
    lines = []
    for name in CONDITIONS:
        va, vb = both[f"cond_{name}_a"], both[f"cond_{name}_b"]
        differ = va != vb
        if name == "busy":  # busy on either side is a difference from an idle measurement
            differ = (va == "True") | (vb == "True")
        if differ.any():
            pairs = (va[differ] + " -> " + vb[differ]).value_counts()
            said = ", ".join(f"A {p.split(' -> ')[0] or '?'}, B {p.split(' -> ')[1] or '?'} "
                             f"on {n} points" for p, n in pairs.items())
            lines.append(f"{name}: {said}")
    return lines


def machine_ratios(a: pd.DataFrame, b: pd.DataFrame, like_only: bool = True) -> pd.DataFrame:
    """One row per point both measured ok: each metric on A, on B, B/A. With like_only, only
    the points measured under the same threads, dtype and device on both, and busy on
    neither."""
    both = _pairs(a, b)
    if like_only and len(both):
        same = pd.Series(True, index=both.index)
        for name in CONDITIONS:
            same &= both[f"cond_{name}_a"] == both[f"cond_{name}_b"]
        same &= both["cond_busy_a"] != "True"
        both = both[same]
    key = [*KEY, "device"]
    both = both.assign(device=both["cond_device_a"]) if len(both) else both.assign(device="")
    rows = [_ratios(both, key, metric) for metric in METRICS if f"{metric}_a" in both]
    covered = pd.concat([r[key] for r in rows]) if rows else pd.DataFrame(columns=key)
    rest = both.merge(covered.drop_duplicates(), on=key, how="left", indicator=True)
    rest = rest[rest["_merge"] == "left_only"]
    # a point measuring none of METRICS (identities: errors and its wall time): its own numbers
    rows += [_ratios(rest, key, metric) for metric in _measured(rest)]
    if not rows:
        return pd.DataFrame(columns=[*key, "metric", "a", "b", "ratio"])
    return pd.concat(rows, ignore_index=True)


def _ratios(both: pd.DataFrame, key: list[str], metric: str) -> pd.DataFrame:
    """The points where A and B both have `metric`: its value on each and B/A."""
    if f"{metric}_a" not in both or f"{metric}_b" not in both:
        return pd.DataFrame(columns=[*key, "metric", "a", "b", "ratio"])
    va = pd.to_numeric(both[f"{metric}_a"], errors="coerce")
    vb = pd.to_numeric(both[f"{metric}_b"], errors="coerce")
    part = both[key].assign(metric=metric, a=va, b=vb, ratio=vb / va)
    return part[va.notna() & vb.notna()]


def _measured(both: pd.DataFrame) -> list[str]:
    """The numbers A's rows of these points measured (a row's metrics: harness.schema),
    in column order."""
    found: dict[str, None] = {}
    for row in both.to_dict("records"):
        own = {k.removesuffix("_a"): v for k, v in row.items() if k.endswith("_a")}
        own["point_id"] = row["point_id"]  # the params it lists are not metrics
        found |= dict.fromkeys(Parts.of_row(own).metrics)
    return [m for m in found if m not in NOT_MEASURED and not m.startswith("cond_")]


def unmatched(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """Why A and B have nothing to compare, in words: no point ids in common, or not ok on
    both, or none of their common ok points measured alike (the conditions that differ)."""
    ids_a, ids_b = (set(zip(f["suite"], f["point_id"], strict=True)) for f in (a, b))
    if not ids_a & ids_b:
        suites_a, suites_b = set(a["suite"]), set(b["suite"])
        if not suites_a & suites_b:
            return (f"no suite in common (A: {', '.join(sorted(map(str, suites_a)))}; "
                    f"B: {', '.join(sorted(map(str, suites_b)))})")
        return "no point id in common (the suites were run with different options)"
    both = _pairs(a, b)
    if both.empty:
        return f"{len(ids_a & ids_b)} points in common, none ok on both"
    said = "; ".join(differences(a, b)) or "no metric measured on both"
    return f"{len(both)} ok points in common, none measured alike: {said}"


def summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Per suite and metric: points compared, median, min and max of B/A."""
    grouped = ratios.groupby(["suite", "metric"], sort=False)["ratio"]
    return grouped.agg(points="count", median="median", min="min", max="max").reset_index()
