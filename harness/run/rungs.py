"""How well a pruning signal ranks a search's trials at its rungs: for the trials that ran to
their end (not pruned), the Spearman rank correlation between a signal's value at a rung
(1/9 and 1/3 of the FLOP budget in the CPU search) and the trial's objective, its best
greedy dev BLEU. Two signals, each as a pruning hook reports it (the best so far on the
curve): -ln of the best dev perplexity (what the rungs compare, harness.run.tune) and the
best greedy dev BLEU (what an earlier rule compared). Written into search.md."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd
from scipy import stats

from harness.train.translation.recipe import KEY
from harness.train.translation.train import Curve

# signal -> (the curve it reads, its value at an evaluation from the values so far)
SIGNALS = {"dev_ppl": ("dev_ppl", lambda seen: -math.log(min(seen))),
           "dev_bleu_greedy": ("dev_bleu_greedy", max)}
MIN_TRIALS = 3  # fewer: no correlation


def at_rung(curve: Curve, unit: float, step: int) -> dict[str, float]:
    """Each signal at the curve's first evaluation (after the first, at update 0) that
    reached pruner step `step` (FLOPs / unit): the best value so far; none where the
    curve lacks it."""
    flops = dict(curve.get("train_flops", []))
    reached = [s for s, _ in curve.get("dev_bleu_greedy", [])
               if s and flops.get(s, 0) // unit >= step]
    if not reached:
        return {}
    out = {}
    for name, (metric, best) in SIGNALS.items():
        seen = [v for s, v in curve.get(metric, []) if s <= reached[0] and not math.isnan(v)]
        if seen:
            out[name] = best(seen)
    return out


def ranks(trials: Iterable[tuple[str, pd.Series, Curve]], units: dict[str, float],
          rungs: dict[str, int]) -> pd.DataFrame:
    """One row per model (and `pooled`, every model's trials together) and rung (its name,
    e.g. "1/9", -> its pruner step): how many trials ran to their end with both signals
    there, and each signal's Spearman rho with the objective and its p-value. `trials`:
    (model, its last row, its curve) per trial; `units`: FLOPs per pruner step per model."""
    values: list[dict[str, Any]] = []
    for model, row, curve in trials:
        objective = pd.to_numeric(row.get(KEY), errors="coerce")
        if row.get("status") != "ok" or str(row.get("stopped_by", "")) == "pruned" \
                or pd.isna(objective):
            continue
        for rung, step in rungs.items():
            seen = at_rung(curve, units[model], step)
            if len(seen) == len(SIGNALS):  # the same trials for every signal
                values.append({"model": model, "rung": rung, "objective": float(objective),
                               **seen})
    frame = pd.DataFrame(values, columns=["model", "rung", "objective", *SIGNALS])
    out = []
    groups = [*frame.groupby(["model", "rung"], sort=False),
              *((("pooled", rung), g) for rung, g in frame.groupby("rung", sort=False))]
    for (model, rung), group in groups:
        line: dict[str, Any] = {"model": model, "rung": rung, "trials": len(group)}
        for name in SIGNALS:
            line[f"rho_{name}"], line[f"p_{name}"] = _spearman(group[name], group["objective"])
        out.append(line)
    return pd.DataFrame(out)


def _spearman(x: pd.Series, y: pd.Series) -> tuple[float, float]:
    """scipy's Spearman rho and p-value; NaN for fewer than MIN_TRIALS or a constant."""
    if len(x) < MIN_TRIALS or x.nunique() < 2 or y.nunique() < 2:
        return math.nan, math.nan
    result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)
