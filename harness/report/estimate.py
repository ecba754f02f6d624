"""Time before it is spent: a suite's expected time from the reference rows' time per point,
scaled to this machine by its peak matmul rate against the reference machine's.

Reads stored rows only; the caller measures this machine's rate (`tvr run --dry-run`, with
harness.measure.compare.peak_rate) and hands it in. The README's `make run` total sums the
same per-point times (harness.report.readme). An estimate: a peak matmul rate is one number
for a machine, and a suite of loops or small layers need not scale with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.results import (
    FINAL_STATUSES,
    RESULTS_FILE,
    order_columns,
    read_results,
    results_path,
)

GPU = "gpu"  # <out>/gpu/SUITE: the suites a GPU machine measured (harness.track.sync)
PEAK = "peak_flops_per_s"  # the machine's peak fp32 matmul rate, in training and bench rows


def point_seconds(rows: pd.DataFrame) -> pd.Series:
    """Each row's whole time: wall_s (training, evaluation and decoding), plus, for a point
    resumed from a checkpoint, the training its earlier attempts did, which wall_s (the last
    attempt's) leaves out: train_s (all attempts') times the share of steps_run before
    resumed_from_step."""
    seconds = pd.to_numeric(rows["wall_s"], errors="coerce")
    if {"train_s", "resumed_from_step", "steps_run"} <= set(rows.columns):
        number = {c: pd.to_numeric(rows[c], errors="coerce")
                  for c in ("train_s", "resumed_from_step", "steps_run")}
        earlier = number["train_s"] * number["resumed_from_step"] / number["steps_run"]
        seconds = seconds + earlier.where(number["resumed_from_step"] > 0).fillna(0.0)
    return seconds


def suite_rows(out_dir: Path, suite: str) -> pd.DataFrame:
    """Every machine's rows of `suite` under out_dir: <out>/SUITE/ and <out>/gpu/SUITE/."""
    frames = [read_results(p) for p in (results_path(out_dir, suite),
                                        results_path(Path(out_dir) / GPU, suite)) if p.exists()]
    filled = [f for f in frames if len(f)]
    return pd.concat(filled, ignore_index=True) if filled else pd.DataFrame(
        columns=order_columns([]))


def reference(rows: pd.DataFrame, todo: list[str], device: str, machine: str) -> pd.DataFrame:
    """The finished rows on `device` of the machine (other than `machine`) that measured most
    of the points `todo`: one reference machine, so one scale."""
    final = rows[rows["status"].isin(FINAL_STATUSES) & rows["point_id"].isin(todo)
                 & (rows["device"].astype(str) == device)
                 & (rows["machine"].astype(str) != machine)]
    if final.empty:
        return final
    most = final.groupby(final["machine"].astype(str))["point_id"].nunique()
    return final[final["machine"].astype(str) == most.sort_values(ascending=False,
                                                                  kind="stable").index[0]]


def machine_peak(out_dir: Path, machine: str, device: str, threads: int) -> tuple[float, int]:
    """The median peak matmul rate `machine` recorded on `device` (on a CPU, at `threads`
    torch threads) over every suite under out_dir, and the number of rows it is from (0 and
    NaN where none holds one)."""
    out_dir = Path(out_dir)
    paths = [*out_dir.glob(f"*/{RESULTS_FILE}"), *out_dir.glob(f"{GPU}/*/{RESULTS_FILE}")]
    peaks = []
    for path in sorted(paths):
        rows = read_results(path)
        if PEAK not in rows or device == "cpu" and "threads" not in rows:
            continue
        mine = (rows["machine"].astype(str) == machine) & (rows["device"].astype(str) == device)
        if device == "cpu":
            mine &= pd.to_numeric(rows["threads"], errors="coerce") == threads
        peaks.append(pd.to_numeric(rows.loc[mine, PEAK], errors="coerce").dropna())
    values = pd.concat(peaks) if peaks else pd.Series(dtype=float)
    return (float(values.median()) if len(values) else float("nan")), len(values)


@dataclass(frozen=True)
class Estimate:
    """The expected time of the points to do, and what it rests on."""

    seconds: float  # the points with a reference row, scaled; 0 where none has one
    estimated: int  # points to do with a reference row
    missing: int  # points to do without one: no estimate
    basis: str  # the reference machine, its time and the scale, in words

    def text(self) -> str:
        if not self.estimated + self.missing:
            return "nothing to measure"
        if not self.estimated:
            return (f"no expected time: none of the {self.missing} points to do has a "
                    "finished reference row on this device")
        lacking = (f"; {self.missing} point{'s' if self.missing != 1 else ''} to do "
                   "without a reference row, no estimate for them" if self.missing else "")
        return f"expected time about {duration(self.seconds)} (an estimate: {self.basis}){lacking}"


def estimate(out_dir: Path, suite: str, todo: list[str], device: str, machine: str,
             threads: int, rate: Callable[[], float] | None) -> Estimate:
    """The expected time of the points `todo` of `suite` on this machine (`machine`, on
    `device`): the reference rows' summed point time, times the reference machine's peak
    matmul rate over this machine's (`rate()`, called only when the reference recorded one;
    None where this machine has no such device to measure)."""
    ref = reference(suite_rows(out_dir, suite), todo, device, machine)
    if ref.empty:
        return Estimate(0.0, 0, len(todo), "")
    name = str(ref["machine"].iloc[0])
    seconds = float(point_seconds(ref).sum())
    count = ref["point_id"].nunique()
    measured = f"{count} of them took {seconds:.0f} s of point time on {name}, summed"
    on = f" on {threads} thread{'s' if threads != 1 else ''}" if device == "cpu" else ""
    peak, n = machine_peak(out_dir, name, device, threads)
    if not n or rate is None:
        why = (f"{name} recorded no peak matmul rate on {device}{on}" if not n
               else f"no {device} device here to measure this machine's rate")
        return Estimate(seconds, count, len(todo) - count,
                        f"{measured}; not scaled to this machine: {why}")
    here = rate()
    return Estimate(seconds * peak / here, count, len(todo) - count,
                    f"{measured}, times {peak / here:.2g}: {name}'s peak fp32 matmul rate "
                    f"{peak / 1e9:.3g} GFLOP/s{on} (median of {n} of its rows' {PEAK}) over "
                    f"this machine's {here / 1e9:.3g} GFLOP/s{on}, measured just now")


def duration(seconds: float) -> str:
    """'40 s', '13 min', '2.5 h': a time rounded as an estimate deserves."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.2g} h"
