"""The power gates (harness.report.gates) applied to training rows: arms of a comparison as
groups of rows, one per configuration, each row one seed.

Synthetic tasks are judged against chance (1 / alphabet size: the answer a model that learned
nothing gives); steps to a target against the budget (never reached: the ceiling) and the
first evaluation (reached at once: the floor); language models against the unigram model of
their corpus (a `unigram_bits_per_char` column; a suite that does not store it fails the gate
and says so).

Timing rows (layer and thread timings) go through the timing gates: which column a verdict
read (forward + backward, or forward only where the rows time nothing else), each row's
spread (IQR over median) and its busy flag, labelled row by row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.report.gates import (
    CHEAP_SEEDS,
    FWDBWD,
    Comparison,
    Gate,
    agree_gate,
    baseline_gate,
    compare,
    fwdbwd_gate,
    idle_gate,
    power_gate,
    range_gate,
    seeds_gate,
    spread_gate,
)

CHANCE = "chance"
UNIGRAM = "unigram model"


def seeds(groups: dict[str, pd.DataFrame], suite: str, minimum: int = CHEAP_SEEDS,
          exact: bool = True) -> Gate:
    """At least `minimum` seeds per arm (default: 5, a point of a small study costs seconds);
    exact=False where no exact test over seeds decides the verdict (a probe read against
    thresholds, a regression over seed-points)."""
    return seeds_gate({a: int(g["seed"].nunique()) for a, g in groups.items()},
                      f"run {minimum} or more seeds per arm (`tvr run {suite}`)", minimum,
                      exact)


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


def combined(gates: list[Gate]) -> Gate:
    """Gates of one name (one per comparison) as one: passed where all passed; its detail
    every failed one's (else every one's), its remedy the first failed one's."""
    bad = [g for g in gates if not g.passed]
    shown = bad or gates
    return Gate(gates[0].name, not bad, " | ".join(g.detail for g in shown),
                bad[0].remedy if bad else "")


def one_per_name(gates: list[Gate]) -> tuple[Gate, ...]:
    """One gate per name: the first that failed, else the first."""
    out: dict[str, Gate] = {}
    for g in gates:
        if g.name not in out or (out[g.name].passed and not g.passed):
            out[g.name] = g
    return tuple(out.values())


def loss_range(groups: dict[str, pd.DataFrame], column: str, suite: str,
               remedy: str = "") -> Gate:
    """A loss (bits/char, or nats for `final_loss`) off its ceiling, 0, and its floor, the
    unigram model's loss (a model there learned character frequencies only). A suite that
    does not store the unigram model's loss has no floor: the gate fails and says so."""
    arms = {a: float(g[column].mean()) for a, g in groups.items()}
    first = next(iter(groups.values()))
    floor = float("nan")
    if "unigram_bits_per_char" in first and first["unigram_bits_per_char"].notna().any():
        floor = float(first["unigram_bits_per_char"].iloc[0])
        floor = floor * np.log(2) if column == "final_loss" else floor
    return range_gate(arms, column, 0.0, floor, remedy or
                      "more training (at the unigram model's loss), or rows that record "
                      f"their corpus's unigram bits/char, in `tvr run {suite}`",
                      higher_better=False)


def knee(before: pd.DataFrame, after: pd.DataFrame, column: str, bound: float, effect: str,
         suite: str, seeds_now: int, concludes_none: bool = True) -> Gate:
    """The power gate (gates.power_gate) of a knee read from rows: the gain from `before` to
    `after` on a loss `column` (lower is better: the gain is before minus after) bounded
    under `bound` where the verdict says it is small, or detected where it says it is not."""
    return power_gate(-before[column].to_numpy(float), -after[column].to_numpy(float), bound,
                      effect, f"more seeds per arm than {seeds_now} in `tvr run {suite}` "
                      "(the bound narrows as 1/sqrt(seeds))", concludes_none)


# ---------------------------------------------------------------- timing rows

def timing_column(rows: pd.DataFrame) -> str:
    """FWDBWD where every row times forward + backward, else fwd_ms (the forward-only rows of
    an older run: the forward-and-backward gate then fails and says so)."""
    if FWDBWD in rows and pd.to_numeric(rows[FWDBWD], errors="coerce").notna().all():
        return FWDBWD
    return "fwd_ms"


def layer_label(row: pd.Series) -> str:
    """"lstm n=1024 d=128, 2 threads, bfloat16": a timed row, by what sets it apart."""
    name = str(row.get("mixer", "?"))
    form = next((str(row[k]) for k in ("scan", "rnn_impl")
                 if k in row and pd.notna(row[k]) and str(row[k])), "")
    parts = [f"{name} ({form})" if form else name]
    if "seq_len" in row and pd.notna(row["seq_len"]):
        size = f"n={int(row['seq_len'])}"
        if "d_model" in row and pd.notna(row["d_model"]):
            size += f" d={int(row['d_model'])}"
        parts.append(size)
    if "threads_used" in row and pd.notna(row["threads_used"]):
        t = int(row["threads_used"])
        parts.append(f"{t} thread{'' if t == 1 else 's'}")
    if "dtype" in row and str(row["dtype"]) not in ("float32", "nan"):
        parts.append(str(row["dtype"]))
    return " ".join(parts[:2]) + "".join(f", {p}" for p in parts[2:])


def _labelled(rows: pd.DataFrame, label) -> list[tuple[str, pd.Series]]:
    """(label, row) per row, a label met twice numbered ("... #2")."""
    seen: dict[str, int] = {}
    out = []
    for _, r in rows.iterrows():
        name = label(r)
        seen[name] = seen.get(name, 0) + 1
        out.append((name if seen[name] == 1 else f"{name} #{seen[name]}", r))
    return out


def spreads(rows: pd.DataFrame, column: str, label=layer_label) -> dict[str, float]:
    """Each row's IQR over its median for the timing `column` (NaN where not recorded)."""
    iqr = column.replace("_ms", "_iqr_ms")
    out = {}
    for name, r in _labelled(rows, label):
        width = pd.to_numeric(r.get(iqr), errors="coerce")
        median = pd.to_numeric(r.get(column), errors="coerce")
        out[name] = float(width / median) if pd.notna(width) and median else float("nan")
    return out


def spread(rows: pd.DataFrame, column: str, difference: float, what: str, suite: str,
           label=layer_label) -> Gate:
    """gates.spread_gate over the rows' timings of `column`."""
    return spread_gate(spreads(rows, column, label), difference, what,
                       f"time the rows again on a quieter machine, or with more timed calls "
                       f"per point, until every IQR is within the bound (`tvr run {suite}`)")


def idle(rows: pd.DataFrame, suite: str, label=layer_label) -> Gate:
    """gates.idle_gate over the rows' `busy` flags (a suite without the column: every row
    unflagged, so the gate fails and names them)."""
    labelled = _labelled(rows, label)
    busy = {name: r.get("busy") for name, r in labelled}
    load = {name: float(pd.to_numeric(r.get("load_avg"), errors="coerce"))
            for name, r in labelled}
    return idle_gate(busy, {k: v for k, v in load.items() if np.isfinite(v)},
                     "time the rows on an idle machine, with the harness recording each "
                     f"row's load and busy flag (`tvr run {suite}`)")


def forward_backward(read: dict[str, str], suite: str) -> Gate:
    """gates.fwdbwd_gate over what the rule read, the remedy naming the suite."""
    return fwdbwd_gate(read, f"rows that time forward + backward ({FWDBWD}, "
                             f"`tvr run {suite}` with the current harness)")


def timing(rows: pd.DataFrame, column: str, read: str, difference: float, what: str,
           suite: str, label=layer_label) -> tuple[Gate, Gate, Gate]:
    """The three timing gates of rows whose `read` (what the rule reads) comes from one timing
    `column`: forward and backward, spread against `difference` (`what` it is), idle."""
    return (forward_backward({read: column}, suite),
            spread(rows, column, difference, what, suite, label), idle(rows, suite, label))
