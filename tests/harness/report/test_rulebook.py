"""The rulebook: every claim declares a kind, a kind's gates are applied to every verdict of
it, each label names its scope, and docs/rulebook.md shows the table the code holds."""

from __future__ import annotations

from pathlib import Path

from harness.report import rulebook
from harness.report.claims import all_claims
from harness.report.evidence import Evidence, gated
from harness.report.gates import Gate
from harness.report.verdicts import CONTRADICTS, IDENTITY, INCONCLUSIVE, SUPPORTS

ROOT = Path(__file__).resolve().parents[3]


def test_every_claim_declares_a_kind_the_rulebook_knows():
    kinds = {c.key: c.kind for c in all_claims()}
    assert all(k in rulebook.KINDS for k in kinds.values()), kinds
    assert {"trained quality", "trained cost", "timing"} <= set(kinds.values())


def test_a_verdict_that_skips_a_gate_of_its_kind_is_inconclusive_naming_it():
    e = Evidence("p", "m", SUPPORTS, "r", gates=(Gate("seeds", True, "5 seeds"),))
    out = gated(e, rulebook.gates_of(rulebook.TRAINED_QUALITY))
    assert out.verdict == INCONCLUSIVE and out.ungated == SUPPORTS
    skipped = [g.name for g in out.gates if not g.passed]
    assert skipped == ["baselines", "range", "tests agree"]
    assert all("not applied" in g.detail for g in out.gates if not g.passed)


def test_a_verdict_that_passes_every_gate_of_its_kind_stands():
    gates = tuple(Gate(n, True, "ok") for n in rulebook.gates_of(rulebook.TRAINED_COST))
    e = Evidence("p", "m", CONTRADICTS, "r", gates=gates)
    assert gated(e, rulebook.gates_of(rulebook.TRAINED_COST)).verdict == CONTRADICTS
    counted = Evidence("p", "m", SUPPORTS, "r")  # a count has no gates to pass
    assert gated(counted, rulebook.gates_of(rulebook.COUNT)).verdict == SUPPORTS


def test_labels_name_the_scope_of_judged_empirical_verdicts_only():
    scope = "1.4M parameters, 28k training pairs, CPU"
    assert rulebook.label(CONTRADICTS, scope) == f"contradicts at {scope}"
    assert rulebook.label(INCONCLUSIVE, scope) == f"inconclusive at this scale ({scope})"
    assert rulebook.label(SUPPORTS, scope, IDENTITY) == SUPPORTS
    assert rulebook.label("not measured: run `tvr run x`", scope).startswith("not measured")
    facts = {"params": "54600..170000", "steps": "150", "seeds": 5, "device": "cpu (EPYC)"}
    assert rulebook.scope_of(facts) == "54.6k-170k parameters, 150 steps, 5 seeds, CPU (EPYC)"
    alike = facts | {"params": "103900..104200", "seeds": "1..2"}  # ends that read alike
    assert rulebook.scope_of(alike) == "104k parameters, 150 steps, 1-2 seeds, CPU (EPYC)"


def test_docs_rulebook_shows_the_table_the_code_holds():
    text = (ROOT / "docs" / "rulebook.md").read_text()
    begin, end = "<!-- begin generated: rulebook -->\n", "<!-- end generated: rulebook -->"
    assert text.split(begin)[1].split(end)[0] == rulebook.table()
