"""A tuning search's document, <out>/NAME/search.md (`tvr tune` writes it, `tvr report`
rewrites it): the space searched per model, the best finished trial of each, whether its
values sit at an edge of their range, and how well each pruning signal at each rung ranks
the trials as their objective does. Read from the trials' rows and curves only."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from experiments.spec import Dimension, Search
from harness.results import read_results, results_path
from harness.run import rungs
from harness.run.tune import STEPS_PER_RUNG, rung_unit, trial_number, trial_rows
from harness.train.translation.recipe import KEY, best_row, recipe_of


def summary(search: Search, out_dir: Path) -> pd.DataFrame:
    """One row per model: trials by state, the best recipe and its dev BLEU, and which of
    its values sit at an edge of the searched range (a range that may not hold the best)."""
    rows = read_results(results_path(out_dir, search.name))
    out = []
    for base in search.base:
        space = search.space[base.subject]
        row = best_row(rows, base.subject)
        mine = rows[rows["model"] == base.subject] if not rows.empty else rows
        line: dict[str, Any] = {"model": base.subject, "trials": len(mine)}
        if "stopped_by" in mine:
            line["pruned"] = int((mine["stopped_by"] == "pruned").sum())
        if row is not None:
            recipe = recipe_of(row, space)
            line |= {"trial": trial_number(rows, base.subject, row["point_id"]),
                     KEY: float(row[KEY]), **_retrieval(row), **recipe,
                     "at_edge": ", ".join(k for k, v in recipe.items() if _at_edge(space[k], v))}
        out.append(line)
    return pd.DataFrame(out)


def _retrieval(row: pd.Series) -> dict[str, float]:
    """The retrieval baseline's dev BLEU on the trial's curve verses (its `target_bleu`,
    where the suite targets retrieval): the bar a recipe's best must clear."""
    value = pd.to_numeric(row.get("target_bleu"), errors="coerce")
    if row.get("target_from") != "retrieval" or pd.isna(value):
        return {}
    return {"retrieval_dev_bleu": float(value)}


def document(search: Search, out_dir: Path) -> str:
    """<out>/NAME/search.md: the space searched per model, the trials, the best recipes."""
    table = summary(search, out_dir)
    lines = [f"# Tuning search `{search.name}`", "",
             f"Optuna {optuna.__version__}: TPE sampler ({search.startup} random "
             f"trials first), successive-halving pruner (eta {search.eta}, rungs at 1/"
             f"{search.eta ** (search.rungs - 1)} of each trial's FLOP budget and up), "
             f"{search.trials} finished trials per model asked for; the objective is the best "
             "greedy dev BLEU on the trial's curve, the rungs compare the best dev "
             "perplexity; `retrieval_dev_bleu` is the retrieval baseline's on the same dev "
             "verses. Written by "
             f"`tvr tune {search.name}` from the trials' rows in results.csv.", "",
             "## Space", "", "| model | key | range |", "|---|---|---|"]
    for model, space in search.space.items():
        for key, dim in space.items():
            lines.append(f"| {model} | {key} | {dim[0]} {', '.join(map(str, dim[1:]))} |")
    lines += ["", "## Best finished trial per model", "",
              table.astype(object).where(table.notna(), None).to_markdown(  # blank: no trial
                  index=False, floatfmt=".4g", missingval="") if not table.empty else
              "(no trials yet)", ""]
    ranked = signal_table(search, out_dir)
    lines += ["## The pruning signal against the objective", "",
              "For the trials that ran to their end (not pruned), the Spearman rank "
              "correlation (`rho`, with its p-value) between a signal at a rung and the "
              "trial's objective, its best greedy dev BLEU: `dev_ppl`, -ln of the best dev "
              "perplexity so far (what the rungs compare), and `dev_bleu_greedy`, the best "
              "greedy dev BLEU so far (what an earlier rule compared), each read at the "
              "trial's first evaluation at or past the rung, warm-up or not; `trials`: those "
              "with both signals there (one run before the curves measured perplexity has "
              "none), `pooled` every model's together. A pruned trial has no objective, so "
              "the trials the rungs stopped are not in it.", "",
              ranked.astype(object).where(ranked.notna(), None).to_markdown(
                  index=False, floatfmt=("", "", "", ".2f", ".2g", ".2f", ".2g"),
                  missingval="") if not ranked.empty else
              "(no trial has run to its end yet)", ""]
    return "\n".join(lines)


def signal_table(search: Search, out_dir: Path) -> pd.DataFrame:
    """How well each pruning signal at each rung below the budget (1/9, 1/3 of it) ranks
    the search's finished trials as their objective does (harness.run.rungs)."""
    units = {b.subject: rung_unit(b, search) for b in search.base}
    steps = {f"1/{search.eta ** (search.rungs - 1 - k)}": STEPS_PER_RUNG * search.eta ** k
             for k in range(search.rungs - 1)}
    trials = ((b.subject, row, curve) for b in search.base
              for row, curve in trial_rows(out_dir, search.name, b.subject))
    return rungs.ranks(trials, units, steps)


def _at_edge(dim: Dimension, value: Any) -> bool:
    """Within 5% of the range's width (log width for "log") of an end; a choice: the first
    or last of an ordered numeric set (a yes/no choice has no edge)."""
    kind, *args = dim
    if kind == "choice":
        values = list(args[0])
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        return numeric and value in (min(values), max(values))
    lo, hi = args
    if kind in ("log", "int-log"):
        lo, hi, value = math.log(lo), math.log(hi), math.log(value)
    return min(value - lo, hi - value) <= 0.05 * (hi - lo)
