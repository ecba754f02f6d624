"""Parallel hardware without a GPU, from suite `threads`: measured speed-up over CPU threads
and a work-span projection (Brent's bound) for P = 1 .. 10^5 processors.

The projection is arithmetic on measurements, not a measurement: with T1 the measured
one-thread time (the work), S the layer's sequential depth and tau the measured time of one
dependent step, Brent's bound gives T_P <= T1 / P + S * tau. tau is the smallest measured
time per dependent step (a recurrent cell step at batch 1): the latency of a small dependent
operation on this CPU, taken for every layer. P_span = T1 / (S * tau) is where the span term
overtakes the work term: beyond it, more processors barely help.
"""

from __future__ import annotations

import pandas as pd

from harness.errors import BadInput

PROCESSORS = (1, 10, 100, 1_000, 10_000, 100_000)


def _rows(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[(df["status"] == "ok") & (df["runner"] == "threads")].copy()
    if ok.empty:
        raise BadInput("no thread-scaling points; run `tvr run threads`")
    ok["threads_used"] = ok["threads_used"].astype(int)
    return ok


def scaling_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per mixer and n: forward ms on 1 thread and on the most threads, speed-up, efficiency
    (speed-up / threads)."""
    ok = _rows(df)
    rows = []
    for (mixer, n), g in ok.groupby(["mixer", "seq_len"], sort=False):
        one = g[g["threads_used"] == 1]
        top = g[g["threads_used"] == g["threads_used"].max()]
        if one.empty:
            continue
        t1, tp, p = float(one["fwd_ms"].iloc[0]), float(top["fwd_ms"].iloc[0]), \
            int(top["threads_used"].iloc[0])
        rows.append({"mixer": mixer, "seq_len": int(n),
                     "batch_size": int(g["batch_size"].iloc[0]), "ms_1_thread": t1,
                     "threads": p, "ms_most_threads": tp, "speedup": t1 / tp,
                     "efficiency": t1 / tp / p})
    return pd.DataFrame(rows)


def projection_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per mixer and n: the projected forward ms on P processors (Brent's bound) and P_span."""
    ok = _rows(df)
    one = ok[(ok["threads_used"] == 1) & ok["span_ops"].notna()]
    if one.empty:
        raise BadInput("no one-thread points with a measured span; run `tvr run threads`")
    tau = float(one["step_ms"].min())
    rows = []
    for _, r in one.iterrows():
        t1, span = float(r["fwd_ms"]), float(r["span_ops"]) * tau
        row = {"mixer": r["mixer"], "seq_len": int(r["seq_len"]), "gflop": r["flops_fwd"] / 1e9,
               "span_ops": int(r["span_ops"]), "tau_ms": tau, "ms_1_thread": t1}
        row |= {f"ms_P{p:g}": t1 / p + span for p in PROCESSORS}
        row["P_span"] = t1 / span
        rows.append(row)
    return pd.DataFrame(rows)
