"""Summary tables of the convergence and ablation studies, for REPORT.md and --format csv.

One row per configuration, metrics averaged over seeds (`seeds` counts them). Steps to
target are listed per seed, "> N" for a seed that never reached it within its N steps;
`reached` says how many did.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.report.labels import labelled
from harness.report.stats import censored


@dataclass(frozen=True)
class StudyTable:
    """One summary table of a study (harness.report.studies declares them)."""
    runner: str  # what measured its rows (results column `runner`)
    title: str
    by: tuple[str, ...]  # one row per combination of these columns
    values: tuple[str, ...]  # metric columns, mean over seeds (absent ones are skipped)


def study_table(df: pd.DataFrame, study: str, spec: StudyTable) -> pd.DataFrame:
    """spec's summary of the study's finished rows in df (empty frame if it has none)."""
    if "study" not in df:
        return pd.DataFrame()
    keep = (df["study"] == study) & (df["runner"] == spec.runner)
    # the figures' labels (architecture, task_label), so tables and figures agree
    rows = labelled(df[keep & df["status"].isin(["ok", "diverged"])])
    if rows.empty:
        return pd.DataFrame()
    values = [v for v in spec.values if v in rows and rows[v].notna().any()]
    by = [b for b in spec.by if b in rows]
    grouped = rows.groupby(by, sort=True, dropna=False)
    table = grouped[values].mean(numeric_only=True)
    table.insert(0, "seeds", grouped.size())
    table.insert(1, "diverged", grouped["status"].apply(lambda s: int((s == "diverged").sum())))
    if "steps_to_target" in values:
        table.insert(2, "reached", grouped["steps_to_target"].count())
        # each seed's steps, "> budget" for one that never reached the target: a mean over
        # the seeds that did would read as a measurement for all of them
        columns = [c for c in ("steps_to_target", "steps", "target") if c in rows]
        table["steps_to_target"] = grouped[columns].apply(_censored_steps)
    return table.reset_index()


def _censored_steps(rows: pd.DataFrame) -> str:
    """Each seed's steps to target, "> budget" where never reached; blank without a target."""
    if "target" in rows and rows["target"].isna().all():
        return ""
    return ", ".join(censored(rows["steps_to_target"], rows["steps"]))

