"""Verdict rules of the layer claims, on made-up results that must yield each verdict."""

import pandas as pd
import pytest

from harness.report import claim_layers as rules
from harness.report.claims import judge
from harness.report.evidence import Claim, Stored, gated
from harness.report.rulebook import TIMING, gates_of
from harness.report.verdicts import CONTRADICTS, INCONCLUSIVE, NOT_HERE, QUALIFIED, SUPPORTS
from tests.harness.report.claim_frames import (
    CLOSED_FORM,
    fixed_token_rows,
    gpu_rows,
    quick_rows,
    table1_rows,
    thread_rows,
    write_suite,
)


def _verdict(tmp_path, rule, **overrides) -> str:
    write_suite(tmp_path, "table1", table1_rows(**overrides))
    return rule(Stored(tmp_path)).verdict


@pytest.mark.parametrize("attn, verdict", [(lambda n: 8, SUPPORTS), (lambda n: n, CONTRADICTS)])
def test_sequential_ops(tmp_path, attn, verdict):
    assert _verdict(tmp_path, rules.sequential_ops, seq_ops={"attn": attn}) == verdict


@pytest.mark.parametrize("lstm, verdict", [(lambda n: n - 1, SUPPORTS),
                                           (lambda n: 3, CONTRADICTS)])
def test_path_length(tmp_path, lstm, verdict):
    assert _verdict(tmp_path, rules.path_length, path={"lstm": lstm}) == verdict


@pytest.mark.parametrize("cost, verdict", [
    ({}, SUPPORTS),  # time proportional to the counted FLOPs
    ({"time_scale": lambda m, f: 1.0 + 0 * f}, QUALIFIED),  # flat time: FLOPs only
    ({"attn_flops": lambda n, d: n * d}, CONTRADICTS),  # counted FLOPs linear in n
])
def test_complexity(tmp_path, cost, verdict):
    assert _verdict(tmp_path, rules.complexity, cost=cost) == verdict


@pytest.mark.parametrize("cost, verdict", [
    ({}, SUPPORTS),
    ({"fused_memory": lambda n: n}, QUALIFIED),  # a fused kernel saves O(n)
    ({"memory": lambda n: n}, CONTRADICTS),
])
def test_quadratic_memory(tmp_path, cost, verdict):
    assert _verdict(tmp_path, rules.quadratic_memory, cost=cost) == verdict


@pytest.mark.parametrize("flops, speed, verdict", [
    (CLOSED_FORM, None, SUPPORTS),
    # a recurrent kernel 8x faster per FLOP: attention's time crosses before n = d
    (CLOSED_FORM, {"lstm": 8e9, "gru": 8e9}, QUALIFIED),
    # attention counting 16x its FLOPs: its FLOP crossover falls below d
    (CLOSED_FORM | {"self-attention": lambda n, d: 16 * CLOSED_FORM["self-attention"](n, d)},
     None, CONTRADICTS),
])
def test_cheaper_below_d(tmp_path, flops, speed, verdict):
    write_suite(tmp_path, "quick", quick_rows(flops, speed))
    assert rules.cheaper_below_d(Stored(tmp_path)).verdict == verdict


@pytest.mark.parametrize("rates, verdict", [((300.0, 100.0), SUPPORTS),
                                            ((150.0, 100.0), QUALIFIED),
                                            ((50.0, 100.0), CONTRADICTS)])
def test_parallel_hardware_from_gpu_rows(tmp_path, rates, verdict):
    write_suite(tmp_path, "table1", table1_rows())
    write_suite(tmp_path / "gpu", "complexity-gpu-quick", gpu_rows(*rates))
    assert rules.parallel_hardware(Stored(tmp_path)).verdict == verdict


@pytest.mark.parametrize("lstm_k, ratio, verdict", [
    (0.9, 20.0, SUPPORTS),  # time set by n sequential steps, far behind attention
    (0.9, 1.5, QUALIFIED),  # sequential, but attention not 2x ahead at the longest n
    (0.6, 0.5, CONTRADICTS),  # attention slower at the longest n
    (0.05, 20.0, CONTRADICTS),  # flat: the recurrence parallelised within sequences
])
def test_parallel_hardware_from_fixed_token_gpu_rows(tmp_path, lstm_k, ratio, verdict):
    write_suite(tmp_path, "table1", table1_rows())
    write_suite(tmp_path / "gpu", "fixed-tokens-gpu", fixed_token_rows(lstm_k, ratio))
    evidence = rules.parallel_hardware(Stored(tmp_path))
    assert evidence.verdict == verdict
    assert "bfloat16" in evidence.measured and "float32" in evidence.measured


def test_parallel_hardware_without_gpu_is_not_measured_here(tmp_path):
    assert _verdict(tmp_path, rules.parallel_hardware) == NOT_HERE


def test_missing_suite_names_the_command(tmp_path):
    claim = Claim("k", "c", "table1", "", rules.sequential_ops)
    evidence = judge(claim, Stored(tmp_path))
    assert evidence.verdict == f"not measured: run `tvr run table1 --out {tmp_path}`"


def test_a_fit_of_fewer_than_four_points_gives_no_verdict(tmp_path):
    rows = [r for r in table1_rows() if not (r.get("fit") == "seq-ops" and r["seq_len"] > 32)]
    write_suite(tmp_path, "table1", rows)
    claim = Claim("k", "c", "table1", "", rules.sequential_ops)
    evidence = judge(claim, Stored(tmp_path))
    assert evidence.verdict.startswith("not measured")
    assert "fewer than 4" in evidence.measured


@pytest.mark.parametrize("gains, verdict", [
    ({"self-attention": 1.9, "lstm": 1.2, "gru": 1.2}, SUPPORTS),
    ({"self-attention": 1.5, "lstm": 1.4, "gru": 1.4}, QUALIFIED),
    ({"self-attention": 1.2, "lstm": 1.9, "gru": 1.9}, CONTRADICTS),
    ({"self-attention": 0.5, "lstm": 0.1, "gru": 0.1}, NOT_HERE),  # no idle core
])
def test_parallel_threads(tmp_path, gains, verdict):
    write_suite(tmp_path, "threads", thread_rows(gains))
    evidence = rules.parallel_threads(Stored(tmp_path))
    assert evidence.verdict == verdict
    assert "projection" in evidence.measured


def test_projection_is_brents_bound(tmp_path):
    from harness.report.threads import projection_table

    frame = pd.DataFrame(thread_rows({"self-attention": 1.0, "lstm": 1.0})).assign(
        status="ok")
    proj = projection_table(frame).set_index(["mixer", "seq_len"])
    lstm = proj.loc[("lstm", 1024)]
    # T_P = T1 / P + depth * tau with T1 = 10 ms, depth 8192, tau 0.002 ms
    assert lstm["ms_P100"] == pytest.approx(10 / 100 + 8192 * 0.002)
    assert lstm["P_span"] == pytest.approx(10 / (8192 * 0.002))
    assert proj.loc[("self-attention", 1024), "P_span"] == pytest.approx(10 / (8 * 0.002))


# ---------------------------------------------------------------- the timing gates

def _timed(rows: list[dict], spread: float = 0.02, busy: object = False) -> list[dict]:
    """Rows that time forward + backward given an IQR of `spread` x their median and a busy
    flag (None: not recorded) with a load average."""
    out = []
    for r in rows:
        if "fwdbwd_ms" in r:
            r = r | {"fwdbwd_iqr_ms": spread * r["fwdbwd_ms"], "load_avg": 0.5}
            if busy is not None:
                r["busy"] = busy
        out.append(r)
    return out


def _gated(stored: Stored, rule):
    """The rule's evidence and the ledger's verdict of it (its kind's gates enforced)."""
    evidence = rule(stored)
    return evidence, gated(evidence, gates_of(TIMING))


def _thread_rows(fwd: dict[str, float], fwdbwd: dict[str, float],
                 spreads: dict[tuple[str, int], float] | None = None,
                 busy: object = False) -> list[dict]:
    """Thread rows whose forward speed-ups are `fwd` and forward + backward ones `fwdbwd`,
    each row's IQR/median spreads[(mixer, threads)] (default 2%)."""
    spreads = spreads or {}
    rows = []
    for r in thread_rows(fwd):
        p = r["threads_used"]
        ms = 30.0 / (fwdbwd[r["mixer"]] if p == 2 else 1.0)
        rows.append(r | {"fwdbwd_ms": ms, "load_avg": 0.5,
                         "fwdbwd_iqr_ms": spreads.get((r["mixer"], p), 0.02) * ms}
                    | ({"busy": busy} if busy is not None else {}))
    return rows


ATTN_FASTER = {"self-attention": 1.9, "lstm": 1.2, "gru": 1.2}
RNN_FASTER = {"self-attention": 1.2, "lstm": 1.9, "gru": 1.9}


def test_parallel_threads_is_judged_on_forward_and_backward(tmp_path):
    """Forward alone would support the claim; forward + backward contradicts it: the verdict
    is the latter's, the forward speed-ups shown for contrast."""
    write_suite(tmp_path, "threads", _thread_rows(ATTN_FASTER, RNN_FASTER))
    evidence, ledger = _gated(Stored(tmp_path), rules.parallel_threads)
    assert evidence.verdict == ledger.verdict == CONTRADICTS
    assert all(g.passed for g in evidence.gates)
    assert "forward + backward (fwdbwd_ms)" in evidence.measured
    assert "forward alone, for contrast (not judged): self-attention 1.9" in evidence.measured


def test_parallel_threads_spread_gate_names_the_wide_row(tmp_path):
    """Attention 1.49x on fwd + bwd against the LSTM's 0.90x (a 66% difference) with its
    2-thread row spread over 50% of its median: inconclusive, that row named."""
    rows = _thread_rows(ATTN_FASTER, {"self-attention": 1.49, "lstm": 0.9, "gru": 0.986},
                        {("self-attention", 2): 0.5})
    write_suite(tmp_path, "threads", rows)
    evidence, ledger = _gated(Stored(tmp_path), rules.parallel_threads)
    assert evidence.verdict == SUPPORTS and ledger.verdict == INCONCLUSIVE
    (gate,) = [g for g in ledger.gates if not g.passed]
    assert gate.name == "spread" and "self-attention n=1024 d=128, 2 threads 50%" in gate.detail
    assert "against the lstm's: 65.6%" in gate.detail and "against the gru's" in gate.detail


def test_parallel_threads_from_forward_only_or_unflagged_rows_is_inconclusive(tmp_path):
    write_suite(tmp_path, "threads", thread_rows(ATTN_FASTER))  # fwd_ms only, no busy flag
    evidence, ledger = _gated(Stored(tmp_path), rules.parallel_threads)
    assert evidence.verdict == SUPPORTS and ledger.verdict == INCONCLUSIVE
    failed = {g.name: g for g in ledger.gates if not g.passed}
    assert set(failed) == {"forward and backward", "spread", "idle machine"}
    assert "from fwd_ms (forward only)" in failed["forward and backward"].detail
    assert "no busy flag recorded" in failed["idle machine"].detail


def test_a_busy_row_fails_the_idle_machine_gate(tmp_path):
    write_suite(tmp_path, "threads", _thread_rows(RNN_FASTER, ATTN_FASTER, busy=True))
    evidence, ledger = _gated(Stored(tmp_path), rules.parallel_threads)
    assert evidence.verdict == SUPPORTS and ledger.verdict == INCONCLUSIVE
    assert [g.name for g in ledger.gates if not g.passed] == ["idle machine"]


@pytest.mark.parametrize("timed, verdict, failed", [
    (lambda rows: _timed(rows), SUPPORTS, set()),
    (lambda rows: _timed(rows, busy=None), INCONCLUSIVE, {"idle machine"}),
    # a 60% spread against the 87% time change an exponent 0.3 off makes over n = 256..2048
    (lambda rows: _timed(rows, spread=0.6), INCONCLUSIVE, {"spread"}),
    (lambda rows: _timed([{k: v for k, v in r.items() if k != "fwdbwd_ms"} for r in rows]),
     INCONCLUSIVE, {"forward and backward", "spread", "idle machine"}),
])
def test_complexity_timing_gates(tmp_path, timed, verdict, failed):
    write_suite(tmp_path, "table1", timed(table1_rows()))
    evidence, ledger = _gated(Stored(tmp_path), rules.complexity)
    assert evidence.verdict == SUPPORTS and ledger.verdict == verdict
    assert {g.name for g in ledger.gates if not g.passed} == failed


def test_complexity_reads_forward_and_backward_time(tmp_path):
    """Forward time flat, forward + backward time following the FLOPs: supports (fwd + bwd)."""
    rows = [r | {"fwd_ms": 1.0} if r.get("fit") in ("n", "d") else r
            for r in _timed(table1_rows())]
    write_suite(tmp_path, "table1", rows)
    assert rules.complexity(Stored(tmp_path)).verdict == SUPPORTS


def test_quadratic_memory_gates_the_time_it_shows(tmp_path):
    write_suite(tmp_path, "table1", _timed(table1_rows()))
    evidence, ledger = _gated(Stored(tmp_path), rules.quadratic_memory)
    assert ledger.verdict == SUPPORTS and "forward + backward time" in evidence.measured
    write_suite(tmp_path, "table1", _timed(table1_rows(), busy=True))
    assert _gated(Stored(tmp_path), rules.quadratic_memory)[1].verdict == INCONCLUSIVE


SLOW_RNN = {"lstm": 0.5e9, "gru": 0.5e9}  # recurrent layers at half attention's FLOP rate


@pytest.mark.parametrize("speed, spread, verdict, failed", [
    (SLOW_RNN, 0.02, SUPPORTS, set()),  # attention 2x cheaper than the GRU at n = d
    ({"lstm": 8e9, "gru": 8e9}, 0.02, QUALIFIED, set()),
    # crossings exactly at n = d (the closed form): which side of d they fall cannot show
    (None, 0.02, INCONCLUSIVE, {"spread"}),
    (SLOW_RNN, 0.9, INCONCLUSIVE, {"spread"}),  # rows spread wider than the 2x they differ
])
def test_cheaper_below_d_timing_gates(tmp_path, speed, spread, verdict, failed):
    write_suite(tmp_path, "quick", _timed(quick_rows(CLOSED_FORM, speed), spread))
    evidence, ledger = _gated(Stored(tmp_path), rules.cheaper_below_d)
    assert ledger.verdict == verdict
    assert {g.name for g in ledger.gates if not g.passed} == failed
    assert "forward + backward time" in evidence.points


def test_parallel_hardware_timing_gates(tmp_path):
    """GPU fixed-token rows timed forward + backward pass; achieved forward rates alone do
    not (the forward-and-backward gate names them)."""
    write_suite(tmp_path, "table1", table1_rows())
    write_suite(tmp_path / "gpu", "fixed-tokens-gpu", _timed(fixed_token_rows(0.9, 20.0)))
    evidence, ledger = _gated(Stored(tmp_path), rules.parallel_hardware)
    assert ledger.verdict == SUPPORTS and all(g.passed for g in evidence.gates)
    other = tmp_path / "forward"
    other.mkdir()
    write_suite(other, "table1", table1_rows())
    write_suite(other / "gpu", "complexity-gpu-quick",
                [r | {"busy": False, "fwd_iqr_ms": 0.0} for r in gpu_rows(300.0, 100.0)])
    evidence, ledger = _gated(Stored(other), rules.parallel_hardware)
    assert evidence.verdict == SUPPORTS and ledger.verdict == INCONCLUSIVE
    (gate,) = [g for g in ledger.gates if not g.passed and g.name == "forward and backward"]
    assert "achieved FLOP rates from fwd_ms (forward only)" in gate.detail
