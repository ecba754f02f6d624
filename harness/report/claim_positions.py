"""Claims about positions and LayerNorm placement, judged from the `positional` and
`norm-warmup` studies of suite `convergence-quick`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.report import claim_power as power
from harness.report.claim_training import (
    EXTRAPOLATES,
    NEAR_EQUAL,
    SUITE,
    WARMUP_GAIN,
    capped_steps,
    study_rows,
    trained_scope,
    training_scale,
)
from harness.report.evidence import Claim, Evidence, Missing, Stored, scale_facts
from harness.report.gates import Gate, power_gate
from harness.report.rulebook import IDENTITY_KIND, TRAINED_QUALITY
from harness.report.stats import censored_text, spread
from harness.report.verdicts import CONTRADICTS, IDENTITY, QUALIFIED, SUPPORTS

CHANCE_MARGIN = 2.0  # "above chance": accuracy more than twice 1/alphabet


def _by_encoding(stored: Stored) -> dict[tuple[str, str], pd.DataFrame]:
    rows = capped_steps(study_rows(stored, "positional"))
    return {(str(t), str(pe)): g for (t, pe), g in rows.groupby(["task", "pos_encoding"])}


def _tests(comps: list) -> tuple:
    return tuple(t for c in comps for t in c.tests)


def _tasks(rows: pd.DataFrame, extra: str = "") -> str:
    """"one task (reverse), n = 8": the tasks and the length a positional verdict holds at."""
    tasks = sorted(rows["task"].astype(str).unique())
    count = "one task" if len(tasks) == 1 else f"{len(tasks)} tasks"
    return f"{count} ({', '.join(tasks)}), n = {int(rows['seq_len'].max())}{extra}"


def order_needs_positions(stored: Stored) -> Evidence:
    groups = _by_encoding(stored)
    tasks = sorted({t for t, _ in groups})
    parts, needed, above_chance, comps, gates = [], True, False, [], []
    for task in tasks:
        none, sin = groups.get((task, "none")), groups.get((task, "sinusoidal"))
        if none is None or sin is None:
            raise Missing(SUITE, f"positional study lacks none/sinusoidal rows for {task}")
        gap = power.versus(none, sin, "final_accuracy")  # sinusoidal minus none
        comps.append(gap)
        needed &= gap.diff > 0 and gap.separated
        chance = 1 / float(none["alphabet_size"].iloc[0]) if "alphabet_size" in none else 0
        above_chance |= bool(none["final_accuracy"].mean() > CHANCE_MARGIN * chance)
        arms = {f"{task} none": none, f"{task} sinusoidal": sin}
        gates += [power.seeds(arms, SUITE), power.chance(arms, need="best"),
                  power.accuracy_range(arms, "final_accuracy", SUITE)]
        parts.append(f"{task}: no encoding {spread(none['final_accuracy'])}, sinusoidal "
                     f"{spread(sin['final_accuracy'])}; sinusoidal minus none {gap.text()}")
    verdict = CONTRADICTS if not needed else QUALIFIED if above_chance else SUPPORTS
    rows = pd.concat(groups.values())
    return Evidence(
        "positional: order-dependent tasks with and without a positional encoding (a causal "
        "decoder-only model)", "; ".join(parts), verdict,
        "contradicts unless sinusoidal positions beat none, separated by both exact tests over "
        f"seeds, on every task; qualified if the model without positions still scores above "
        f"{CHANCE_MARGIN:g}x chance (a causal mask leaks order, so a causal model is not "
        "permutation-equivariant). Gates: 5 seeds, the better arm above chance, accuracies "
        "off the ceiling, tests agree",
        training_scale(rows), (*power.one_per_name(gates), power.agree(comps)), _tests(comps),
        scale_facts(rows), scope=trained_scope(rows, _tasks(rows)))



EXACT = 1e-9  # float64: a relative error below this is an identity holding exactly
ROUNDING = 1e-5  # the float32 sinusoid table: residuals below this are rounding
BROKEN = 1e-3  # a relative error above this is the identity failing


def equivariance(stored: Stored) -> Evidence:
    rows = stored.rows("identities")
    err = {m: g["equivariance_error"] for m, g in rows.groupby("mixer")}
    if "self-attention" not in err:
        raise Missing("identities", "suite identities has no self-attention rows")
    holds = err["self-attention"].max() <= EXACT
    control = "lstm" in err and err["lstm"].min() >= BROKEN  # the check can fail
    verdict = CONTRADICTS if not holds else SUPPORTS if control else QUALIFIED
    return Evidence(
        "identities: one mixer without positions, float64, a random permutation per seed",
        "largest |f(xP) - f(x)P| / |f(x)|: " + "; ".join(
            f"{m} {spread(v)}" for m, v in err.items()),
        verdict,
        f"supports if self-attention's error is at most {EXACT:g} on every seed while the "
        f"LSTM's (a control the check must catch) is at least {BROKEN:g}; contradicts if "
        "attention's is larger; qualified without a failing control", _identity_scale(rows),
        facts=scale_facts(rows), kind=IDENTITY)


def pe_linear(stored: Stored) -> Evidence:
    rows = stored.rows("identities")
    residual = float(rows["pe_shift_residual"].max())
    verdict = SUPPORTS if residual <= ROUNDING else CONTRADICTS if residual > BROKEN \
        else QUALIFIED
    first = rows.iloc[0]
    return Evidence(
        f"identities: least-squares M_k with PE[pos + k] = PE[pos] M_k over "
        f"{int(first['pe_positions'])} positions, k = {first['pe_shifts']}",
        f"largest relative residual {residual:.2g} (the table is float32)", verdict,
        f"supports if the residual is at most {ROUNDING:g} (rounding), contradicts above "
        f"{BROKEN:g}, else qualified", _identity_scale(rows), facts=scale_facts(rows),
        kind=IDENTITY)


def _identity_scale(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    return (f"n = {int(first['seq_len'])}, d = {int(first['d_model'])}, "
            f"{rows['seed'].nunique()} seeds, machine {first.get('machine', '?')}")


def extrapolation(stored: Stored) -> Evidence:
    """Trained at n, evaluated at 2n. The verdict holds on the tasks measured and says so in
    its scope ("one task (reverse)"), as the other positional claims read from the same rows
    do; a task count is the scale of the evidence, not a gate on it."""
    groups = _by_encoding(stored)
    parts, beats, holds, comps, gates = [], True, True, [], []
    for task in sorted({t for t, _ in groups}):
        sin = groups[(task, "sinusoidal")]
        holds &= bool(sin["accuracy_2n"].mean() >= EXTRAPOLATES * sin["final_accuracy"].mean())
        line = [f"{task} at 2n: sinusoidal {spread(sin['accuracy_2n'])}"]
        arms = {f"{task} sinusoidal": sin}
        for other in ("learned", "none"):
            if (task, other) in groups:
                g = arms[f"{task} {other}"] = groups[(task, other)]
                diff = power.versus(g, sin, "accuracy_2n")  # sinusoidal minus other
                comps.append(diff)
                beats &= diff.diff > 0 and diff.separated
                line.append(f"{other} {spread(g['accuracy_2n'])} (sinusoidal minus {other} "
                            f"{diff.text()})")
        gates += [power.seeds(arms, SUITE), power.chance(arms, "accuracy_2n", need="best"),
                  power.accuracy_range(arms, "accuracy_2n", SUITE)]
        parts.append(", ".join(line))
    verdict = SUPPORTS if holds else QUALIFIED if beats else CONTRADICTS
    rows = pd.concat(groups.values())
    return Evidence(
        "positional: trained at n, evaluated at 2n (lengths never seen in training)",
        "; ".join(parts), verdict,
        f"supports if sinusoidal accuracy at 2n is at least {EXTRAPOLATES:.0%} of its accuracy "
        "at n; qualified if it is lower but beats learned and no encoding, separated by both "
        "exact tests over seeds; else contradicts. Gates: 5 seeds, the best arm above chance "
        "at 2n, accuracy at 2n off its ceiling and floor, tests agree. The verdict holds on "
        "the tasks and lengths measured, which its scope names",
        training_scale(rows), (*power.one_per_name(gates), power.agree(comps)),
        _tests(comps), scale_facts(rows),
        scope=trained_scope(rows, _tasks(rows, " evaluated at 2n")))


def learned_vs_sinusoidal(stored: Stored) -> Evidence:
    """"Nearly identical results": a claim about quality, judged on final accuracy within
    NEAR_EQUAL (a margin needs no test); steps to 99% shown as a secondary measurement."""
    groups = _by_encoding(stored)
    parts, close, apart, comps, gates = [], True, False, [], []
    for task in sorted({t for t, _ in groups}):
        sin, learned = groups[(task, "sinusoidal")], groups[(task, "learned")]
        arms = {f"{task} sinusoidal": sin, f"{task} learned": learned}
        diff = power.versus(sin, learned, "final_accuracy")  # learned minus sinusoidal
        near = abs(diff.diff) <= NEAR_EQUAL
        close &= near
        apart |= not near and diff.separated
        comps.append(diff)
        gates += [power.seeds(arms, SUITE), power.chance(arms),
                  power.accuracy_range(arms, "final_accuracy", SUITE, remedy=(
                      "a harder task for the positional study, where final accuracy stays "
                      f"below 99% (longer sequences in `tvr run {SUITE}`): at the ceiling "
                      "\"nearly identical\" is the ceiling's doing, not the encodings'"))]
        parts.append(f"{task}: accuracy sinusoidal {spread(sin['final_accuracy'])}, learned "
                     f"{spread(learned['final_accuracy'])}; learned minus sinusoidal "
                     f"{diff.text()}. Secondary, steps to 99%: sinusoidal "
                     f"{censored_text(sin['steps_to_target'], sin['steps'])}, learned "
                     f"{censored_text(learned['steps_to_target'], learned['steps'])}")
    verdict = SUPPORTS if close else CONTRADICTS if apart else QUALIFIED
    rows = pd.concat(groups.values())
    if verdict == SUPPORTS:  # "nearly identical" is a no-effect conclusion: bound it
        gates.append(_equivalence(groups))
    return Evidence(
        "positional: learned vs sinusoidal encodings on synthetic tasks, final held-out "
        "accuracy (supplementary to the translation rows of Table 3 (E)); steps to 99% as a "
        "secondary measurement", "; ".join(parts), verdict,
        f"quality, as the claim is worded: supports if final accuracies differ by at most "
        f"{NEAR_EQUAL:.0%} (absolute) on every task; contradicts if they differ by more "
        "and both exact tests over seeds separate them; else qualified. Steps to 99% are "
        "shown, never judged. Gates: 5 seeds, both above chance, accuracy off its ceiling "
        "(two arms at it differ by at most a point whatever the encodings do: \"nearly "
        "identical\" cannot show there), the tests agree; for supports, power: the "
        f"difference bounded within +-{NEAR_EQUAL:.0%} on every task by the one-sided 95% "
        "bounds of both directions (an equivalence test, TOST at p < 0.05)",
        training_scale(rows), (*power.one_per_name(gates), power.agree(comps)), _tests(comps),
        scale_facts(rows), scope=trained_scope(rows, _tasks(rows)))


def _equivalence(groups: dict[tuple[str, str], pd.DataFrame]) -> Gate:
    """The power gate of "nearly identical": on every task, learned minus sinusoidal accuracy
    bounded within +-NEAR_EQUAL, each direction by gates.power_gate (together a TOST)."""
    remedy = f"more seeds per encoding in `tvr run {SUITE}` (the bound narrows as 1/sqrt(seeds))"
    one_sided = []
    for task in sorted({t for t, _ in groups}):
        sin, learned = groups[(task, "sinusoidal")], groups[(task, "learned")]
        for a, b, what in ((sin, learned, "learned above sinusoidal"),
                           (learned, sin, "sinusoidal above learned")):
            one_sided.append(power_gate(a["final_accuracy"], b["final_accuracy"], NEAR_EQUAL,
                                        f"{task}: {what}, accuracy", remedy))
    return power.combined(one_sided)


def _warmup_gain(rows: pd.DataFrame, norm: str) -> list[tuple[int, object, dict]]:
    """(depth, final loss without minus with warm-up over seeds, the two arms) for one norm
    placement."""
    out = []
    for depth, g in rows[rows["norm"] == norm].groupby("n_layers"):
        cold, warm = g[g["warmup"] == 0], g[g["warmup"] > 0]
        if len(cold) and len(warm):
            arms = {f"depth {int(depth)} no warm-up": cold,
                    f"depth {int(depth)} warm-up": warm}
            out.append((int(depth), power.versus(warm, cold, "final_loss"), arms))
    if not out:
        raise Missing(SUITE, f"norm-warmup lacks {norm}-LN runs with and without warm-up")
    return out


def _warmup_text(gains: list) -> str:
    return "; ".join(f"depth {d}: final loss without minus with warm-up {g.text()} "
                     f"({_learned(arms)})" for d, g, arms in gains)


def _learned(arms: dict[str, pd.DataFrame]) -> str:
    """How many seeds of each arm learned more than character frequencies: final loss below
    the unigram model's (nats), when the rows record it."""
    parts = []
    for name, g in arms.items():
        if "unigram_bits_per_char" in g and g["unigram_bits_per_char"].notna().all():
            level = g["unigram_bits_per_char"].astype(float) * np.log(2)
            parts.append(f"{name}: {int((g['final_loss'] < level).sum())} of {len(g)} seeds "
                         "below the unigram model")
    return "; ".join(parts) or "no unigram baseline stored: learning not checked"


def _warmup_gates(gains: list) -> tuple:
    """Seeds, the unigram model and the loss's range per depth; the tests' agreement."""
    gates = []
    for _, _, arms in gains:
        gates += [power.seeds(arms, SUITE), power.unigram(arms, "final_loss", need="best"),
                  power.loss_range(arms, "final_loss", SUITE)]
    return (*power.one_per_name(gates), power.agree([g for _, g, _ in gains]))


def post_ln_warmup(stored: Stored) -> Evidence:
    rows = study_rows(stored, "norm-warmup")
    gains = _warmup_gain(rows, "post")
    helps = [g.diff > WARMUP_GAIN and g.separated for _, g, _ in gains]
    verdict = CONTRADICTS if not any(helps) and all(g.separated or g.diff <= 0
                                                    for _, g, _ in gains) else \
        SUPPORTS if all(helps) else QUALIFIED
    return Evidence(
        "norm-warmup: Post-LN on the character corpus with and without a linear warm-up",
        _warmup_text(gains), verdict,
        f"supports if warm-up lowers Post-LN's final loss by more than {WARMUP_GAIN} nats at "
        "every depth, separated by both exact tests over seeds; contradicts if at no depth "
        "and no difference is left unresolved; else qualified (only at some depths, or not "
        "separated). Gates: 5 seeds per arm, the better arm below the unigram model, the "
        "loss off its ceiling (0) and floor (the unigram model), tests agree",
        training_scale(rows[rows["norm"] == "post"]), _warmup_gates(gains),
        tuple(t for _, g, _ in gains for t in g.tests), scale_facts(rows[rows["norm"] == "post"]),
        scope=trained_scope(rows[rows["norm"] == "post"], "character corpus"))


def pre_ln_no_warmup(stored: Stored) -> Evidence:
    rows = study_rows(stored, "norm-warmup")
    gains = _warmup_gain(rows, "pre")
    needless = [g.diff <= WARMUP_GAIN for _, g, _ in gains]
    needed = [g.diff > WARMUP_GAIN and g.separated for _, g, _ in gains]
    verdict = (CONTRADICTS if all(needed) else
               SUPPORTS if all(needless) else QUALIFIED)
    bound = ()
    if verdict == SUPPORTS:  # "needs no warm-up" is a no-effect conclusion: bound the gain
        bound = (power.combined([
            power_gate(arms[f"depth {d} warm-up"]["final_loss"],
                       arms[f"depth {d} no warm-up"]["final_loss"], WARMUP_GAIN,
                       f"depth {d}: warm-up's gain in final loss (nats)",
                       f"more seeds per arm in `tvr run {SUITE}`") for d, _, arms in gains]),)
    return Evidence(
        "norm-warmup: Pre-LN on the character corpus with and without a linear warm-up",
        _warmup_text(gains), verdict,
        f"supports if warm-up lowers Pre-LN's final loss by at most {WARMUP_GAIN} nats at "
        "every depth; contradicts if it lowers it by more, separated by both exact tests "
        "over seeds, at every depth; else qualified. Gates: 5 seeds per arm, the better arm "
        "below the unigram model, the loss off its ceiling (0) and floor (the unigram "
        "model), the tests agree; for supports, power: warm-up's gain bounded under "
        f"{WARMUP_GAIN} nats at every depth by its one-sided 95% upper bound (Welch t, the "
        "upper test of TOST at p < 0.05)", training_scale(rows[rows["norm"] == "pre"]),
        (*_warmup_gates(gains), *bound), tuple(t for _, g, _ in gains for t in g.tests),
        scale_facts(rows[rows["norm"] == "pre"]),
        scope=trained_scope(rows[rows["norm"] == "pre"], "character corpus"))


CLAIMS = [
    Claim("equivariance", "Self-attention without positions is permutation-equivariant",
          "identities", "", equivariance, kind=IDENTITY_KIND),
    Claim("order", "Token order must therefore be injected by positional encodings", SUITE,
          f"{SUITE}/positional.png", order_needs_positions, kind=TRAINED_QUALITY),
    Claim("pe-linear", "PE[pos+k] is a linear function of PE[pos]", "identities", "",
          pe_linear, kind=IDENTITY_KIND),
    Claim("extrapolation", "Sinusoidal encodings let the model extrapolate to unseen lengths",
          SUITE, f"{SUITE}/positional.png", extrapolation, kind=TRAINED_QUALITY),
    Claim("table3-positions", "Table 3 (E), synthetic tasks: learned positional embeddings "
          "give nearly identical results to sinusoids", SUITE, f"{SUITE}/positional.png",
          learned_vs_sinusoidal, kind=TRAINED_QUALITY),
    Claim("post-ln-warmup", "Post-LN needs learning-rate warm-up", SUITE,
          f"{SUITE}/norm-warmup.png", post_ln_warmup, kind=TRAINED_QUALITY),
    Claim("pre-ln", "Pre-LN trains stably without warm-up", SUITE, f"{SUITE}/norm-warmup.png",
          pre_ln_no_warmup, kind=TRAINED_QUALITY),
]
