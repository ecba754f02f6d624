"""The power gates and the exact tests over seeds (harness.report.gates)."""

import pytest

from harness.report.gates import (
    agree_gate,
    baseline_gate,
    compare,
    min_p,
    range_gate,
    seed_tests,
    seeds_gate,
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
