"""What the generated blocks of README.md and docs/*.md read: a suite's finished rows, and
the machine that measured them in words (harness.report.readme, readme_translation)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.errors import BadInput
from harness.plan import PLAN_FILE
from harness.report.unfinished import unfinished
from harness.results import FINAL_STATUSES, RESULTS_FILE, load_results


def rows(out: Path, suite: str, **where) -> pd.DataFrame:
    if not (out / suite / RESULTS_FILE).exists():
        raise BadInput(f"not measured: run `tvr run {suite}`")
    df = load_results(out, [suite])
    df = df[df["status"].isin(["ok", "diverged"])]
    for column, value in where.items():
        df = df[df[column].astype(str) == str(value)] if column in df else df.iloc[0:0]
    if df.empty:
        raise BadInput(f"not measured: run `tvr run {suite}`")
    return df


def machine(df: pd.DataFrame) -> str:
    first = df.iloc[0]
    return (f"machine `{first['machine']}` ({first.get('device_name', '?')}, "
            f"{int(first['threads'])} thread{'s' if first['threads'] != 1 else ''})")


def runs_text(out: Path, suite: str, runs: pd.DataFrame, what: str = "runs") -> str:
    """How many `what` the block shows, and whether its suite's plan (harness.plan) has more
    to train: "12 runs, every planned run finished", "7 runs so far, 5 planned or started
    still to finish", or "12 runs" where the folder holds no plan."""
    if not (out / suite / PLAN_FILE).is_file():
        return f"{len(runs)} {what}"
    rows = load_results(out, [suite])
    try:  # a failed row (error, oom) is a run `tvr run` trains again, as the ledger counts it
        left = sum(unfinished(out / suite, rows[rows["status"].isin(FINAL_STATUSES)]).values())
    except ValueError:  # a damaged plan: nothing said of runs to come (the ledger says why)
        return f"{len(runs)} {what}"
    return f"{len(runs)} {what}" + (", every planned run finished" if not left else
                                    f" so far, {left} planned or started still to finish")
