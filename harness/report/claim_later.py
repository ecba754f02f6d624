"""Later work's claims, judged by the same rules as the paper's but kept apart from them (each
claim's text says whose it is; the rows are the full `rematch` suite's where it has them,
else rematch-quick's): that a recurrence with gates free of h_{t-1} trains in
O(log n) sequential steps and faster than its loop (Feng et al. 2024), and that attention
recalls more key-value pairs than a fixed-size state at equal width (Arora et al. 2023).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.report import claim_power as power
from harness.report.evidence import Claim, Evidence, Missing, Stored, device_word, scale_facts
from harness.report.gates import (
    MIN_SEEDS,  # recall verdicts: seeds per configuration
    SPREAD_SHARE,
    Gate,
    baseline_gate,
    compare,
    range_gate,
)
from harness.report.rematch import before_loop_fix, best_lr, floor
from harness.report.rulebook import TIMING, TRAINED_QUALITY, scope_of
from harness.report.stats import fmt, loglog_fit, paired
from harness.report.verdicts import CONTRADICTS, QUALIFIED, SUPPORTS

INCONCLUSIVE = "inconclusive at this scale"
LATER = "Later work, not the paper's"  # every claim here starts with it
LOG_EXP_MAX = 0.5  # a depth growing as log n fits n^k with k well below this over n = 16..256
DOUBLING_SPREAD = 0.25  # per-doubling depth increments within this of their mean: log n
MIN_SPEEDUP = 1.0  # the scan must beat the loop by more than this at the longest n
RECALLED = 0.99  # attention has learned recall where its mean accuracy reaches this (Zoology)
SCANNED = ("min-gru", "min-lstm")
SCANS = ("sequential", "levels", "log")  # the forms of models/minrnn.py
RECURRENT = ("lstm", "gru", "min-gru", "min-lstm")


def _scale(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    return (f"device {first.get('device', '?')} ({first.get('device_name', '?')}), machine "
            f"{first.get('machine', '?')}")


def _rematch(stored: Stored, **where: object) -> pd.DataFrame:
    """The full suite's rows where it has them, else rematch-quick's (Missing names it)."""
    try:
        return stored.rows("rematch", **where)
    except Missing:
        return stored.rows("rematch-quick", **where)


def _depth(stored: Stored) -> tuple[str, bool, bool]:
    """(text, grows as log n, grows as n) from table1's minGRU seq-ops rows."""
    g = stored.rows("table1", fit="seq-ops", mixer="min-gru").sort_values("seq_len")
    ns, depth = g["seq_len"].astype(int).to_numpy(), g["seq_ops"].astype(float).to_numpy()
    fit = loglog_fit(ns, depth)
    if fit is None:
        raise Missing("table1", "fewer than 4 seq-ops points of min-gru in table1")
    steps = np.diff(depth) / np.diff(np.log2(ns))  # ops per doubling of n
    even = bool(steps.min() > 0 and np.ptp(steps) <= DOUBLING_SPREAD * steps.mean())
    pairs = ", ".join(f"n={n}: {int(v)}" for n, v in zip(ns, depth, strict=True))
    text = (f"minGRU (scan=levels) graph depth {pairs} (~ n^k, k = {fit.text()}; "
            f"{fmt(float(steps.mean()))} ops per doubling)")
    return text, even and fit.slope < LOG_EXP_MAX, fit.slope > 1 - LOG_EXP_MAX


def _forms(df: pd.DataFrame) -> dict[tuple[str, str], pd.Series]:
    """(layer, scan form) -> the loop's time over the scan's per n (fwdbwd rows of one
    device)."""
    out = {}
    for kind in SCANNED:
        ms = df[df["mixer"] == kind].pivot_table(index="seq_len", columns="scan",
                                                 values="fwdbwd_ms", aggfunc="median")
        for scan in (s for s in SCANS[1:] if s in ms and "sequential" in ms):
            ratio = (ms["sequential"] / ms[scan]).dropna()
            if len(ratio):
                ratio.index = ratio.index.astype(int)
                out[(kind, scan)] = ratio.sort_index()
    return out


def _speedups(stored: Stored) -> tuple[str, list[str], list[str], list[str], list[tuple]]:
    """(text, forms that beat the loop at the longest n on a device, forms that do not,
    the suites read, the judged comparisons): per scan form and device, each layer's speed-up
    over its loop. GPU rows measured before the loop fix are shown and not judged; each judged
    comparison is (what, speed-up, suite, the loop's and the scan's rows at the longest n)."""
    cpu = _rematch(stored, runner="fwdbwd")
    sets = [(cpu["suite"].iloc[0], cpu)]
    seen = len(stored.read)
    gpu = stored.gpu()
    if gpu is not None:
        timed = gpu[gpu["runner"] == "fwdbwd"]
        stored.only(seen, timed, "gpu/")  # the timings it reads, not every GPU row
        sets += [(f"gpu/{suite}", g) for suite, g in timed.groupby("suite")]
    holds, fails, parts, judged = [], [], [], []
    for suite, df in sets:
        forms = _forms(df)
        if not forms:
            raise Missing(suite, f"no sequential and scan timings in {suite}")
        device = f"{df['device'].iloc[0]} ({df['device_name'].iloc[0]})"
        stale = bool(before_loop_fix(df).any())
        for scan in SCANS[1:]:
            ratios = {k: r for (k, s), r in forms.items() if s == scan}
            if not ratios:
                continue
            label = f"{scan} scan on {device}"
            if not stale:
                wins = all(r.iloc[-1] > MIN_SPEEDUP for r in ratios.values())
                (holds if wins else fails).append(label)
                for k, r in ratios.items():
                    n = int(r.index[-1])
                    at = df[(df["mixer"] == k) & (df["seq_len"].astype(int) == n)
                            & df["scan"].isin(["sequential", scan])]
                    judged.append((f"{k} {label}, n={n}", float(r.iloc[-1]), suite, at))
            parts.append(f"{suite}, {label}: " + "; ".join(
                f"{k} " + ", ".join(f"n={n}: {fmt(v)}x" for n, v in r.items())
                for k, r in ratios.items())
                + (" (loop measured before its O(n^2) backward was fixed: shown, not judged)"
                   if stale else ""))
    return ("forward+backward speed-up of each scan over the loop (one timing per point): "
            + "; ".join(parts)), holds, fails, [s for s, _ in sets], judged


def log_depth_training(stored: Stored) -> Evidence:
    depth_text, log_depth, linear = _depth(stored)
    speed_text, holds, fails, suites, judged = _speedups(stored)
    verdict = (CONTRADICTS if linear or not holds else
               SUPPORTS if log_depth and not fails else QUALIFIED)
    where = (f". The speed-up holds for: {', '.join(holds) or 'no form on any device'}"
             + (f"; not for: {', '.join(fails)}" if fails else ""))
    rows = _rematch(stored, runner="fwdbwd")
    judged_rows = pd.concat([r for *_, r in judged]) if judged else rows  # the devices judged
    error = _scan_error(stored)
    return Evidence(
        f"table1, fit=seq-ops (min-gru, scan=levels); {', '.join(suites)}, runner fwdbwd "
        "(minGRU and minLSTM, sequential and scanned); scan-error (float32 against a float64 "
        "loop)", f"{depth_text}; {speed_text}{where}{error}",
        verdict,
        f"per scan form and device: a form's speed-up holds on a device if both layers' "
        f"scan in that form beats the loop (speed-up > {MIN_SPEEDUP}) at the longest n. "
        f"Supports if the depth fits n^k with k < {LOG_EXP_MAX} and adds the same ops per "
        f"doubling of n (within {DOUBLING_SPREAD:.0%}) and every form measured holds on every "
        f"device; contradicts if k > {1 - LOG_EXP_MAX} or no form holds anywhere; else "
        "qualified, naming the forms and devices where it holds. Rows measured before the "
        "loop's fix are not judged. Feng et al. report 175x (minGRU) and 235x (minLSTM) at "
        "n = 512 on a GPU. Gates, over the judged rows (each layer's loop and scan at the "
        f"longest n): forward + backward timings; spread: every row's IQR/median at most "
        f"{SPREAD_SHARE:g} of the scan's speed-up over its loop (larger / smaller - 1); idle "
        "machine: no row flagged busy",
        _scale(rows) + f", d = {int(rows['d_model'].iloc[0])}, batch "
        f"{int(rows['batch_size'].iloc[0])}", _scan_gates(judged),
        figure=f"{rows['suite'].iloc[0]}/scan-throughput.png",
        scope=", ".join(x for x in (device_word(judged_rows), f"n up to "
                                    f"{int(judged_rows['seq_len'].max())}",
                                    f"d = {int(rows['d_model'].iloc[0])}",
                                    f"batch {int(rows['batch_size'].iloc[0])}") if x))


def _scan_gates(judged: list[tuple]) -> tuple[Gate, ...]:
    """The timing gates over the comparisons the scan verdict judges."""
    if not judged:
        return (Gate("spread", False, "no scan form judged (every row measured before the "
                     "loop's fix)", "`tvr run rematch-quick`"),)
    timed = pd.concat([rows for *_, rows in judged])
    suite = str(judged[0][2])
    return (power.forward_backward({what: power.timing_column(rows)
                                    for what, _, _, rows in judged}, suite),
            power.combined([power.spread(rows, power.timing_column(rows),
                                         max(ratio, 1 / ratio) - 1,
                                         f"{what}: the speed-up over the loop", s)
                            for what, ratio, s, rows in judged]),
            power.idle(timed, suite))


def _scan_error(stored: Stored) -> str:
    """The float32 error of each form at the shortest and longest n (suite scan-error), or
    what to run."""
    try:
        df = stored.rows("scan-error", runner="scan-error")
    except Missing:
        return ". Float32 error of the scans: not measured (`tvr run scan-error`)"
    err = df.pivot_table(index="scan", columns="seq_len", values="scan_rel_error",
                         aggfunc="max")
    lo, hi = int(err.columns.min()), int(err.columns.max())
    return (". Float32 error against a float64 loop (largest relative, both layers): " +
            "; ".join(f"{s} n={lo}: {err.loc[s, lo]:.2g}, n={hi}: {err.loc[s, hi]:.2g}"
                      for s in SCANS if s in err.index))


def _recall_rows(stored: Stored) -> pd.DataFrame:
    """The pairs sweep (at the most common width) of suite mqar where it has rows, else the
    rematch suites', each model at its best learning rate."""
    try:
        df = stored.rows("mqar", study="mqar-state", runner="train")
    except Missing:
        df = _rematch(stored, study="mqar-state", runner="train")
    df = df.assign(pairs=lambda f: f["seq_len"].astype(int),
                   d_model=lambda f: f["d_model"].astype(int))
    d = int(df["d_model"].mode().iloc[0])
    return best_lr(df[df["d_model"] == d])


def _floors(pairs) -> str:
    return ", ".join(f"{int(p)} pairs {fmt(floor(int(p)))}" for p in sorted(set(pairs)))


def attention_recalls_more(stored: Stored) -> Evidence:
    df = _recall_rows(stored)
    seeds = int(df.groupby(["mixer_kind", "pairs"])["seed"].nunique().min())
    mean = df[df["mixer_kind"] == "self-attention"].groupby("pairs")["final_accuracy"].mean()
    rule = (f"each model at its best learning rate; at the most pairs at which attention has "
            f"learned recall (mean accuracy >= {RECALLED}, as Zoology asks of attention, and "
            "so far above the no-recall floor: guessing among the values in context), "
            "supports if attention beats every recurrent model on every seed (paired by "
            "seed), contradicts if a recurrent model beats it on every seed, else qualified; "
            f"{INCONCLUSIVE} with fewer than {MIN_SEEDS} seeds, or where attention has learned "
            "recall at no pairs count (then the models are still on the way and their order "
            "says nothing about capacity)")
    scale = (_scale(df) + f", d = {int(df['d_model'].iloc[0])}, up to "
             f"{int(df['steps'].max())} steps")
    learned = mean[mean >= RECALLED]
    if seeds < MIN_SEEDS or learned.empty:
        accs = df.groupby(["pairs", "mixer_kind"])["final_accuracy"].mean()
        why = (f"{seeds} seeds per configuration" if seeds < MIN_SEEDS else
               f"attention below {RECALLED} at every pairs count; mean accuracy "
               + "; ".join(f"{p} pairs: " + ", ".join(f"{k} {fmt(v)}" for k, v in
                                                     accs[p].items()) for p in mean.index)
               + f" (no-recall floor: {_floors(df['pairs'])}; to pass: `tvr run mqar "
               "--executor ray`, trained long enough for attention to learn recall)")
        return Evidence(f"{df['suite'].iloc[0]}, study mqar-state", why, INCONCLUSIVE, rule,
                        scale, figure=f"{df['suite'].iloc[0]}/mqar-state.png",
                        scope=_recall_scope(df))
    p = int(learned.index.max())
    at = df[df["pairs"] == p]
    diffs = {k: paired(at[at["mixer_kind"] == k], at[at["mixer_kind"] == "self-attention"],
                       "final_accuracy") for k in RECURRENT if (at["mixer_kind"] == k).any()}
    won = all(d.mean > 0 and not d.inside_noise for d in diffs.values())
    lost = any(d.mean < 0 and not d.inside_noise for d in diffs.values())
    accs = at.groupby("mixer_kind")["final_accuracy"].mean()
    accuracies = ", ".join(f"{k} {fmt(v)}" for k, v in accs.items())
    differences = "; ".join(f"{k}: {d.text()}" for k, d in diffs.items())
    measured = (f"{p} pairs: mean accuracy {accuracies} (no-recall floor {fmt(floor(p))}, "
                f"{seeds} seeds); attention minus {differences}")
    verdict = CONTRADICTS if lost else SUPPORTS if won else QUALIFIED
    arms = {str(k): g for k, g in at.groupby("mixer_kind")}
    attn = arms["self-attention"]
    comps = [compare(g["final_accuracy"], attn["final_accuracy"], f"self-attention vs {k}, "
                     f"{p} pairs") for k, g in arms.items() if k != "self-attention"]
    suite = str(df["suite"].iloc[0])
    remedy = f"`tvr run {suite}` (or `tvr run mqar --executor ray`)"
    means = {k: float(g["final_accuracy"].mean()) for k, g in arms.items()}
    gates = (power.seeds(arms, suite, MIN_SEEDS),
             baseline_gate(means, {"no-recall floor": floor(p)}, "final_accuracy",
                           f"longer training, until attention learns recall: {remedy}",
                           need="best"),
             range_gate(means, "final_accuracy", 1.0, floor(p),
                        f"more pairs (a task no model recalls whole): {remedy}"),
             power.agree(comps))
    return Evidence(f"{suite}, study mqar-state: pairs swept at d = "
                    f"{int(df['d_model'].iloc[0])}, mixer-lm with only the mixer changed",
                    measured, verdict, rule + f". Gates: {MIN_SEEDS}+ seeds per configuration "
                    "and enough for the exact tests over seeds to reach p < 0.05 (4+), "
                    "attention above the no-recall "
                    "floor, accuracy off its ceiling (two models recalling every pair cannot "
                    "show who recalls more) and the floor, the two exact tests over seeds "
                    "agree on each recurrent model against attention", scale, gates,
                    tuple(t for c in comps for t in c.tests),
                    figure=f"{suite}/mqar-state.png", scope=_recall_scope(df))


def _recall_scope(df: pd.DataFrame) -> str:
    """The recall verdict's scope: width, the budget (one learning rate for every model, or
    each model's best of several), seeds and device."""
    lrs = sorted(pd.to_numeric(df["lr"], errors="coerce").dropna().unique()) \
        if "lr" in df else []
    steps = int(pd.to_numeric(df["steps"], errors="coerce").max()) if "steps" in df else 0
    budget = f"{steps} steps" if steps else ""
    if len(lrs) == 1:
        budget += f" at learning rate {lrs[0]:g} for every model"
    elif lrs:
        budget += f", each model at its best learning rate of {', '.join(f'{v:g}' for v in lrs)}"
    facts = scale_facts(df)
    return ", ".join(x for x in (f"d = {int(df['d_model'].iloc[0])}", budget.strip(", "),
                                 scope_of({"seeds": facts["seeds"],
                                           "device": facts["device"]})) if x)


CLAIMS = [
    Claim("scan-log-depth", f"{LATER} (Feng et al. 2024): a recurrence whose gates do not "
          "depend on h_{t-1} trains with O(log n) sequential operations, and faster than its "
          "sequential form", "rematch-quick", "rematch-quick/scan-throughput.png",
          log_depth_training, kind=TIMING),
    Claim("attention-recalls-more", f"{LATER} (Arora et al. 2023): at equal width, attention "
          "recalls more key-value pairs than a fixed-size recurrent state", "rematch-quick",
          "rematch-quick/mqar-state.png", attention_recalls_more, kind=TRAINED_QUALITY),
]
