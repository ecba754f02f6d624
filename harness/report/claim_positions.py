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
    training_scale,
)
from harness.report.evidence import Claim, Evidence, Missing, Stored, scale_facts
from harness.report.gates import Gate
from harness.report.stats import censored_text, spread
from harness.report.verdicts import CONTRADICTS, IDENTITY, QUALIFIED, SUPPORTS

MIN_TASKS = 2  # extrapolation from one task is an anecdote
CHANCE_MARGIN = 2.0  # "above chance": accuracy more than twice 1/alphabet


def _by_encoding(stored: Stored) -> dict[tuple[str, str], pd.DataFrame]:
    rows = capped_steps(study_rows(stored, "positional"))
    return {(str(t), str(pe)): g for (t, pe), g in rows.groupby(["task", "pos_encoding"])}


def _tests(comps: list) -> tuple:
    return tuple(t for c in comps for t in c.tests)


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
        scale_facts(rows))



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
        gates += [power.seeds(arms, SUITE), power.chance(arms, "accuracy_2n", need="best")]
        parts.append(", ".join(line))
    verdict = SUPPORTS if holds else QUALIFIED if beats else CONTRADICTS
    rows = pd.concat(groups.values())
    tasks = sorted({t for t, _ in groups})
    breadth = Gate("breadth", len(tasks) >= MIN_TASKS,
                   f"{len(tasks)} task{'s' if len(tasks) > 1 else ''} ({', '.join(tasks)}), "
                   f"one length pair n -> 2n, up to {int(rows['steps'].max())} steps; need "
                   f">= {MIN_TASKS} tasks", f"more tasks and lengths in `tvr run {SUITE}`")
    return Evidence(
        "positional: trained at n, evaluated at 2n (lengths never seen in training)",
        "; ".join(parts), verdict,
        f"supports if sinusoidal accuracy at 2n is at least {EXTRAPOLATES:.0%} of its accuracy "
        "at n; qualified if it is lower but beats learned and no encoding, separated by both "
        "exact tests over seeds; else contradicts. Gates: 5 seeds, the best arm above chance "
        f"at 2n, tests agree, at least {MIN_TASKS} tasks",
        training_scale(rows), (*power.one_per_name(gates), power.agree(comps), breadth),
        _tests(comps), scale_facts(rows))


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
        gates += [power.seeds(arms, SUITE), power.chance(arms)]
        parts.append(f"{task}: accuracy sinusoidal {spread(sin['final_accuracy'])}, learned "
                     f"{spread(learned['final_accuracy'])}; learned minus sinusoidal "
                     f"{diff.text()}. Secondary, steps to 99%: sinusoidal "
                     f"{censored_text(sin['steps_to_target'], sin['steps'])}, learned "
                     f"{censored_text(learned['steps_to_target'], learned['steps'])}")
    verdict = SUPPORTS if close else CONTRADICTS if apart else QUALIFIED
    rows = pd.concat(groups.values())
    tested = () if verdict == SUPPORTS else (power.agree(comps),)  # a margin needs no test
    return Evidence(
        "positional: learned vs sinusoidal encodings on synthetic tasks, final held-out "
        "accuracy (supplementary to the translation rows of Table 3 (E)); steps to 99% as a "
        "secondary measurement", "; ".join(parts), verdict,
        f"quality, as the claim is worded: supports if final accuracies differ by at most "
        f"{NEAR_EQUAL:.0%} (absolute) on every task, at the ceiling too (equal quality is "
        "what the claim says; the margin needs no test); contradicts if they differ by more "
        "and both exact tests over seeds separate them; else qualified. Steps to 99% are "
        "shown, never judged. Gates: 5 seeds, both above chance; the tests agree where a "
        "verdict rests on them",
        training_scale(rows), (*power.one_per_name(gates), *tested), _tests(comps),
        scale_facts(rows))


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


def _warmup_gates(gains: list, tested: bool = True) -> tuple:
    """Seeds and the unigram model per depth; the tests' agreement only where the verdict
    rests on a test (`tested`)."""
    gates = []
    for _, _, arms in gains:
        gates += [power.seeds(arms, SUITE), power.unigram(arms, "final_loss", need="best")]
    agree = (power.agree([g for _, g, _ in gains]),) if tested else ()
    return (*power.one_per_name(gates), *agree)


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
        "separated). Gates: 5 seeds per arm, the better arm below the unigram model, tests "
        "agree", training_scale(rows[rows["norm"] == "post"]), _warmup_gates(gains),
        tuple(t for _, g, _ in gains for t in g.tests), scale_facts(rows[rows["norm"] == "post"]))


def pre_ln_no_warmup(stored: Stored) -> Evidence:
    rows = study_rows(stored, "norm-warmup")
    gains = _warmup_gain(rows, "pre")
    needless = [g.diff <= WARMUP_GAIN for _, g, _ in gains]
    needed = [g.diff > WARMUP_GAIN and g.separated for _, g, _ in gains]
    verdict = (CONTRADICTS if all(needed) else
               SUPPORTS if all(needless) else QUALIFIED)
    return Evidence(
        "norm-warmup: Pre-LN on the character corpus with and without a linear warm-up",
        _warmup_text(gains), verdict,
        f"supports if warm-up lowers Pre-LN's final loss by at most {WARMUP_GAIN} nats at "
        "every depth (a margin: no test needed); contradicts if it lowers it by more, "
        "separated by both exact tests over seeds, at every depth; else qualified. Gates: 5 "
        "seeds per arm, the better arm below the unigram model; the tests agree where the "
        "verdict rests on them (not for supports)", training_scale(rows[rows["norm"] == "pre"]),
        _warmup_gates(gains, tested=verdict != SUPPORTS),
        tuple(t for _, g, _ in gains for t in g.tests),
        scale_facts(rows[rows["norm"] == "pre"]))


CLAIMS = [
    Claim("equivariance", "Self-attention without positions is permutation-equivariant",
          "identities", "", equivariance),
    Claim("order", "Token order must therefore be injected by positional encodings", SUITE,
          f"{SUITE}/positional.png", order_needs_positions),
    Claim("pe-linear", "PE[pos+k] is a linear function of PE[pos]", "identities", "",
          pe_linear),
    Claim("extrapolation", "Sinusoidal encodings let the model extrapolate to unseen lengths",
          SUITE, f"{SUITE}/positional.png", extrapolation),
    Claim("table3-positions", "Table 3 (E), synthetic tasks: learned positional embeddings "
          "give nearly identical results to sinusoids", SUITE, f"{SUITE}/positional.png",
          learned_vs_sinusoidal),
    Claim("post-ln-warmup", "Post-LN needs learning-rate warm-up", SUITE,
          f"{SUITE}/norm-warmup.png", post_ln_warmup),
    Claim("pre-ln", "Pre-LN trains stably without warm-up", SUITE, f"{SUITE}/norm-warmup.png",
          pre_ln_no_warmup),
]
