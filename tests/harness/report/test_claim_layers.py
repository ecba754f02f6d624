"""Verdict rules of the layer claims, on made-up results that must yield each verdict."""

import pandas as pd
import pytest

from harness.report import claim_layers as rules
from harness.report.claims import judge
from harness.report.evidence import Claim, Stored
from harness.report.verdicts import CONTRADICTS, NOT_HERE, QUALIFIED, SUPPORTS
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
