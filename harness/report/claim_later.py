"""Later work's claims, judged by the same rules as the paper's but kept apart from them (each
claim's text says whose it is): that a recurrence with gates free of h_{t-1} trains in
O(log n) sequential steps and faster than its loop (Feng et al. 2024; the full `rematch`
suite's rows where it has them, else rematch-quick's), and that attention recalls more
key-value pairs than a fixed-size state at equal width (Arora et al. 2023; the first of
RECALL_SUITES with MQAR rows, rematch-quick's shown as too short to judge).
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
    seeds_gate,
)
from harness.report.rematch import (
    MIXER_ORDER,
    STUDY,
    before_loop_fix,
    best_lr,
    floor,
    state_floats,
)
from harness.report.rulebook import TIMING, TRAINED_QUALITY, scope_of
from harness.report.stats import fmt, loglog_fit
from harness.report.verdicts import CONTRADICTS, QUALIFIED, SUPPORTS
from models import catalog

INCONCLUSIVE = "inconclusive at this scale"
LATER = "Later work, not the paper's"  # every claim here starts with it
LOG_EXP_MAX = 0.5  # a depth growing as log n fits n^k with k well below this over n = 16..256
DOUBLING_SPREAD = 0.25  # per-doubling depth increments within this of their mean: log n
MIN_SPEEDUP = 1.0  # the scan must beat the loop by more than this at the longest n
RECALLED = 0.99  # attention has learned recall where its mean accuracy reaches this (Zoology)
SCANS = ("sequential", "levels", "log")  # the forms of models/minrnn.py


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
    for kind in catalog.of_kind("scanned"):  # minGRU, minLSTM
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


# the recall claim's suites, the first with MQAR rows decides: the CPU-sized grid, the
# GPU-sized one, the full rematch, then rematch-quick (too short to judge: shown only)
RECALL_SUITES = ("mqar-cpu", "mqar", "rematch", "rematch-quick")
RECALL_RUN = "`tvr run mqar-cpu --executor ray` (about 12 core-hours)"


def _recall_rows(stored: Stored) -> pd.DataFrame:
    """The MQAR rows of the first of RECALL_SUITES that has them, with pairs and width, every
    learning rate run (rematch.best_lr picks each mixer's best per setting)."""
    for suite in RECALL_SUITES:
        try:
            df = stored.rows(suite, study=STUDY, runner="train")
        except Missing:
            continue
        return df.assign(pairs=df["seq_len"].astype(int), d_model=df["d_model"].astype(int))
    raise Missing(RECALL_SUITES[0], f"no MQAR rows in {', '.join(RECALL_SUITES)}")


def _by_pairs(df: pd.DataFrame) -> str:
    """Mean accuracy against pairs, per width and mixer, with the mixer's state size and the
    learning rate that won at each setting."""
    parts = []
    for d, at in df.groupby("d_model"):
        mixers = []
        for mixer, g in sorted(at.groupby("mixer_kind"), key=lambda kv: _order(kv[0])):
            cells = []
            for p, s in g.groupby("pairs"):
                lr = f", lr {s['lr'].iloc[0]:g}" if "lr" in s else ""
                cells.append(f"{p}: {fmt(float(s['final_accuracy'].mean()))} (state "
                             f"{state_floats(s.iloc[0]):g}{lr})")
            mixers.append(f"{mixer} " + ", ".join(cells))
        parts.append(f"d = {d}, mean accuracy by pairs (state: numbers per layer; lr: the "
                     "best of those run): " + "; ".join(mixers))
    return ". ".join(parts)


def _order(mixer: str) -> tuple[int, str]:
    return (MIXER_ORDER.index(mixer) if mixer in MIXER_ORDER else len(MIXER_ORDER), mixer)


RECALL_RULE = (
    "each mixer at its best learning rate per setting (the highest mean accuracy over seeds, "
    "as Zoology sweeps it); judged at each width at the most pairs at which attention has "
    f"learned recall (mean accuracy >= {RECALLED}, as Zoology asks of attention); there, "
    "supports if attention's accuracy is above every recurrent model's, separated by both "
    "exact tests over seeds (p < 0.05), contradicts if a recurrent model's is so above "
    f"attention's, else qualified; {INCONCLUSIVE} where attention has learned recall at no "
    "setting (the models are then still on the way and their order says nothing about "
    "capacity)")
RECALL_GATES = (
    f"Gates: {MIN_SEEDS}+ seeds per mixer and setting and enough for the exact tests over "
    "seeds to reach p < 0.05 (4+), attention above the no-recall floor, accuracy off its "
    "ceiling (two models recalling every pair cannot show who recalls more) and the floor, "
    "the two exact tests over seeds agree on each recurrent model against attention")


def attention_recalls_more(stored: Stored) -> Evidence:
    swept = _recall_rows(stored)
    df = best_lr(swept)
    suite = str(df["suite"].iloc[0])
    mixers = sorted(set(df["mixer_kind"].astype(str)), key=_order)
    attn = df[df["mixer_kind"] == "self-attention"].groupby(["pairs", "d_model"])
    mean = attn["final_accuracy"].mean()
    learned = mean[mean >= RECALLED]
    if learned.empty:
        return _not_learned(df, mean, RECALL_RULE, swept)
    judged = [(int(learned.loc[:, d].index.max()), int(d))
              for d in sorted(learned.index.get_level_values("d_model").unique())]
    comps, arms, texts, gates = [], {}, [], {"baselines": [], "range": []}
    absent: dict[str, int] = {}  # a mixer of the suite with no row at a judged setting
    for p, d in judged:
        at = df[(df["pairs"] == p) & (df["d_model"] == d)]
        groups = {str(k): g for k, g in at.groupby("mixer_kind")}
        arms |= {f"{k} at {p} pairs, d = {d}": g for k, g in groups.items()}
        absent |= {f"{k} at {p} pairs, d = {d}": 0 for k in mixers if k not in groups}
        means = {k: float(g["final_accuracy"].mean()) for k, g in groups.items()}
        here = [(k, compare(g["final_accuracy"], groups["self-attention"]["final_accuracy"],
                            f"self-attention vs {k}, {p} pairs, d = {d}"))
                for k, g in groups.items() if k != "self-attention"]
        comps += here
        texts.append(f"at {p} pairs, d = {d}: attention minus " + "; ".join(
            f"{k} ({fmt(means[k])}, state {state_floats(groups[k].iloc[0]):g}): {c.text()}"
            for k, c in here))
        gates["baselines"].append(baseline_gate(
            means, {"no-recall floor": floor(p)}, f"final_accuracy at {p} pairs, d = {d}",
            f"longer training, until attention learns recall: `tvr run {suite}`", need="best"))
        gates["range"].append(range_gate(means, f"final_accuracy at {p} pairs, d = {d}", 1.0,
                                         floor(p), f"more pairs (a task no model recalls "
                                         f"whole): `tvr run {suite}`"))
    lost = [k for k, c in comps if c.separated and c.diff < 0]
    won = [k for k, c in comps if c.separated and c.diff > 0]
    verdict = CONTRADICTS if lost else SUPPORTS if len(won) == len(comps) else QUALIFIED
    unjudged = [f"d = {d}: attention's best mean accuracy {fmt(float(mean.loc[:, d].max()))} "
                f"(at {int(mean.loc[:, d].idxmax())} pairs), below {RECALLED}: not judged"
                for d in sorted(set(mean.index.get_level_values("d_model")))
                if d not in {w for _, w in judged}]
    seeds = seeds_gate({a: int(g["seed"].nunique()) for a, g in arms.items()} | absent,
                       f"4+ seeds per mixer and setting (`tvr run {suite}`; the exact tests over "
                       "3 + 3 seeds cannot go below p = 0.1)", MIN_SEEDS)
    checks = [seeds, power.combined(gates["baselines"]),
              power.combined(gates["range"]), power.agree([c for _, c in comps])]
    if suite == "rematch-quick":
        checks.append(Gate("scale", False, "rematch-quick: up to 400 steps at 2 and 4 pairs, "
                           "too short to judge recall", RECALL_RUN))
    return Evidence(
        f"{suite}, study {STUDY}: mixer-lm with only the mixer changed, judged at "
        + ", ".join(f"{p} pairs, d = {d}" for p, d in judged),
        f"{'. '.join([*texts, *unjudged])}. {_by_pairs(df)}. No-recall floor: "
        f"{_floors(df['pairs'])}",
        verdict, f"{RECALL_RULE}. {RECALL_GATES}" + ("; rematch-quick is too short to judge"
                                                     if suite == "rematch-quick" else ""),
        _scale(df), tuple(checks), tuple(t for _, c in comps for t in c.tests),
        figure=f"{suite}/mqar-state.png", scope=_recall_scope(pd.concat(arms.values()), swept))


def _not_learned(df: pd.DataFrame, mean: pd.Series, rule: str,
                 swept: pd.DataFrame) -> Evidence:
    """Inconclusive: attention's best mean accuracy over its settings (`mean`, by pairs and
    width) is below RECALLED, so no setting can be judged; what was reached and what to run."""
    suite = str(df["suite"].iloc[0])
    attn = df[df["mixer_kind"] == "self-attention"]
    p, d = mean.idxmax()
    at = attn[(attn["pairs"] == p) & (attn["d_model"] == d)]
    lr = f" (lr {at['lr'].iloc[0]:g})" if "lr" in at else ""
    some = int((at["final_accuracy"] >= RECALLED).sum())  # seeds that learned it there
    split = (f" ({some} of them at {RECALLED} or more: whether attention learns recall at "
             "this size depends on the seed)" if some else "")
    why = (f"attention has not learned recall at any setting: its best mean accuracy "
           f"{fmt(float(mean.max()))} at {p} pairs, d = {d}{lr}, {at['seed'].nunique()} "
           f"seeds{split}, below {RECALLED}. {_by_pairs(df)}. No-recall floor: "
           f"{_floors(df['pairs'])}. To pass: "
           + ("a suite trained long enough for attention to learn recall, "
              f"{RECALL_RUN}" if suite == "rematch-quick" else
              f"the planned runs of `tvr run {suite}` where it has some (the finished gate), "
              "else longer training or another learning rate"))
    return Evidence(f"{suite}, study {STUDY}", why, INCONCLUSIVE, rule, _scale(df),
                    figure=f"{suite}/mqar-state.png", scope=_recall_scope(df, swept))


def _floors(pairs) -> str:
    return ", ".join(f"{int(p)} pairs {fmt(floor(int(p)))}" for p in sorted(set(pairs)))


def _recall_scope(df: pd.DataFrame, swept: pd.DataFrame) -> str:
    """The recall verdict's scope from the rows it judged (`df`): parameters, widths and pairs,
    the budget (one learning rate for every model, or each model's best of those `swept`),
    seeds and device; rematch-quick's called too small."""
    lrs = sorted(pd.to_numeric(swept["lr"], errors="coerce").dropna().unique()) \
        if "lr" in swept else []
    steps = int(pd.to_numeric(df["steps"], errors="coerce").max()) if "steps" in df else 0
    budget = f"up to {steps:,} steps" if steps else ""
    if len(lrs) == 1:
        budget += f" at learning rate {lrs[0]:g} for every model"
    elif lrs:
        budget += f", each model at its best learning rate of {', '.join(f'{v:g}' for v in lrs)}"
    settings = " and ".join(  # "d = 32 at 4 pairs", each width with its numbers of pairs
        f"d = {d} at {', '.join(str(p) for p in sorted(g['pairs'].astype(int).unique()))} pairs"
        for d, g in df.groupby(df["d_model"].astype(int)))
    facts = scale_facts(df)
    scope = ", ".join(x for x in (scope_of({"params": facts["params"]}), settings,
                                  budget.strip(", "), scope_of({"seeds": facts["seeds"],
                                            "device": facts["device"]})) if x)
    too_small = str(df["suite"].iloc[0]) == "rematch-quick"
    return f"rematch-quick, too short to judge: {scope}" if too_small else scope


CLAIMS = [
    Claim("scan-log-depth", f"{LATER} (Feng et al. 2024): a recurrence whose gates do not "
          "depend on h_{t-1} trains with O(log n) sequential operations, and faster than its "
          "sequential form", "rematch-quick", "rematch-quick/scan-throughput.png",
          log_depth_training, kind=TIMING),
    Claim("attention-recalls-more", f"{LATER} (Arora et al. 2023): at equal width, attention "
          "recalls more key-value pairs than a fixed-size recurrent state", RECALL_SUITES[0],
          f"{RECALL_SUITES[0]}/mqar-state.png", attention_recalls_more, kind=TRAINED_QUALITY),
]
