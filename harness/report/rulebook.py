"""The rulebook: every claim of the ledger is of one kind, and every verdict of a kind passes
the same gates (harness.report.gates) before it may take a side.

A claim declares its kind (evidence.Claim.kind); the ledger hands the kind's gates to
evidence.gated, which turns a decisive verdict whose rule skipped one of them into
"inconclusive at this scale", naming the gate. Each verdict's label names the scale it holds
at (parameters, data, budget or steps, device): `label`. docs/rulebook.md is generated from
KINDS (`tvr report`), so the table and the code cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.report.markdown import markdown_table
from harness.report.verdicts import DECISIVE, EMPIRICAL, IDENTITY, INCONCLUSIVE


@dataclass(frozen=True)
class Kind:
    name: str
    gates: tuple[str, ...]  # the gates (Gate.name) a decisive verdict of this kind passes
    supports: str  # what "supports" requires, beyond the gates
    evidence: str = EMPIRICAL  # EMPIRICAL or IDENTITY (counted apart in the ledger's tally)


TRAINED_QUALITY = "trained quality"
TRAINED_COST = "trained cost"
KNEE = "knee or no effect"
TIMING = "timing"
PROBE = "probe"
COUNT = "count"
IDENTITY_KIND = "identity"

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(TRAINED_QUALITY, ("seeds", "baselines", "range", "tests agree"),
         "trained models compared on the metric the claim names, each above its trivial "
         "baselines and off the metric's ceiling and floor, the difference separated by two "
         "tests that agree (p < 0.05), over 3+ seeds; the label names the training budget"),
    Kind(TRAINED_COST, ("seeds", "baselines", "tests agree"),
         "the training cost (FLOPs, seconds) for each model to reach a common target above "
         "the baselines, compared over seeds by two exact tests that agree (p < 0.05); the "
         "label names the target"),
    Kind(KNEE, ("seeds", "baselines", "range", "tests agree", "power"),
         "an effect where the claim puts one and, where it says there is none (a knee, a "
         "plateau, no difference), a test with the power to have seen one: a bound on the "
         "difference, never a missing p-value"),
    Kind(TIMING, ("forward and backward", "spread", "idle machine"),
         "timings of forward and backward passes, each row's spread (interquartile range over "
         "its median) small against the differences the claim reads, measured on a machine "
         "not flagged busy; the label names the device and threads"),
    Kind(PROBE, ("seeds",),
         "a quantity measured on models at initialisation (no training), over 3+ seeds; the "
         "label names the sizes"),
    Kind(COUNT, (),
         "an exact count (operations on the critical path, path lengths, counted FLOPs) of "
         "the code as it runs, against the paper's formula; no seeds, no timing"),
    Kind(IDENTITY_KIND, (),
         "a mathematical identity the paper states, checked on the code to float tolerance",
         evidence=IDENTITY),
)}


# kinds on trained models: the ledger adds the `finished` gate to each (claims.finished_gate:
# no run of a suite read is planned or started without its finished row, ok or diverged),
# from the suites the rule read
WAITS_FOR_RUNS = (TRAINED_QUALITY, TRAINED_COST, KNEE)


def gates_of(kind: str) -> tuple[str, ...]:
    """The gates of claim kind `kind`; KeyError for a kind the rulebook does not know."""
    return KINDS[kind].gates


def label(verdict: str, scope: str, evidence_kind: str = EMPIRICAL) -> str:
    """The verdict as shown: an empirical verdict that was judged names its scope
    ("contradicts at 1.4M parameters, 28k training pairs, ..., CPU"; "inconclusive at this
    scale (...)")."""
    if not scope or evidence_kind != EMPIRICAL:
        return verdict
    if verdict in DECISIVE:
        return f"{verdict} at {scope}"
    return f"{verdict} ({scope})" if verdict == INCONCLUSIVE else verdict


def scope_of(facts: dict, scale: str = "") -> str:
    """A label's scope from a rule's scale facts (evidence.scale_facts), where the rule gives
    none of its own: parameters, steps, seeds and device."""
    parts = []
    if facts.get("params"):
        parts.append(f"{_short(facts['params'])} parameters")
    if facts.get("steps"):
        parts.append(f"{_short(facts['steps'])} steps")
    if facts.get("seeds"):
        n = _short(facts["seeds"])  # "1..2" -> "1-2" where configurations differ
        parts.append(f"{n} seed{'s' if n != '1' else ''}")
    device = str(facts.get("device") or "")
    if device:
        parts.append(device.replace("cpu (", "CPU (").replace("cuda (", "GPU ("))
    return ", ".join(parts) or scale


def _short(span: object) -> str:
    """"1437696" -> "1.4M", "300..1000" -> "300-1k", "103900..104200" -> "104k": a number or
    a lo..hi span, short (a span whose ends read alike is one number)."""
    def one(text: str) -> str:
        try:
            v = float(text)
        except ValueError:
            return text
        for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= div:
                return f"{v / div:.3g}{suffix}"
        return f"{v:.3g}"
    ends = [one(p) for p in str(span).split("..")]
    return ends[0] if len(set(ends)) == 1 else "-".join(ends)  # 104k..104k: one size


def table() -> str:
    """docs/rulebook.md's block: one row per kind, its gates and what "supports" requires."""
    return markdown_table(pd.DataFrame(
        [{"claim kind": k.name, "gates every claim of the kind passes": ", ".join(
            k.gates + (("finished",) if k.name in WAITS_FOR_RUNS else ())) or "none",
          "what \"supports\" requires": k.supports} for k in KINDS.values()])) + "\n"
