"""Claims about gradients through depth and distance: exploding gradients and Post-LN's
gradient scale against depth at initialization (suite `convergence-quick`), and what
residual connections preserve through depth (suite `residual`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.report import claim_power as power
from harness.report.claim_training import (
    SUITE,
    probe_scope,
    study_rows,
    trained_scope,
    training_scale,
)
from harness.report.evidence import Claim, Evidence, Missing, Stored, scale_facts
from harness.report.gates import Comparison, Gate, agree_gate, below_tests, range_gate
from harness.report.rulebook import PROBE, TRAINED_QUALITY
from harness.report.stats import fmt, spread, t_interval
from harness.report.verdicts import CONTRADICTS, QUALIFIED, SUPPORTS

EXPLODED = 1.0  # log10 gradient ratio far over near: 10x larger counts as exploding
GATED = ("lstm", "gru")  # recurrent cells with gates: the remedy for exploding gradients
# the log10 ratio of two float32 gradient norms lies within +-this (largest finite over the
# smallest subnormal): a ratio there overflowed or underflowed, the metric's ceiling and floor
FLOAT32_SPAN = float(np.log10(np.finfo(np.float32).max)
                     - np.log10(np.finfo(np.float32).smallest_subnormal))


def exploding_gradients(stored: Stored) -> Evidence:
    rows = study_rows(stored, "gradient-distance", runner="grad-distance")
    rnn = rows[~rows["model"].str.startswith("transformer")]
    columns = [c for c in ("grad_decay_init", "grad_decay_trained") if c in rnn]
    per_seed = rnn.assign(worst=rnn[columns].max(axis=1))  # each seed's larger ratio
    by_model = dict(tuple(per_seed.groupby("model")))
    worst = {m: float(g["worst"].max()) for m, g in by_model.items()}
    exploded = [m for m, v in worst.items() if v >= EXPLODED]
    diverged = stored.rows(SUITE)
    diverged = diverged[diverged["status"] == "diverged"]
    ungated = [m for m in worst if not any(m.startswith(g) for g in GATED)]
    family = Gate("model family", bool(ungated),
                  f"recurrent models measured: {', '.join(worst)}; ungated: "
                  f"{', '.join(ungated) or 'none'}",
                  "an ungated (Elman) recurrent model in a gradient-distance study (no suite "
                  "has one: gating is the remedy the claim motivates)")
    verdict = SUPPORTS if exploded or len(diverged) else CONTRADICTS
    # the tests behind the verdict: each recurrent model's per-seed ratio below 10^EXPLODED
    tests = tuple(t for m, g in by_model.items()
                  for t in below_tests(g["worst"], EXPLODED, f"{m} log10 gradient ratio"))
    pairs = [tests[i:i + 2] for i in range(0, len(tests), 2)]
    agree = [agree_gate(p) for p in pairs]
    gates = (family, power.seeds(by_model, SUITE),
             power.unigram(by_model, "final_bits_per_char"),
             range_gate({m: float(g["worst"].mean()) for m, g in by_model.items()},
                        "log10 gradient ratio", FLOAT32_SPAN, -FLOAT32_SPAN,
                        "gradients that neither overflow nor underflow in float32"),
             next((g for g in agree if not g.passed), agree[0]) if agree else agree_gate([]))
    return Evidence(
        f"gradient-distance (n = {int(rows['seq_len'].iloc[0])}): gradient norm at the "
        "farthest position over the nearest, at initialization and after training; "
        "diverged training rows of the suite",
        "largest log10 ratio per model (init and trained): " + "; ".join(
            f"{m} {v:.3g}" for m, v in worst.items()) +
        f"; {len(diverged)} diverged training run{'s' if len(diverged) != 1 else ''}",
        verdict,
        f"supports if a recurrent model's gradient grows by 10^{EXPLODED:g} or more over the "
        "distance, or a training run diverged; else contradicts at this scale. Gates: an "
        "ungated recurrent model is measured (gated cells are built not to explode); 5 seeds "
        "per model; the trained models below the unigram model on bits/char (they learned "
        "more than character frequencies); the log10 ratio off float32's overflow and "
        f"underflow (+-{FLOAT32_SPAN:.3g}); a one-sided t-test and an exact sign test over "
        f"seeds agree on each model's ratio against 10^{EXPLODED:g}",
        training_scale(rows), gates, tests, facts=scale_facts(rows),
        scope=trained_scope(rows, f"n = {int(rows['seq_len'].iloc[0])}"))


RESIDUAL_SUITE = "residual"  # the stacks with and without residual branches, at init
PASSED_BACK = 1.0  # |log10| of the gradient reaching the input over the one leaving the
# last layer: within 10x either way counts as passed back (the bound EXPLODED uses above);
# at or below -PASSED_BACK in every seed, lost; at or above +PASSED_BACK in some, grown


_LN = {"post": "Post-LN", "pre": "Pre-LN"}


def _mean_ci(values: pd.Series) -> str:
    lo, hi = t_interval(values)
    return f"{fmt(float(values.mean()))} [{fmt(lo)}, {fmt(hi)}]"


@dataclass(frozen=True)
class _Placement:
    """One norm placement at the judged depth: its arms, the signal comparison, which arms
    lost the gradient (log10 at or below -PASSED_BACK in every seed), whether the arm with
    the branch passed it back (|log10| below PASSED_BACK in every seed) and its sentence."""
    arms: dict[str, pd.DataFrame]
    signal: Comparison
    lost: tuple[str, ...]  # "with", "without"
    passed_with: bool
    name: str  # "Post-LN", "Pre-LN"
    text: str


def _placement(norm: str, g: pd.DataFrame, depth: int) -> _Placement:
    ln = _LN[norm]
    with_, without = g[g["kept"]], g[~g["kept"]]
    if with_.empty or without.empty:
        raise Missing(RESIDUAL_SUITE, f"{ln} at depth {depth} needs rows with and without "
                      "the residual branch")
    c = power.versus(without, with_, "signal_last_over_input",
                     f"{ln} depth {depth}: signal kept, with vs without residual")
    unmeasured = [k for k, d in (("with", with_), ("without", without))
                  if d["passed"].isna().any()]
    if unmeasured:
        raise Missing(RESIDUAL_SUITE, f"{ln} at depth {depth}: the gradient ratio is not a "
                      f"number in some seed {' and '.join(unmeasured)} the residual branch")
    lost = tuple(k for k, d in (("with", with_), ("without", without))
                 if bool((d["passed"] <= -PASSED_BACK).all()))
    passed_with = bool((with_["passed"].abs() < PASSED_BACK).all())
    text = (f"{ln}: signal kept {_mean_ci(with_['signal_last_over_input'])} with the "
            f"residual branch, {_mean_ci(without['signal_last_over_input'])} without "
            f"({c.text()}); log10 gradient norm at the input over the last layer's "
            f"{_mean_ci(with_['passed'])} with, {_mean_ci(without['passed'])} without")
    return _Placement({f"{ln} with": with_, f"{ln} without": without}, c, lost, passed_with,
                      ln, text)


def _by_norm(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Post-LN first, then Pre-LN."""
    return sorted(((str(n), g) for n, g in frame.groupby("norm")), key=lambda kv: kv[0] != "post")


def _signal_by_depth(rows: pd.DataFrame) -> str:
    def mean(g: pd.DataFrame) -> str:
        return fmt(float(g["signal_last_over_input"].mean()))
    return "; ".join(f"depth {int(d)}: " + ", ".join(
        f"{_LN[n]} {mean(g[g['kept']])} with, {mean(g[~g['kept']])} without"
        for n, g in _by_norm(dg)) for d, dg in rows.groupby("n_layers"))


def residual_connections(stored: Stored) -> Evidence:
    """At the deepest depth measured, for Post-LN and Pre-LN apart (both: a depth missing
    either is not judged): the signal half (token diversity the last layer keeps of the
    input, with against without the residual branch) and the gradient half (the gradient
    norm passed back to the input within 10x)."""
    rows = stored.rows(RESIDUAL_SUITE, study="residual", runner="layer-grads")
    rows = rows.assign(kept=rows["residual"].astype(str) == "True",
                       passed=np.log10(rows["grad_input_over_output"].astype(float)))
    deepest = int(rows["n_layers"].max())
    depths = ", ".join(str(int(d)) for d in sorted(rows["n_layers"].unique()))
    at = rows[rows["n_layers"] == deepest]
    absent = sorted(set(rows["norm"].astype(str)) - set(at["norm"].astype(str)))
    if absent:
        raise Missing(RESIDUAL_SUITE, f"{', '.join(_LN.get(n, n) for n in absent)} has no rows "
                      f"at depth {deepest}, the deepest measured: every placement is judged")
    placed = [_placement(n, g, deepest) for n, g in _by_norm(at)]
    comps = [p.signal for p in placed]
    kept_signal = all(c.separated and c.diff > 0 for c in comps)
    with_lost = any("with" in p.lost for p in placed)
    gradient_half = all(p.passed_with and "without" in p.lost for p in placed)
    verdict = (CONTRADICTS if with_lost or any(c.separated and c.diff < 0 for c in comps) else
               SUPPORTS if kept_signal and gradient_half else QUALIFIED)
    why = ("" if verdict != QUALIFIED else
           ". Qualified: " + "; ".join(x for x in (
               "" if kept_signal else "the signal is not kept apart at every placement",
               "" if gradient_half else "the gradient half is not shown here: "
               + _gradient_why(placed)) if x))
    return Evidence(
        f"{RESIDUAL_SUITE}, layer-grads: Transformer LM stacks with and without the residual "
        f"branch around each sub-layer, depths {depths}, judged at depth {deepest}",
        f"Means with their 95% t-intervals over {rows['seed'].nunique()} seeds. "
        f"{'. '.join(p.text for p in placed)}. Signal kept by depth (means): "
        f"{_signal_by_depth(rows)}{why}",
        verdict, RESIDUAL_RULE, training_scale(rows),
        (power.seeds({a: g for p in placed for a, g in p.arms.items()}, RESIDUAL_SUITE),
         power.agree(comps)),
        tuple(t for c in comps for t in c.tests), scale_facts(rows),
        figure=f"{RESIDUAL_SUITE}/residual-depth.png",
        scope=probe_scope(rows, f"depths {depths}, d = {int(rows['d_model'].iloc[0])}, "
                                f"n = {int(rows['seq_len'].iloc[0])}"))


def _gradient_why(placed: list[_Placement]) -> str:
    """Why the gradient half does not hold: the arm without the branch does not lose the
    gradient in every seed, or the arm with it is not within 10x in every seed (grown or
    shrunk: the range of its log10 ratio over seeds says which)."""
    def spread(p: _Placement) -> str:
        (with_,) = [g["passed"] for a, g in p.arms.items() if a.endswith(" with")]
        return f"{p.name} log10 {fmt(float(with_.min()))} to {fmt(float(with_.max()))}"
    kept = [p.name for p in placed if "without" not in p.lost]
    off = [spread(p) for p in placed if not p.passed_with]
    return "; ".join(x for x in (
        f"without the residual branch the gradient reaching the input is not lost in every "
        f"seed ({', '.join(kept)})" if kept else "",
        f"with the branch it is not within 10x in every seed ({'; '.join(off)} over seeds)"
        if off else "") if x)


RESIDUAL_RULE = (
    "at initialisation, at the deepest depth measured, Post-LN and Pre-LN each: the signal "
    "half holds if the last layer keeps more of the input's token diversity (||x - mean over "
    "positions|| / ||x||, the last layer's over the input's; 0: every position the same "
    "vector) with the residual branch than without, separated by both exact tests over "
    "seeds; the gradient half holds if the gradient norm reaching the input is within "
    f"10^{PASSED_BACK:g} of the one leaving the last layer in every seed with the branch and "
    f"lost (10^-{PASSED_BACK:g} or less) in every seed without it. Supports if both halves "
    "hold at both placements; contradicts if the branch keeps less signal (separated) or "
    "loses the gradient in every seed; else qualified, naming the half not shown. Gates: 5 "
    "seeds per arm, the tests agree")


def post_ln_depth(stored: Stored) -> Evidence:
    """At initialization, Post-LN's last/first layer gradient ratio grows with depth: a trend
    claim, so it must rise between every pair of neighbouring depths measured, or the
    verdict is qualified, saying where the rise stops."""
    grads = study_rows(stored, "norm-warmup", runner="layer-grads")
    by = {(str(n), int(d)): g for (n, d), g in grads.groupby(["norm", "n_layers"])}
    post = dict(sorted((d, g) for (n, d), g in by.items() if n == "post"))
    if len(post) < 2:
        raise Missing(SUITE, "norm-warmup needs Post-LN layer-grads rows at two depths")
    column = "grad_norm_last_over_first"
    lo, hi = min(post), max(post)
    grows = power.versus(post[lo], post[hi], column, f"Post-LN depth {hi} vs {lo}")
    depths = list(post)
    steps = [(a, b, power.versus(post[a], post[b], column, f"Post-LN depth {b} vs {a}"))
             for a, b in zip(depths, depths[1:], strict=False)]
    stalls = [f"{a} to {b}" for a, b, s in steps if not (s.diff > 0 and s.separated)]
    arms = {f"post depth {d}": g for d, g in post.items()}
    ratio_hi = float(post[hi][column].mean())
    verdict = (CONTRADICTS if grows.separated and grows.diff < 0 else
               SUPPORTS if grows.diff > 0 and grows.separated and ratio_hi > 1 and not stalls
               else QUALIFIED)
    trend = ("" if len(steps) < 2 else "; between neighbouring depths: " + "; ".join(
        f"{b} minus {a}: {s.text()}" for a, b, s in steps))
    if stalls and verdict == QUALIFIED and grows.diff > 0:
        trend += f" (the rise stops: not a separated rise from depth {', '.join(stalls)})"
    pre = "; ".join(f"depth {d}: {spread(g[column])}"
                    for (n, d), g in by.items() if n == "pre")
    comps = [grows, *(s for _, _, s in steps if (s.a, s.b) != (grows.a, grows.b))]
    return Evidence(
        "norm-warmup, layer-grads: per-layer parameter gradient norms at initialization, "
        f"depths {', '.join(map(str, depths))}",
        "Post-LN last/first layer gradient norm: " + "; ".join(
            f"depth {d}: {spread(g[column])}" for d, g in post.items()) +
        f" (depth {hi} minus {lo}: {grows.text()}{trend}). Pre-LN, for contrast: {pre}",
        verdict,
        "at initialization, a trend over depth: supports if Post-LN's last/first ratio rises "
        "between every pair of neighbouring depths measured and from the shallowest to the "
        "deepest, each rise separated by both exact tests over seeds, and is above 1 at the "
        "deepest (layers near the output get the larger gradients); contradicts if it "
        "shrinks from the shallowest to the deepest, so separated; else qualified, naming "
        "the depths where the rise stops. Gates: 5 seeds per depth, the tests agree",
        training_scale(grads), (power.seeds(arms, SUITE), power.agree(comps)),
        tuple(t for c in comps for t in c.tests), scale_facts(grads),
        scope=probe_scope(grads, f"Post-LN depths {', '.join(map(str, depths))}"))


CLAIMS = [
    Claim("exploding-gradients", "Recurrent networks suffer from exploding gradients over "
          "long paths", SUITE, f"{SUITE}/grad-distance.png", exploding_gradients,
          kind=TRAINED_QUALITY),
    # the two below: measured at initialisation (runner layer-grads: no training step), probes
    Claim("residual", "Residual connections preserve signal and gradients through depth",
          RESIDUAL_SUITE, f"{RESIDUAL_SUITE}/residual-depth.png", residual_connections,
          kind=PROBE),
    Claim("post-ln-depth", "At initialization, Post-LN's gradient scale depends on depth "
          "(larger near the output in deeper stacks)", SUITE,
          f"{SUITE}/layer-grad-norms.png", post_ln_depth, kind=PROBE),
]
