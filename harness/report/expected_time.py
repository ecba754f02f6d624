"""Time before it is spent: a suite's expected time from the reference rows' point time,
scaled to this machine by one stable rule (`scale`):

1. not scaled where this machine is of the reference machine's kind: the same device, the
   same model (`device_name`, the CPU or GPU) and, where both record one, the same vector ISA
   (`cpu_capability`);
2. else scaled by the ratio of the two machines' peak fp32 matmul rates, one benchmark on
   both (harness.measure.compare.peak_rate, at the reference's threads), each a median over
   repeats: the reference's over its rows' `peak_flops_per_s`, this machine's over its own
   rows' where it has MIN_REPEATS of them, else over REPEATS measured by the caller now;
3. not scaled, saying why, where there is no such pair of rates: a reference that recorded
   none, no such device here, or a machine busy now (a rate measured beside other work is
   not the machine's: three measured within a minute on a loaded 2-core machine put one
   suite at 0.9, 1.8 and 3 times its reference time).

A point to do without a reference row of its own counts at the median time of its other
seeds' reference rows (`tvr run --dry-run`, `tvr estimate`): the runs left of a suite measured
seed-major are estimated from its first seeds.

Reads stored rows only; the caller measures this machine's rate when asked (`tvr run
--dry-run`, `tvr estimate`). The README's `make run` total sums the same per-point times
(harness.report.readme), unscaled. The sweep's progress bar counts the same reference
seconds per point (`point_weights`). An estimate: a suite of loops or small layers need not
scale with a matmul rate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
from harness.variants import stored_names

GPU = "gpu"  # <out>/gpu/SUITE: the suites a GPU machine measured (harness.track.sync)
PEAK = "peak_flops_per_s"  # the machine's peak fp32 matmul rate, in training and bench rows
MIN_REPEATS = 3  # this machine's own rows' rates that stand for it (rule 2)
REPEATS = 5  # rates the caller measures now where it has fewer: their median counts

# The suites of the Makefile's `run` target, in its order (a test checks them against it):
# `tvr estimate` with no suite estimates them, the README's run-times block sums them
MAKE_RUN = ("quick", "table1", "convergence-quick", "residual", "identities", "threads",
            "translation-quick")
# Quick suites left out of `make run` to keep it within MAKE_RUN_BUDGET_S of reference
# point time; the README's run-times block names each with its measured time
OUTSIDE_MAKE_RUN = ("rematch-quick",)
MAKE_RUN_BUDGET_S = 20 * 60


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
    paths = [results_path(folder, name) for folder in (out_dir, out_dir / GPU)
             for name in stored_names(folder, RESULTS_FILE)]  # variants' rows included
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


class NoRate(Exception):
    """This machine gives no rate to stand by now (busy, say): the estimate is not scaled."""


@dataclass(frozen=True)
class Kind:
    """What a machine is, for rule 1: its device, the device's model, its vector ISA."""

    device: str
    name: str
    isa: str = ""  # cpu_capability; "" where not recorded

    def same(self, other: Kind) -> bool:
        return (self.device, self.name) == (other.device, other.name) and \
            (not self.isa or not other.isa or self.isa == other.isa)

    def text(self) -> str:
        return f"{self.device} {self.name}" + (f", {self.isa}" if self.isa else "")


def kind_of(rows: pd.DataFrame, device: str) -> Kind:
    """The kind of the machine that measured `rows` (its most common model and ISA)."""
    def most(column: str) -> str:
        if column not in rows:
            return ""
        values = rows[column].dropna().astype(str)
        values = values[values != ""]
        return str(values.mode().iloc[0]) if len(values) else ""

    return Kind(device, most("device_name"), most("cpu_capability"))


def scale(out_dir: Path, reference_rows: pd.DataFrame, device: str, machine: str,
          threads: int, here: Kind | None, rate: Callable[[], float] | None
          ) -> tuple[float, str]:
    """The factor from the reference machine's point time to this machine's, and the rule
    that chose it in words (the module's rules 1-3). `rate()` measures this machine's median
    peak rate now (raising NoRate when it has none to stand by); called only where rules 1
    and 2 leave nothing else, None where this machine has no such device."""
    name = str(reference_rows["machine"].iloc[0])
    ref = kind_of(reference_rows, device)
    if here is not None and ref.name and here.same(ref):
        return 1.0, f"not scaled: this machine is of {name}'s kind ({ref.text()})"
    on = f" on {threads} thread{'s' if threads != 1 else ''}" if device == "cpu" else ""
    peak, n = machine_peak(out_dir, name, device, threads)
    if not n:
        return 1.0, f"not scaled to this machine: {name} recorded no peak matmul rate on " \
            f"{device}{on}"
    mine, m = machine_peak(out_dir, machine, device, threads)
    if m >= MIN_REPEATS:
        how = f"median of {m} of its rows' {PEAK}"
    elif rate is None:
        return 1.0, f"not scaled to this machine: no {device} device here to measure its rate"
    else:
        try:
            mine = rate()
        except NoRate as why:
            return 1.0, f"not scaled to this machine: {why}"
        how = f"median of {REPEATS} measured just now"
    return peak / mine, (
        f"times {peak / mine:.2g}: {name}'s peak fp32 matmul rate {peak / 1e9:.3g} GFLOP/s{on} "
        f"(median of {n} of its rows' {PEAK}) over this machine's {mine / 1e9:.3g} "
        f"GFLOP/s{on} ({how})")


# where a suite's measured or expected cost is stated when its rows cannot give one
SAID = " (its description states what is known of its cost: `tvr suites --long`)"


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
                    f"finished reference row on this device{SAID}")
        lacking = (f"; {self.missing} point{'s' if self.missing != 1 else ''} to do "
                   f"without a reference row, no estimate for them{SAID}" if self.missing
                   else "")
        return f"expected time about {duration(self.seconds)} (an estimate: {self.basis}){lacking}"


def estimate(out_dir: Path, suite: str, todo: list[str], device: str, machine: str,
             threads: int, rate: Callable[[], float] | None,
             here: Kind | None = None, alike: Mapping[str, str] | None = None) -> Estimate:
    """The expected time of the points `todo` of `suite` on this machine (`machine`, of
    kind `here`, on `device`): the reference rows' summed point time, scaled by `scale`. A
    point without its own reference row counts at the median time of the reference rows of
    its other seeds, where `alike` maps each point id of the suite to one id its seeds share
    (the seeds of a configuration train the same steps of the same model, so cost alike)."""
    alike = alike or {}
    kinds = {alike[t] for t in todo if t in alike}
    wanted = set(todo) | {p for p, k in alike.items() if k in kinds}
    ref = reference(suite_rows(out_dir, suite), sorted(wanted), device, machine)
    if ref.empty:
        return Estimate(0.0, 0, len(todo), "")
    name = str(ref["machine"].iloc[0])
    times = _per_point(ref)
    by_kind = times.groupby([alike.get(p, p) for p in times.index]).median()
    own = [t for t in todo if t in times.index]
    like = [t for t in todo if t not in times.index and alike.get(t) in by_kind.index]
    seconds = float(times[own].sum() + sum(by_kind[alike[t]] for t in like))
    measured = ", ".join(
        ([f"{len(own)} of them took {times[own].sum():.0f} s of point time on {name}, "
          "summed"] if own else [])
        + ([f"{len(like)} counted at the median time of their other seeds on {name}"]
           if like else []))
    factor, why = scale(out_dir, ref, device, machine, threads, here, rate)
    return Estimate(seconds * factor, len(own) + len(like), len(todo) - len(own) - len(like),
                    f"{measured}{'; ' if why.startswith('not') else ', '}{why}")


def _per_point(ref: pd.DataFrame) -> pd.Series:
    """Each reference point's time once: its last row's (a point measured again, the
    newest)."""
    return point_seconds(ref).groupby(ref["point_id"].astype(str)).last()


def point_weights(out_dir: Path, suite: str, todo: list[str], device: str,
                  machine: str) -> dict[str, float]:
    """Each point to do's reference point time in seconds (what the sweep's bar counts: a
    slow point moves it as much as it takes); a point without a reference row counts as the
    median of those with one. Empty where none has one: the bar counts points."""
    ref = reference(suite_rows(out_dir, suite), todo, device, machine)
    known = {str(k): max(float(v), 0.0) for k, v in
             (_per_point(ref).dropna().items() if len(ref) else ())}
    if not known:
        return {}
    fill = float(pd.Series(list(known.values())).median())
    return {p: known.get(p, fill) for p in todo}


def duration(seconds: float) -> str:
    """'40 s', '13 min', '2.5 h': a time rounded as an estimate deserves."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.2g} h"
