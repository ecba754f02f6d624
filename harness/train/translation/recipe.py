"""A recipe per architecture, chosen on dev: a translation point whose options name a
sweep suite (TranslateOptions.recipe) takes, at run time, the peak learning rate and
dropout of the sweep's row of the same model with the lowest dev perplexity (a tie goes to
the first point id in sorted order). Perplexity, not BLEU: a short sweep ends where every
model's dev BLEU is still near zero and moves by noise (measured: Transformer recipes at
0.2-0.9 BLEU after 400 updates, their dev perplexity 150-300), while the loss ranks them
steadily, as NMT toolkits select checkpoints by validation loss. The row it trains says
what it took and from which sweep point, so the choice is in the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import BadInput
from harness.results import read_results, results_path

RECIPE_KEYS = ("peak_lr", "dropout")  # what the sweep varies and a recipe point takes
DEFAULTS = {"peak_lr": 1e-3, "dropout": 0.1}  # a sweep row without the column had these
KEY = "dev_ppl"  # the sweep's rows are ranked by it, lowest first


def best_row(rows: pd.DataFrame, model: str) -> pd.Series | None:
    """The ok "translate" row of `model` with the lowest dev perplexity (None: none)."""
    if rows.empty or KEY not in rows:
        return None
    mine = rows[(rows["runner"] == "translate") & (rows["model"] == model)
                & (rows["status"] == "ok")].copy()
    mine[KEY] = pd.to_numeric(mine[KEY], errors="coerce")
    mine = mine.dropna(subset=[KEY])
    if mine.empty:
        return None
    return mine.sort_values([KEY, "point_id"], kind="stable").iloc[0]


def resolve(out_dir: Path | None, sweep: str, model: str) -> dict[str, Any]:
    """{peak_lr, dropout, recipe_dev_ppl, recipe_dev_bleu, recipe_point}: the sweep's best."""
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
    return out | {"recipe_dev_ppl": float(row[KEY]),
                  "recipe_dev_bleu": float(row.get("dev_bleu", float("nan"))),
                  "recipe_point": row["point_id"]}
