"""Table 1 of the paper, reproduced from measurements (the points are harness.run.runner_table').

Rows: self-attention, recurrent (LSTM), convolutional, restricted self-attention. Columns:
the paper's three claims beside fitted log-log exponents of what this code measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.errors import BadInput
from harness.report.stats import loglog_fit
from harness.report.tables import layer_frame
from models import catalog


def _paper_rows() -> dict[str, tuple[str, str, str, str]]:
    """Layer name in the table -> (mixer kind, the paper's complexity, sequential ops, max
    path length), for every mixer the catalog gives a Table 1 row (later work's say so)."""
    return {m.table1.layer: (name, m.table1.complexity, m.table1.sequential_ops,
                             m.table1.max_path_length)
            for name, m in catalog.mixers().items() if m.table1 is not None}



# ---------------------------------------------------------------- the table


def _fit(df: pd.DataFrame, x: str, y: str) -> tuple[float, float, float, str]:
    """(exponent, standard error, R^2, range) of y ~ x^k; NaNs and the range with the
    reason when fewer than MIN_FIT_POINTS points leave no exponent."""
    df = df[df[y] > 0]
    if df.empty:
        return np.nan, np.nan, np.nan, ""
    rng = f"{x}={df[x].min()}..{df[x].max()}"
    fit = loglog_fit(df[x], df[y])
    if fit is None:
        return np.nan, np.nan, np.nan, f"{rng} ({df[x].nunique()} points: no exponent)"
    return fit.slope, fit.stderr, fit.r2, rng


def _group(df: pd.DataFrame, fit: str, mixer: str, **columns: Any) -> pd.DataFrame:
    """Rows of one fit (the group of the Table 1 grid a point belongs to: "n", "d", "kr",
    "memory", "fixed-tokens", "seq-ops", "path") and mixer, with the given column values."""
    sel = (df["fit"] == fit) & (df["mixer"] == mixer)
    for k, v in columns.items():
        column = df[k] if k in df else pd.Series(pd.NA, index=df.index)
        if isinstance(v, bool):  # a flag column holds True where set, nothing where not
            column = column.astype(str) == "True"
        sel &= column == v
    return df[sel]


def is_table1(df: pd.DataFrame) -> bool:
    """Results of a Table 1 grid (structural points beside layer points)?"""
    return "fit" in df and bool(df["runner"].isin(["seq-ops", "path"]).any())


def _rows(ok: pd.DataFrame) -> dict[str, tuple[str, str, str, str]]:
    """The catalog's Table 1 rows whose mixer was measured, then one row per other mixer (one
    declaring no row), named by its kind, with no paper claim beside it."""
    measured = list(dict.fromkeys(ok["mixer"].dropna()))
    paper = _paper_rows()
    known = {mixer for mixer, *_ in paper.values()}
    rows = {name: row for name, row in paper.items() if row[0] in measured}
    return rows | {m: (m, "", "", "") for m in measured if m and m not in known}


def table1(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(the table, notes saying which range each fit used and what else was seen)."""
    ok = df[df["status"] == "ok"]
    if "fit" not in ok.columns or ok.empty:
        raise BadInput("these are not table1 results; run `tvr run table1` first")
    layers = layer_frame(ok[ok["runner"] == "layer"])
    # attention's O() counts its sequence products (QK^T, AV); projections are O(n d^2)
    # the paper's attention rows: their sequence products; a layer outside it: the whole layer
    attention = [name for name, m in catalog.mixers().items()
                 if m.kind == "attention" and m.table1 is not None and m.table1.in_paper]
    layers["gflop_mix"] = np.where(layers["mixer"].isin(attention),
                                   layers["flops_fwd_attn"], layers["flops_fwd"]) \
        / layers["batch_size"] / 1e9
    layers["saved_per_seq"] = layers["saved_bytes"] / layers["batch_size"]
    rows: list[dict[str, Any]] = []
    ranges: dict[str, dict[str, list[str]]] = {}  # fit -> range -> layers fitted over it
    for name, (mixer, complexity, seq, path) in _rows(ok).items():
        row: dict[str, Any] = {"layer": name, "complexity": complexity,
                               "sequential_ops": seq, "max_path_length": path}
        by_n, by_d = _group(layers, "n", mixer), _group(layers, "d", mixer)
        fits = {
            "flops_n": _fit(by_n, "seq_len", "gflop_mix"),
            "flops_d": _fit(by_d, "d_model", "gflop_mix"),
            "time_n": _fit(by_n, "seq_len", "ms_per_seq"),
            "time_d": _fit(by_d, "d_model", "ms_per_seq"),
            "seq_ops_n": _fit(_group(ok, "seq-ops", mixer), "seq_len", "seq_ops"),
            "path_n": _fit(_group(ok, "path", mixer, dilation_growth=False), "seq_len",
                           "path_length"),
            "memory_n": _fit(_group(layers, "memory", mixer) if mixer == "self-attention"
                             else by_n, "seq_len", "saved_per_seq"),
        }
        held = {"_n": f" at d={by_n['d_model'].iloc[0]}" if len(by_n) else "",
                "_d": f" at n={by_d['seq_len'].iloc[0]}" if len(by_d) else ""}
        for key, (k, se, r2, rng) in fits.items():
            row[f"{key}_exp"], row[f"{key}_se"], row[f"{key}_r2"] = k, se, r2
            if rng and key.split("_")[0] in ("flops", "time", "memory"):
                rng += held[key[-2:]]
            if rng:
                ranges.setdefault(key, {}).setdefault(rng, []).append(name)
        rows.append(row)
    notes = [f"{key}: fitted over " + "; ".join(
        rng if len(names) == len(rows) else f"{rng} ({', '.join(names)})"
        for rng, names in by_range.items()) for key, by_range in ranges.items()]
    notes += _extra_notes(ok, layers)
    return pd.DataFrame(rows), notes


def _scan_notes(ok: pd.DataFrame) -> list[str]:
    """The parallel-scan row's depths, which a power law cannot describe: log n grows slower
    than any n^k, so its fitted exponent falls toward 0 as the range widens."""
    g = _group(ok, "seq-ops", "min-gru").sort_values("seq_len")
    if len(g) < 2:
        return []
    ns, depth = g["seq_len"].astype(int), g["seq_ops"].astype(float)
    slope = np.polyfit(np.log2(ns), depth, 1)[0]
    pairs = ", ".join(f"n={n}: {int(v)}" for n, v in zip(ns, depth, strict=True))
    path = _group(ok, "path", "min-gru").sort_values("seq_len")
    ops = ", ".join(f"n={int(n)}: {int(p) if p == p else 'not reached'}"
                    for n, p in zip(path["seq_len"], path["path_length"], strict=True))
    return [f"recurrent (parallel scan) is minGRU computed by its level-by-level scan "
            f"(scan=levels): graph depth {pairs}, {slope:.1f} ops more per doubling of n "
            f"(least squares in log2 n), i.e. O(log n)" +
            (f"; path length in ops on the shortest chain x[0] -> y[n-1]: {ops}" if ops else "")]


def _extra_notes(ok: pd.DataFrame, layers: pd.DataFrame) -> list[str]:
    notes = []
    for mixer, knob in (("convolutional", "kernel_size"), ("restricted-attention", "window")):
        g = _group(layers, "kr", mixer)
        if g.empty:
            continue
        g = g.assign(**{knob: g[knob].astype(int)})
        k, se, r2, rng = _fit(g, knob, "gflop_mix")
        if np.isfinite(k):
            notes.append(f"{mixer}: counted FLOPs grow as {knob}^{k:.2f} ± {se:.2f} (SE, R^2 "
                         f"{r2:.3f}, {rng})")
            continue
        # too few points for an exponent: the FLOPs per unit of the knob say it directly
        ratio = g["gflop_mix"] / g[knob]
        notes.append(f"{mixer}: counted GFLOPs / {knob} = {ratio.min():.4g}..{ratio.max():.4g} "
                     f"over {rng}; a constant ratio is linear growth")
    dil = _group(ok, "path", "convolutional", dilation_growth=True)
    if not dil.empty:
        pairs = ", ".join(f"n={int(n)}: {int(p) if p == p else 'not reached'}" for n, p in
                          zip(dil["seq_len"], dil["path_length"], strict=True))
        notes.append(f"dilated convolution (dilation k^i), path length in layers: {pairs}")
    flash = _group(layers, "n", "self-attention")
    if not flash.empty:
        k, se, r2, rng = _fit(flash, "seq_len", "saved_per_seq")
        notes.append(f"self-attention memory_n_exp is the explicit (math) formulation; the "
                     f"fused sdpa kernel ({flash['kernel'].iloc[0]}) saves: exponent "
                     f"{k:.2f} ± {se:.2f} (SE, R^2 {r2:.3f}, {rng})")
    paper = {mixer for mixer, *_ in _paper_rows().values()}
    others = sorted(set(layers["mixer"].dropna()) - paper)
    if others:
        notes.append(f"{', '.join(others)}: a mixer outside the paper's table; its flops "
                     "exponents count the whole layer (projections included)")
    notes += _scan_notes(ok)
    notes.append("recurrent sequential ops and path length are measured through the explicit "
                 "cell loop (rnn_impl=cell): the fused kernel is one graph node whatever n is")
    notes.append("flops exponents of the attention rows count their sequence products (QK^T, "
                 "AV), as the paper's O() does; time exponents are of the whole layer, whose "
                 "position-wise projections add an O(n d^2) term (it pulls time_d_exp toward 2)")
    return notes
