"""A suite's headline numbers for its MLflow parent run: fitted exponents and crossover n*
as metrics, the verdicts of the claims it tests as tags, so the runs table can show them."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from harness.errors import BadInput
from harness.report import tables
from harness.results import load_results


def _key(text: str) -> str:
    """A metric or tag name MLflow accepts (alphanumerics, _ - . / : and spaces)."""
    return re.sub(r"[^\w\-./: ]", "_", text)[:250]


def _layer_metrics(df: pd.DataFrame) -> dict[str, float]:
    metrics: dict[str, float] = {}
    fits = [(tables.complexity_table, lambda r: f"exponent.{r['layer']}",
             ("flops_n_exp", "time_n_exp", "flops_d_exp", "time_d_exp")),
            (tables.crossover_table,
             lambda r: f"n_star.{r['attention']}-vs-{r['versus']}.d{int(r['d_model'])}",
             ("n_star_flops", "n_star_time"))]
    for build, name, columns in fits:
        try:
            table = build(df)
        except BadInput:  # too few points for this table: no headline from it
            continue
        for row in table.to_dict("records"):
            for column in columns:
                value = row.get(column)
                if isinstance(value, (int, float)) and math.isfinite(value):
                    metrics[_key(f"{name(row)}.{column.removesuffix('_exp')}")] = float(value)
    return metrics


def headline(out_dir: Path, suite: str) -> tuple[dict[str, float], dict[str, str]]:
    """(metrics, tags) of `suite`'s stored rows: exponents and n* of a layer sweep, and one
    `verdict: CLAIM` tag per claim of the ledger that this suite's rows test."""
    from harness.report.claims import ledger

    df = load_results(Path(out_dir), [suite])
    metrics = _layer_metrics(df) if "runner" in df and (df["runner"] == "layer").any() else {}
    claims = ledger(Path(out_dir))
    mine = claims[claims["suite"].astype(str).str.split(", ").map(lambda s: suite in s)]
    # MLflow caps a tag's value at 5,000 characters: a label is far shorter
    tags = {_key(f"verdict: {c}"): str(v) for c, v in zip(mine["claim"], mine["label"],
                                                           strict=True)}
    return metrics, tags
