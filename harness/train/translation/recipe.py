"""A recipe per architecture, chosen on dev: a translation point whose options name a
sweep suite (TranslateOptions.recipe) takes, at run time, the peak learning rate and
dropout of the sweep's row of the same model with the highest dev BLEU (beam search on the
sweep's dev sentences; a tie goes to the first point id in sorted order). The row it
trains says what it took and from which sweep point, so the choice is in the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import BadInput
from harness.results import read_results, results_path

RECIPE_KEYS = ("peak_lr", "dropout")  # what the sweep varies and a recipe point takes
DEFAULTS = {"peak_lr": 1e-3, "dropout": 0.1}  # a sweep row without the column had these


def best_row(rows: pd.DataFrame, model: str) -> pd.Series | None:
    """The ok "translate" row of `model` with the highest dev_bleu (None: there is none)."""
    if rows.empty or "dev_bleu" not in rows:
        return None
    mine = rows[(rows["runner"] == "translate") & (rows["model"] == model)
                & (rows["status"] == "ok")].copy()
    mine["dev_bleu"] = pd.to_numeric(mine["dev_bleu"], errors="coerce")
    mine = mine.dropna(subset=["dev_bleu"])
    if mine.empty:
        return None
    mine = mine.sort_values(["dev_bleu", "point_id"], ascending=[False, True], kind="stable")
    return mine.iloc[0]


def resolve(out_dir: Path | None, sweep: str, model: str) -> dict[str, Any]:
    """{peak_lr, dropout, recipe_dev_bleu, recipe_point} from the sweep's best row."""
    if out_dir is None:
        raise BadInput(f"recipe from sweep {sweep!r}: the point has no output folder to read")
    row = best_row(read_results(results_path(out_dir, sweep)), model)
    if row is None:
        raise BadInput(f"recipe from sweep {sweep!r}: no finished {model} row in "
                       f"{results_path(out_dir, sweep)}; run `tvr run {sweep}` first")
    out: dict[str, Any] = {}
    for key in RECIPE_KEYS:
        value = row.get(key)
        out[key] = DEFAULTS[key] if value is None or pd.isna(value) else float(value)
    return out | {"recipe_dev_bleu": float(row["dev_bleu"]), "recipe_point": row["point_id"]}
