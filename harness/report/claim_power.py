"""The power gates (harness.report.gates) applied to training rows: arms of a comparison as
groups of rows, one per configuration, each row one seed.

Synthetic tasks are judged against chance (1 / alphabet size: the answer a model that learned
nothing gives); steps to a target against the budget (never reached: the ceiling) and the
first evaluation (reached at once: the floor); language models against the unigram model of
their corpus (a `unigram_bits_per_char` column; a suite that does not store it fails the gate
and says so).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.report.gates import (
    CHEAP_SEEDS,
    Comparison,
    Gate,
    agree_gate,
    baseline_gate,
    compare,
    range_gate,
    seeds_gate,
)

CHANCE = "chance"
UNIGRAM = "unigram model"


def seeds(groups: dict[str, pd.DataFrame], suite: str, minimum: int = CHEAP_SEEDS) -> Gate:
    """At least `minimum` seeds per arm (default: 5, a point of a small study costs seconds)."""
    return seeds_gate({a: int(g["seed"].nunique()) for a, g in groups.items()},
                      f"run {minimum} or more seeds per arm (`tvr run {suite}`)", minimum)


def chance(groups: dict[str, pd.DataFrame], column: str = "final_accuracy",
           need: str = "all") -> Gate:
    """Each arm's mean accuracy above chance, 1 / alphabet size (CHEAP: read from the rows)."""
    arms = {a: float(g[column].mean()) for a, g in groups.items()}
    first = next(iter(groups.values()))
    level = 1 / float(first["alphabet_size"].iloc[0]) if "alphabet_size" in first else None
    return baseline_gate(arms, {CHANCE: level}, column,
                         "more training steps or a smaller task, until every arm learns",
                         need=need)


def unigram(groups: dict[str, pd.DataFrame], column: str, need: str = "all") -> Gate:
    """Each arm's loss below the unigram model's (bits/char; nats for `final_loss`)."""
    arms = {a: float(g[column].mean()) for a, g in groups.items()}
    first = next(iter(groups.values()))
    level = None
    if "unigram_bits_per_char" in first and first["unigram_bits_per_char"].notna().any():
        level = float(first["unigram_bits_per_char"].iloc[0])
        level = level * np.log(2) if column == "final_loss" else level
    return baseline_gate(arms, {UNIGRAM: level}, column,
                         "the suite's rows to record their corpus's unigram bits/char",
                         higher_better=False, need=need)


def steps_range(groups: dict[str, pd.DataFrame], suite: str) -> Gate:
    """Steps to target can tell the arms apart: fewer than two arms with every seed censored
    at its budget (the ceiling) and fewer than two with every seed at the first evaluation
    (the floor); one arm there against others off it is a difference the steps measure."""
    censored = {a: float(g["steps_to_target"].isna().mean()) for a, g in groups.items()}
    at_first = {a: bool((g["steps_to_target"] <= g["eval_every"]).all())
                if "eval_every" in g else False for a, g in groups.items()}
    at_ceiling = [a for a, c in censored.items() if c == 1]
    at_floor = [a for a, f in at_first.items() if f]
    detail = "share of seeds that never reached the target: " + ", ".join(
        f"{a} {c:.0%}" for a, c in censored.items())
    if len(at_ceiling) > 1:
        detail += f"; never reached (ceiling): {', '.join(at_ceiling)}"
    if len(at_floor) > 1:
        detail += f"; reached at the first evaluation (floor): {', '.join(at_floor)}"
    return Gate("range", len(at_ceiling) < 2 and len(at_floor) < 2, detail,
                f"more steps (ceiling) or a harder task (floor) in `tvr run {suite}`")


def accuracy_range(groups: dict[str, pd.DataFrame], column: str, suite: str,
                   remedy: str = "") -> Gate:
    """Accuracy off its ceiling and floor. A claim about quality stays on quality: at the
    ceiling the remedy is a harder task, never a switch to steps to target."""
    arms = {a: float(g[column].mean()) for a, g in groups.items()}
    first = next(iter(groups.values()))
    floor = 1 / float(first["alphabet_size"].iloc[0]) if "alphabet_size" in first else 0.0
    return range_gate(arms, column, 1.0, floor, remedy or
                      "a harder task (at the ceiling) or more training (at the floor) in "
                      f"`tvr run {suite}`")


def versus(a: pd.DataFrame, b: pd.DataFrame, column: str, label: str = "") -> Comparison:
    """b against a on `column`, over independent seeds, two exact permutation tests."""
    return compare(a[column].to_numpy(float), b[column].to_numpy(float),
                   label or f"{column}, {_differ(a, b)}")


def _differ(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """"k=b vs k=a" for the configuration columns on which the two arms differ."""
    keys = ("model", "task", "k", "n_heads", "d_ff", "pos_encoding", "attn_scale", "norm",
            "n_layers", "warmup", "d_model")
    diff = [k for k in keys if k in a and k in b and a[k].nunique() == 1 and b[k].nunique() == 1
            and str(a[k].iloc[0]) != str(b[k].iloc[0])]
    return (", ".join(f"{k}={b[k].iloc[0]}" for k in diff) + " vs " +
            ", ".join(f"{k}={a[k].iloc[0]}" for k in diff)) if diff else "b vs a"


def agree(comparisons: list[Comparison]) -> Gate:
    """The two tests of every comparison agree (reported as one gate, the worst case)."""
    gates = [agree_gate(c.tests) for c in comparisons]
    bad = [g for g in gates if not g.passed]
    return bad[0] if bad else (gates[0] if gates else agree_gate([]))


def one_per_name(gates: list[Gate]) -> tuple[Gate, ...]:
    """One gate per name: the first that failed, else the first."""
    out: dict[str, Gate] = {}
    for g in gates:
        if g.name not in out or (out[g.name].passed and not g.passed):
            out[g.name] = g
    return tuple(out.values())
