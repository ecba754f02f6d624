"""The power gates, the timing gates and the tests over seeds (harness.report.gates): each
gate passing on one case and failing on another."""

import pytest

from harness.report.gates import (
    FWDBWD,
    SPREAD_SHARE,
    agree_gate,
    baseline_gate,
    below_tests,
    compare,
    fwdbwd_gate,
    idle_gate,
    min_p,
    power_gate,
    range_gate,
    seed_tests,
    seeds_gate,
    spread_gate,
)


@pytest.mark.parametrize("n_a, n_b, p", [(5, 5, 2 / 252), (3, 3, 0.1), (4, 4, 2 / 70),
                                         (1, 1, 1.0)])
def test_smallest_attainable_p_of_an_exact_two_sample_test(n_a, n_b, p):
    assert min_p(n_a, n_b) == pytest.approx(p)


def test_exact_tests_over_seeds_reach_their_smallest_p_on_complete_separation():
    tests = seed_tests([1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.1, 2.2, 2.3, 2.4])
    assert [t.p for t in tests] == pytest.approx([2 / 252] * 2)
    assert all("smallest attainable p 0.0079" in t.detail for t in tests)
    mixed = compare([1.0, 2.0, 3.0, 4.0, 5.0], [1.5, 2.5, 3.5, 4.5, 0.5])
    assert not mixed.separated and mixed.diff == pytest.approx(-0.5)


def test_one_seed_or_identical_values_give_no_test():
    assert all(t.p == 1 and "fewer than 2 seeds" in t.detail for t in seed_tests([1], [2]))
    assert all(t.p == 1 for t in seed_tests([1.0, 1.0], [1.0, 1.0]))


@pytest.mark.parametrize("seeds, passed", [({"a": 5, "b": 5}, True), ({"a": 3, "b": 3}, False),
                                           ({"a": 5, "b": 2}, False)])
def test_seeds_gate_needs_seeds_enough_for_the_exact_test(seeds, passed):
    gate = seeds_gate(seeds, "run more seeds")
    assert gate.passed == passed and "smallest attainable exact p" in gate.detail
    assert ("to pass: run more seeds" in gate.text()) != passed


def test_baseline_gate_shows_margins_and_names_missing_baselines():
    ok = baseline_gate({"a": 3.0, "b": 2.0}, {"copy": 1.0}, "BLEU", "train longer")
    assert ok.passed and "+1 over copy" in ok.detail
    below = baseline_gate({"a": 3.0, "b": 2.0}, {"retrieval": 2.5}, "BLEU", "train longer")
    assert not below.passed and "not above: b vs retrieval" in below.detail
    missing = baseline_gate({"a": 3.0}, {"copy": 1.0, "retrieval": None}, "BLEU", "x")
    assert not missing.passed and "missing: retrieval" in missing.detail
    best = baseline_gate({"a": 3.0, "b": 0.5}, {"copy": 1.0}, "loss", "x",
                         higher_better=False, need="best")
    assert best.passed  # only the better arm (lower loss) must beat the baseline


@pytest.mark.parametrize("arms, passed", [
    ({"a": 0.995, "b": 0.998}, False),  # two at the ceiling: accuracy cannot tell them apart
    ({"a": 0.995, "b": 0.5}, True),  # one at the ceiling against one off it: a difference
    ({"a": 0.07, "b": 0.06}, False),  # every arm at chance
    ({"a": 0.9, "b": 0.8}, True)])
def test_range_gate(arms, passed):
    assert range_gate(arms, "accuracy", 1.0, 1 / 16, "judge by steps").passed == passed


def test_agree_gate_fails_when_one_test_separates_and_the_other_does_not():
    a, b = seed_tests([1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.1, 2.2, 2.3, 2.4])
    assert agree_gate([a, b]).passed
    far = a.__class__("approximate randomization", 0.063, "10000 trials")
    assert not agree_gate([a, far]).passed and "0.063" in agree_gate([a, far]).detail
    assert not agree_gate([a]).passed  # one test cannot agree with itself


def test_range_gate_for_a_loss_has_its_ceiling_at_zero_and_its_floor_at_the_trivial_model():
    ok = range_gate({"a": 2.3, "b": 2.5}, "bits/char", 0.0, 4.3, "x", higher_better=False)
    assert ok.passed
    floor = range_gate({"a": 4.3, "b": 4.305}, "bits/char", 0.0, 4.3, "x", higher_better=False)
    assert not floor.passed and "every arm at the floor" in floor.detail
    ceiling = range_gate({"a": 0.004, "b": 0.002}, "bits/char", 0.0, 4.3, "x",
                         higher_better=False)
    assert not ceiling.passed and "at the ceiling: a, b" in ceiling.detail
    unknown = range_gate({"a": 2.3}, "bits/char", 0.0, float("nan"), "record the unigram",
                         higher_better=False)
    assert not unknown.passed and "not measured" in unknown.detail


def test_power_gate_bounds_a_small_effect_or_names_the_seeds_that_would():
    """A gain of 0.01 with seeds 0.001 apart: its one-sided bound is far under 0.03. The same
    mean gain with seeds spread over 0.1 cannot be bounded by 5 seeds: the gate says how many
    would; a gain of 0.05 is itself over the bound, so no number would."""
    base = [3.18, 3.181, 3.182, 3.183, 3.184]
    tight = power_gate(base, [v + 0.01 for v in base], 0.03, "gain", "more seeds")
    assert tight.passed and "upper bound" in tight.detail and not tight.remedy
    noisy = power_gate(base, [3.14, 3.24, 3.19, 3.15, 3.23], 0.03, "gain", "more seeds")
    assert not noisy.passed and "seeds per arm would bound it" in noisy.detail
    assert "to pass: more seeds" in noisy.text()
    over = power_gate(base, [v + 0.05 for v in base], 0.03, "gain", "more seeds")
    assert not over.passed and "no number of seeds" in over.detail
    one = power_gate([1.0], [1.0, 1.1], 0.5, "gain", "more seeds")
    assert not one.passed and "fewer than 2 seeds" in one.detail


def test_power_gate_where_the_verdict_reads_an_effect_asks_it_detected():
    a, b = [1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.1, 2.2, 2.3, 2.4]
    assert power_gate(a, b, 0.1, "gain", "x", concludes_none=False).passed
    mixed = power_gate(a, [1.5, 0.9, 1.3, 1.0, 1.4], 0.1, "gain", "x", concludes_none=False)
    assert not mixed.passed and "need every p < 0.05" in mixed.detail


def test_fwdbwd_gate_fails_on_a_forward_only_timing_and_names_it():
    ok = fwdbwd_gate({"speed-up": FWDBWD, "crossover": FWDBWD}, "rerun")
    assert ok.passed and "forward + backward" in ok.detail
    forward = fwdbwd_gate({"speed-up": FWDBWD, "achieved rate": "fwd_ms"}, "rerun the suite")
    assert not forward.passed and "achieved rate from fwd_ms (forward only)" in forward.detail
    assert "to pass: rerun the suite" in forward.text()
    assert not fwdbwd_gate({}, "x").passed  # no timing read: nothing shows fwd + bwd


def test_spread_gate_against_the_difference_read():
    """A 1.66x difference (66%) allows IQR/median up to 33%: a 50% row fails, 10% rows
    pass; a row without an IQR has no measured spread."""
    assert spread_gate({"a 1 thread": 0.10, "a 2 threads": 0.05}, 0.66, "speed-up", "x").passed
    wide = spread_gate({"a 1 thread": 0.10, "a 2 threads": 0.50}, 0.66, "speed-up", "retime")
    assert not wide.passed and "too wide: a 2 threads 50%" in wide.detail
    assert f"allowed IQR/median {SPREAD_SHARE * 0.66:.1%}" in wide.detail
    unknown = spread_gate({"a": 0.01, "b": float("nan")}, 2.0, "speed-up", "retime")
    assert not unknown.passed and "no IQR recorded: b" in unknown.detail


@pytest.mark.parametrize("busy, passed, shown", [
    ({"a": False, "b": "False"}, True, "0 flagged busy"),
    ({"a": False, "b": True}, False, "busy: b"),
    ({"a": False, "b": float("nan")}, False, "no busy flag recorded: b")])
def test_idle_gate(busy, passed, shown):
    gate = idle_gate(busy, {"a": 0.8, "b": 2.4}, "rerun on an idle machine")
    assert gate.passed == passed and shown in gate.detail and "0.80..2.40" in gate.detail
    assert ("to pass: rerun on an idle machine" in gate.text()) != passed


def test_below_tests_agree_when_every_seed_is_under_the_threshold():
    t, sign = below_tests([-11.5, -11.2, -10.9, -11.4, -11.3], 1.0)
    assert t.p < 1e-4 and sign.p == pytest.approx(1 / 32)
    assert agree_gate([t, sign]).passed
    t, sign = below_tests([-1.0, 3.0, 0.5, 2.0, 0.0], 1.0)  # 3 of 5 below: neither separates
    assert t.p > 0.05 and sign.p > 0.05 and agree_gate([t, sign]).passed
    assert all(x.p == 1 for x in below_tests([0.0], 1.0))
