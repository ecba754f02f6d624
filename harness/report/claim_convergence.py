"""How far a trained translation claim's runs got, and what its verdict holds at: the scale a
label names (parameters, training pairs, updates, budget or stopping rule, device), and the
converged gate that keeps a quality verdict waiting while a compared model may still improve
(stopped by a cap rather than the rule, or dev perplexity still falling when the rule
stopped it). Table 2 (claim_translation) and Table 3 (claim_table3) judge by these alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from harness.report.evidence import Missing, Stored, device_word
from harness.report.gates import ALPHA, Gate
from harness.report.translation import flat_by_rule, flops_text


def convergence_note(by: dict[str, pd.DataFrame]) -> str:
    """How many seeds of each model ended with a dev curve flat by the stopping rule
    (flat_by_rule: stopped by patience, not by a budget or the cap), and what a verdict is
    then about: BLEU at this budget where no seed of a model flattened."""
    flat = {m: int(flat_by_rule(g).sum()) for m, g in by.items()}
    rising = [m for m, n in flat.items() if n == 0]
    metric = stop_metric(pd.concat(by.values()))
    return (f"; {metric} curve flat by the stopping rule: " + ", ".join(
        f"{m} {n} of {len(by[m])} seeds" for m, n in flat.items())
        + (f" (BLEU at this training budget, not at convergence, for {', '.join(rising)})"
           if rising else ""))


def updates_text(rows: pd.DataFrame) -> str:
    """The updates the runs did (not their cap of steps), with the epochs they make."""
    done = pd.to_numeric(rows.get("steps_run", rows.get("steps")), errors="coerce").dropna()
    if done.empty:
        return ""
    lo, hi = int(done.min()), int(done.max())
    text = f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"
    epochs = pd.to_numeric(rows.get("epochs", pd.Series(dtype=float)), errors="coerce").dropna()
    if not epochs.empty:
        text += f" updates ({epochs.min():.1f}-{epochs.max():.1f} epochs)"
    else:
        text += " updates"
    return text


def translation_scope(rows: pd.DataFrame, budget: str) -> str:
    """What a Table 2 verdict holds at: parameters, training pairs, updates run, the
    budget or stopping rule, device; e.g. "1.4M parameters, 28k training pairs, 3,470-7,184
    updates (6.2-8.1 epochs), 6e13 FLOPs each, CPU"."""
    parts = []
    params = pd.to_numeric(rows.get("n_params", pd.Series(dtype=float)), errors="coerce")
    if params.notna().any():
        lo, hi = params.min() / 1e6, params.max() / 1e6
        parts.append(f"{lo:.1f}M parameters" if round(lo, 1) == round(hi, 1)
                     else f"{lo:.1f}-{hi:.1f}M parameters")
    pairs = pd.to_numeric(rows.get("train_pairs", pd.Series(dtype=float)), errors="coerce")
    if pairs.notna().any():
        parts.append(f"{pairs.max() / 1e3:.0f}k training pairs")
    if updates_text(rows):
        parts.append(updates_text(rows))
    parts.append(budget)
    parts.append(device_word(rows))
    return ", ".join(p for p in parts if p)


STOP_METRICS = {"dev_bleu_greedy": "greedy dev BLEU", "dev_ppl": "dev perplexity"}
DEFAULT_STOP = "dev_bleu_greedy"  # what a row without a stop_on column stopped on


def stop_metric(rows: pd.DataFrame) -> str:
    """What the rows' stopping rule watched, in words ("greedy dev BLEU", the default a row
    without a stop_on column had; rules that differ between rows joined by " or ")."""
    on = rows.get("stop_on", pd.Series(DEFAULT_STOP, index=rows.index)).fillna(DEFAULT_STOP)
    names = sorted({STOP_METRICS.get(str(v), str(v)) for v in on})
    return " or ".join(names) or STOP_METRICS[DEFAULT_STOP]


def translation_scale(rows: pd.DataFrame, budget: str) -> str:
    """The scale line of a translation claim: translation_scope's, with the machines."""
    machines = sorted(rows["machine"].dropna().astype(str).unique()) if "machine" in rows \
        else []
    return translation_scope(rows, budget) + f", machine {', '.join(machines) or '?'}"


def rule_text(rows: pd.DataFrame) -> str:
    """The converged suite's stopping rule, as its rows state it."""
    first = rows.iloc[0]
    cap = pd.to_numeric(pd.Series([first.get("budget_flops")]), errors="coerce").iloc[0]
    return (f"trained until {int(first.get('patience', 0))} evaluations brought no new best "
            f"{stop_metric(rows)}, capped at {flops_text(cap)} FLOPs")


def converged_gate(stored: Stored, by: dict[str, pd.DataFrame], rule: str) -> Gate:
    """Every seed of every compared model ended with its dev curve flat: stopped by the rule
    (harness.report.translation.flat_by_rule: by patience, not by the cap), one rule for all
    (patience on one metric), and not while its dev perplexity still fell (still_falling):
    a quality verdict waits while a compared model may still be improving."""
    capped = {m: [int(s) for s, flat in zip(g["seed"], flat_by_rule(g), strict=True)
                  if not flat] for m, g in by.items()}
    falling = {m: still_falling(stored, g) for m, g in by.items()}
    detail = ", ".join(f"{m} {len(by[m]) - len(capped[m])} of {len(by[m])} seeds stopped by "
                       "the rule" for m in by)
    remedy = []
    metric = stop_metric(pd.concat(by.values()))
    if " or " in metric:
        detail += f"; the runs stopped on different metrics: {metric}"
        remedy.append("every run of the compared suites trained by one rule (the suites' "
                      "stop_on alike)")
    if any(capped.values()):
        detail += "; stopped by the cap, not by the rule (may still rise): " + ", ".join(
            f"{m} seed{'s' if len(s) > 1 else ''} {', '.join(map(str, s))}"
            for m, s in capped.items() if s)
        remedy.append("the capped seeds trained on past the cap, under one higher cap for "
                      "every model of the suite (a run patience stopped ends the same under "
                      "it; `tvr migrate-ids` carries it over); a `--set budget_flops=...` "
                      "variant alone will not do: the claim does not read variants")
    if any(falling.values()):
        detail += (f"; dev perplexity still falling when the rule stopped them (log "
                   "perplexity against updates over the rule's last patience + 1 "
                   f"evaluations, fitted fall over {PPL_STILL_FALLING:.0%}, slope below 0 at "
                   f"one-sided p < {ALPHA:g}): " + ", ".join(
                       f"{m} seed {seed} ({fall:.1%})" for m, f in falling.items()
                       for seed, fall in f.items()))
        remedy.append("a longer patience on dev perplexity, every run of the compared suites "
                      "trained again under it" if metric == STOP_METRICS["dev_ppl"] else
                      "a stopping rule that waits for dev perplexity too (patience on it, "
                      "the early-stopping metric fairseq and JoeyNMT use by default: "
                      "stop_on = dev_ppl in the suites' rule, not a `--set` variant, which "
                      "the claim does not read), every run of the compared suites trained "
                      "again under it")
    return Gate("converged", not remedy, f"{detail} ({rule})", "; and ".join(remedy))


PPL_STILL_FALLING = 0.02  # a fitted fall of dev perplexity over the rule's last window


def still_falling(stored: Stored, rows: pd.DataFrame) -> dict[int, float]:
    """Seed -> fitted fall of dev perplexity, for the runs among `rows` (one model's) that
    were stopped while it still fell: over their last patience + 1 evaluations, log dev
    perplexity against the update, fitted by least squares (scipy linregress), falls by
    more than PPL_STILL_FALLING with its slope below 0 at one-sided p < ALPHA. A single
    fall from first to last would call a flat, noisy curve falling half the time; the
    fit over the window asks for a trend. Runs without curves are not judged here."""
    out = {}
    for suite, group in rows.groupby("suite"):
        try:
            curves = stored.series(str(suite), group["point_id"])
        except Missing:
            continue
        if "dev_ppl" not in curves:
            continue
        for row in group.itertuples():
            window = int(pd.to_numeric(pd.Series([getattr(row, "patience", 0)]),
                                       errors="coerce").fillna(0).iloc[0]) + 1
            ppl = curves.loc[curves["point_id"] == row.point_id, ["step", "dev_ppl"]].dropna()
            ppl = ppl[ppl["dev_ppl"] > 0].tail(window)
            if window < 3 or len(ppl) < window or ppl["step"].nunique() < 3:
                continue
            fit = stats.linregress(ppl["step"].astype(float), np.log(ppl["dev_ppl"]))
            fall = 1 - float(np.exp(fit.slope * (ppl["step"].iloc[-1] - ppl["step"].iloc[0])))
            if fit.slope < 0 and fit.pvalue / 2 < ALPHA and fall > PPL_STILL_FALLING:
                out[int(row.seed)] = fall
    return out
