"""Every rule applies its kind's gates itself (harness.report.rulebook): on the committed
results, each claim's evidence as its rule returns it, before the ledger's `gated`, carries
every gate its kind requires whenever its verdict takes a side, so no verdict rests on the
"not applied by this claim's rule" fallback; and the claims whose gates were missing carry
the ones they lacked."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import claim_depth, claim_later, claim_positions, claim_table3, claim_training
from harness.report.claims import all_claims
from harness.report.evidence import Evidence, Missing, Stored, gated
from harness.report.rulebook import KNEE, TIMING, TRAINED_QUALITY, gates_of
from harness.report.verdicts import DECISIVE, INCONCLUSIVE, SUPPORTS
from tests.harness.report.claim_frames import write_suite
from tests.harness.report.test_rematch import (
    RECURRENT_LOW,
    fwdbwd_rows,
    mqar_rows,
    seq_ops_rows,
)

COMMITTED = Path(__file__).resolve().parents[3] / "results"
FALLBACK = "not applied by this claim's rule"


@pytest.fixture(scope="module")
def raw() -> dict[str, tuple[object, Evidence | None]]:
    """Each claim and its rule's evidence on the committed results (None: not measured)."""
    stored = Stored(COMMITTED)
    out = {}
    for claim in all_claims():
        try:
            out[claim.key] = (claim, claim.judge(stored))
        except Missing:
            out[claim.key] = (claim, None)
    return out


@pytest.mark.slow
def test_every_decisive_verdict_carries_every_gate_of_its_kind(raw):
    lacking = {}
    for key, (claim, evidence) in raw.items():
        if evidence is None or evidence.verdict not in DECISIVE:
            continue
        names = {g.name for g in evidence.gates}
        missing = [g for g in gates_of(claim.kind) if g not in names]
        if missing:
            lacking[key] = (claim.kind, missing)
    assert not lacking, f"rules that skip a gate of their kind: {lacking}"
    decisive = [k for k, (_, e) in raw.items() if e is not None and e.verdict in DECISIVE]
    assert len(decisive) >= 20  # the check ran over the ledger, not over nothing


@pytest.mark.slow
def test_no_ledger_verdict_names_the_fallback(raw):
    for key, (claim, evidence) in raw.items():
        if evidence is None:
            continue
        shown = gated(evidence, gates_of(claim.kind))
        assert not [g for g in shown.gates if g.detail == FALLBACK], key


def _gates(raw, key: str) -> dict:
    return {g.name: g for g in raw[key][1].gates}


@pytest.mark.slow
def test_table3_positions_at_the_ceiling_fails_the_range_gate(raw):
    """0.998 against 0.995: "nearly identical" by the margin, but both at the ceiling."""
    claim, evidence = raw["table3-positions"]
    gate = _gates(raw, "table3-positions")["range"]
    assert not gate.passed and "at the ceiling" in gate.detail
    shown = gated(evidence, gates_of(claim.kind))
    assert shown.verdict == INCONCLUSIVE and shown.ungated == evidence.verdict


@pytest.mark.slow
def test_ffn_knee_needs_a_bound_not_a_missing_p_value(raw):
    """4x -> 8x: not separated (p = 0.11) and under a quarter of the gain to 4x; the power
    gate's one-sided bound is not under that quarter, and it names the seeds that would be."""
    claim, evidence = raw["ffn-4x"]
    assert claim.kind == KNEE
    gate = _gates(raw, "ffn-4x")["power"]
    assert not gate.passed and "smallest effect of interest" in gate.detail
    assert "seeds per arm would bound it" in gate.detail
    assert gated(evidence, gates_of(KNEE)).verdict == INCONCLUSIVE


@pytest.mark.slow
def test_parallel_threads_is_read_from_forward_and_backward_with_its_spread_gated(raw):
    """With forward + backward, attention scales 1.49x on 2 threads and the LSTM 0.90x; the
    rows' spreads are gated against that difference."""
    claim, evidence = raw["parallel-threads"]
    assert claim.kind == TIMING
    gates = _gates(raw, "parallel-threads")
    assert gates["forward and backward"].passed
    assert "fwdbwd_ms (forward + backward)" in gates["forward and backward"].detail
    assert "self-attention: speed-up 1.49" in evidence.measured
    assert "lstm: speed-up 0.899" in evidence.measured
    spread = gates["spread"]
    assert not spread.passed and "self-attention n=1024 d=128, 2 threads" in spread.detail
    assert "against the gru's" in spread.detail
    assert "idle machine" in gates


MINE = {c.key for m in (claim_training, claim_depth, claim_positions, claim_table3,
                        claim_later) for c in m.CLAIMS}


@pytest.mark.slow
def test_trained_verdicts_state_their_budget(raw):
    """A trained verdict holds at its budget: the scope names the steps (or updates) and the
    one learning rate every model trained at."""
    for key, (claim, evidence) in raw.items():
        if key not in MINE or evidence is None or claim.kind not in (TRAINED_QUALITY, KNEE):
            continue
        if evidence.verdict not in (*DECISIVE, INCONCLUSIVE):
            continue
        assert "steps" in evidence.scope or "updates" in evidence.scope, (key, evidence.scope)
        assert "learning rate" in evidence.scope, (key, evidence.scope)
    assert "300 steps at learning rate 0.001 for every model" in \
        raw["vanishing-gradients"][1].scope


# ---------------------------------------------------------------- later work's claims

def _scan_rows(spread: float | None = 0.02, busy: object = False) -> list[dict]:
    """Timings of every throughput variant (scans 1 ms, loops n/10 ms), each with an IQR of
    `spread` x its median (None: not recorded) and a busy flag."""
    return [r | {"busy": busy, "load_avg": 0.5}
            | ({"fwdbwd_iqr_ms": spread * r["fwdbwd_ms"]} if spread is not None else {})
            for r in fwdbwd_rows()]


@pytest.mark.parametrize("spread, busy, verdict, failed", [
    (0.02, False, SUPPORTS, set()),
    (0.02, True, INCONCLUSIVE, {"idle machine"}),
    (None, False, INCONCLUSIVE, {"spread"}),  # no IQR recorded: no measured spread
])
def test_scan_claim_passes_the_timing_gates_on_the_rows_it_judges(tmp_path, spread, busy,
                                                                    verdict, failed):
    write_suite(tmp_path, "table1", seq_ops_rows())
    write_suite(tmp_path, "rematch-quick", _scan_rows(spread, busy))
    evidence = claim_later.log_depth_training(Stored(tmp_path))
    shown = gated(evidence, gates_of(TIMING))
    assert evidence.verdict == SUPPORTS and shown.verdict == verdict
    assert {g.name for g in shown.gates if not g.passed} == failed
    assert "n up to 4096" in evidence.scope


@pytest.mark.parametrize("acc, seeds, verdict, failed", [
    ({"self-attention": (1.0, 0.9, 0.8)} | RECURRENT_LOW, 5, SUPPORTS, set()),
    # 3 seeds: every seed apart, but the exact tests over seeds cannot go below p = 0.1
    ({"self-attention": (1.0, 0.9, 0.8)} | RECURRENT_LOW, 3, INCONCLUSIVE, {"seeds"}),
    # the GRU recalls every pair too: at the ceiling "more" cannot show
    ({"self-attention": (1.0, 0.9, 0.8)} | RECURRENT_LOW | {"gru": (1.0, 0.9, 0.8)}, 5,
     INCONCLUSIVE, {"range"}),
])
def test_recall_claim_applies_the_trained_quality_gates(tmp_path, acc, seeds, verdict, failed):
    write_suite(tmp_path, "mqar-cpu", mqar_rows(acc, seeds))
    evidence = claim_later.attention_recalls_more(Stored(tmp_path))
    shown = gated(evidence, gates_of(TRAINED_QUALITY))
    assert shown.verdict == verdict
    assert {g.name for g in shown.gates if not g.passed} >= failed
    assert not [g for g in shown.gates if g.detail == FALLBACK]
    assert "400 steps" in evidence.scope
