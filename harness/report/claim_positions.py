"""Claims about positions and LayerNorm placement, judged from the `positional` and
`norm-warmup` studies of suite `convergence-quick`."""

from __future__ import annotations

import pandas as pd

from harness.report.claim_training import (
    EXTRAPOLATES,
    NEAR_EQUAL,
    SUITE,
    WARMUP_GAIN,
    capped_steps,
    study_rows,
    training_scale,
)
from harness.report.claims import (
    CONTRADICTS,
    QUALIFIED,
    SUPPORTS,
    Claim,
    Evidence,
    Missing,
    Stored,
)
from harness.report.stats import censored_text, paired, spread

CHANCE_MARGIN = 2.0  # "above chance": accuracy more than twice 1/alphabet


def _by_encoding(stored: Stored) -> dict[tuple[str, str], pd.DataFrame]:
    rows = capped_steps(study_rows(stored, "positional"))
    return {(str(t), str(pe)): g for (t, pe), g in rows.groupby(["task", "pos_encoding"])}


def order_needs_positions(stored: Stored) -> Evidence:
    groups = _by_encoding(stored)
    tasks = sorted({t for t, _ in groups})
    parts, needed, above_chance = [], True, False
    for task in tasks:
        none, sin = groups.get((task, "none")), groups.get((task, "sinusoidal"))
        if none is None or sin is None:
            raise Missing(SUITE, f"positional study lacks none/sinusoidal rows for {task}")
        gap = paired(none, sin, "final_accuracy")  # sinusoidal minus none
        needed &= gap.mean > 0 and not gap.inside_noise
        chance = 1 / float(none["alphabet_size"].iloc[0]) if "alphabet_size" in none else 0
        above_chance |= bool(none["final_accuracy"].mean() > CHANCE_MARGIN * chance)
        parts.append(f"{task}: no encoding {spread(none['final_accuracy'])}, sinusoidal "
                     f"{spread(sin['final_accuracy'])}; sinusoidal minus none {gap.text()}")
    verdict = CONTRADICTS if not needed else QUALIFIED if above_chance else SUPPORTS
    rows = pd.concat(groups.values())
    return Evidence(
        "positional: order-dependent tasks with and without a positional encoding (a causal "
        "decoder-only model)", "; ".join(parts), verdict,
        "contradicts unless sinusoidal positions beat none outside the noise on every task; "
        f"qualified if the model without positions still scores above {CHANCE_MARGIN:g}x "
        "chance (a causal mask leaks order, so a causal model is not permutation-equivariant)",
        training_scale(rows))


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
        "attention's is larger; qualified without a failing control", _identity_scale(rows))


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
        f"{BROKEN:g}, else qualified", _identity_scale(rows))


def _identity_scale(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    return (f"n = {int(first['seq_len'])}, d = {int(first['d_model'])}, "
            f"{rows['seed'].nunique()} seeds, machine {first.get('machine', '?')}")


def extrapolation(stored: Stored) -> Evidence:
    groups = _by_encoding(stored)
    parts, beats, holds = [], True, True
    for task in sorted({t for t, _ in groups}):
        sin = groups[(task, "sinusoidal")]
        holds &= bool(sin["accuracy_2n"].mean() >= EXTRAPOLATES * sin["final_accuracy"].mean())
        line = [f"{task} at 2n: sinusoidal {spread(sin['accuracy_2n'])}"]
        for other in ("learned", "none"):
            if (task, other) in groups:
                g = groups[(task, other)]
                diff = paired(g, sin, "accuracy_2n")  # sinusoidal minus other
                beats &= diff.mean > 0 and not diff.inside_noise
                line.append(f"{other} {spread(g['accuracy_2n'])} (sinusoidal minus {other} "
                            f"{diff.text()})")
        parts.append(", ".join(line))
    verdict = SUPPORTS if holds else QUALIFIED if beats else CONTRADICTS
    return Evidence(
        "positional: trained at n, evaluated at 2n (lengths never seen in training)",
        "; ".join(parts), verdict,
        f"supports if sinusoidal accuracy at 2n is at least {EXTRAPOLATES:.0%} of its accuracy "
        "at n; qualified if it is lower but beats learned and no encoding outside the noise; "
        "else contradicts", training_scale(pd.concat(groups.values())))


def learned_vs_sinusoidal(stored: Stored) -> Evidence:
    groups = _by_encoding(stored)
    parts, close, noisy = [], True, False
    for task in sorted({t for t, _ in groups}):
        sin, learned = groups[(task, "sinusoidal")], groups[(task, "learned")]
        diff = paired(sin, learned, "final_accuracy")  # learned minus sinusoidal
        close &= abs(diff.mean) <= NEAR_EQUAL
        noisy |= diff.inside_noise
        parts.append(f"{task}: accuracy sinusoidal {spread(sin['final_accuracy'])}, learned "
                     f"{spread(learned['final_accuracy'])} (learned minus sinusoidal "
                     f"{diff.text()}); steps to 99% sinusoidal "
                     f"{censored_text(sin['steps_to_target'], sin['steps'])}, learned "
                     f"{censored_text(learned['steps_to_target'], learned['steps'])}")
    verdict = SUPPORTS if close else QUALIFIED if noisy else CONTRADICTS
    return Evidence(
        "positional: learned vs sinusoidal encodings (the paper's Table 3, row E)",
        "; ".join(parts), verdict,
        f"supports if final accuracies differ by at most {NEAR_EQUAL:.0%} (absolute) on every "
        "task; qualified if more but inside the noise; else contradicts",
        training_scale(pd.concat(groups.values())))


def _warmup_gain(rows: pd.DataFrame, norm: str) -> list[tuple[int, object]]:
    """(depth, paired final loss without minus with warm-up) for one norm placement."""
    out = []
    for depth, g in rows[rows["norm"] == norm].groupby("n_layers"):
        cold, warm = g[g["warmup"] == 0], g[g["warmup"] > 0]
        if len(cold) and len(warm):
            out.append((int(depth), paired(warm, cold, "final_loss")))
    if not out:
        raise Missing(SUITE, f"norm-warmup lacks {norm}-LN runs with and without warm-up")
    return out


def _warmup_text(gains: list[tuple[int, object]]) -> str:
    return "; ".join(f"depth {d}: loss without minus with warm-up {g.text()}"
                     for d, g in gains)


def post_ln_warmup(stored: Stored) -> Evidence:
    rows = study_rows(stored, "norm-warmup")
    gains = _warmup_gain(rows, "post")
    helps = [g.mean > WARMUP_GAIN for _, g in gains]
    few = min(len(g.diffs) for _, g in gains) < 2
    verdict = (CONTRADICTS if not any(helps) else
               SUPPORTS if all(helps) and not few else QUALIFIED)
    grads = study_rows(stored, "norm-warmup", runner="layer-grads", norm="post")
    ratio = "; ".join(f"depth {int(d)}: {spread(g['grad_norm_last_over_first'])}"
                      for d, g in grads.groupby("n_layers"))
    return Evidence(
        "norm-warmup: Post-LN on the character corpus with and without a linear warm-up; "
        "per-layer gradient norms at init",
        _warmup_text(gains) + f". Post-LN last/first layer gradient norm at init: {ratio}",
        verdict,
        f"supports if warm-up lowers Post-LN's final loss by more than {WARMUP_GAIN} nats at "
        "every depth, over at least 2 seeds; contradicts if at no depth; else qualified "
        "(only at some depths, or one seed: the noise is not measured)",
        training_scale(pd.concat([rows[rows["norm"] == "post"], grads])))


def pre_ln_no_warmup(stored: Stored) -> Evidence:
    rows = study_rows(stored, "norm-warmup")
    gains = _warmup_gain(rows, "pre")
    needless = [g.mean <= WARMUP_GAIN for _, g in gains]
    few = min(len(g.diffs) for _, g in gains) < 2
    verdict = (CONTRADICTS if not any(needless) else
               SUPPORTS if all(needless) and not few else QUALIFIED)
    return Evidence(
        "norm-warmup: Pre-LN on the character corpus with and without a linear warm-up",
        _warmup_text(gains), verdict,
        f"supports if warm-up lowers Pre-LN's final loss by at most {WARMUP_GAIN} nats at "
        "every depth, over at least 2 seeds; contradicts if it helps more at every depth; "
        "else qualified (one seed: the noise is not measured)",
        training_scale(rows[rows["norm"] == "pre"]))


CLAIMS = [
    Claim("equivariance", "Self-attention without positions is permutation-equivariant",
          "identities", "", equivariance),
    Claim("order", "Token order must therefore be injected by positional encodings", SUITE,
          f"{SUITE}/positional.png", order_needs_positions),
    Claim("pe-linear", "PE[pos+k] is a linear function of PE[pos]", "identities", "",
          pe_linear),
    Claim("extrapolation", "Sinusoidal encodings let the model extrapolate to unseen lengths",
          SUITE, f"{SUITE}/positional.png", extrapolation),
    Claim("table3-positions", "Table 3 (E): learned positional embeddings give nearly "
          "identical results to sinusoids", SUITE, f"{SUITE}/positional.png",
          learned_vs_sinusoidal),
    Claim("post-ln-warmup", "Post-LN needs learning-rate warm-up", SUITE,
          f"{SUITE}/norm-warmup.png", post_ln_warmup),
    Claim("pre-ln", "Pre-LN trains stably without warm-up", SUITE, f"{SUITE}/norm-warmup.png",
          pre_ln_no_warmup),
]
