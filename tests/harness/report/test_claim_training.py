"""Verdict rules of the training-study claims, on made-up results yielding each verdict:
five seeds per arm that pass every power gate, and rows that fail each gate (then the verdict
is "inconclusive at this scale" and names the gate)."""

import pytest

from harness.report import claim_depth as depth
from harness.report import claim_positions as pos
from harness.report import claim_training as rules
from harness.report.evidence import Missing, Stored, gated
from harness.report.verdicts import CONTRADICTS, IDENTITY, INCONCLUSIVE, QUALIFIED, SUPPORTS
from tests.harness.report.claim_frames import (
    attn_init_rows,
    ffn_rows,
    five,
    gradient_rows,
    heads_rows,
    norm_rows,
    positional_rows,
    scaling_train_rows,
    train_row,
    write_suite,
)


def _judge(tmp_path, rule, rows):
    write_suite(tmp_path, "convergence-quick", rows)
    return gated(rule(Stored(tmp_path)))


def _verdict(tmp_path, rule, rows, failed: str | None = None) -> str:
    """The gated verdict; `failed` names the gate an inconclusive verdict must name."""
    evidence = _judge(tmp_path, rule, rows)
    names = [g.name for g in evidence.gates if not g.passed]
    if evidence.verdict == INCONCLUSIVE:
        assert failed in names, (names, evidence.gates)
    else:
        assert not names, evidence.gates
    return evidence.verdict


@pytest.mark.parametrize("rnn_decay, rnn_acc, verdict", [
    (-5.0, 0.3, SUPPORTS), (-5.0, 0.95, QUALIFIED), (-0.5, 0.95, CONTRADICTS)])
def test_vanishing_gradients(tmp_path, rnn_decay, rnn_acc, verdict):
    rows = gradient_rows(rnn_decay, 0.0, rnn_acc)
    assert _verdict(tmp_path, rules.vanishing_gradients, rows) == verdict


def test_vanishing_gradients_needs_models_that_learned_the_task(tmp_path):
    rows = [r | {"final_accuracy": 0.05} if r.get("k") == 1 else r
            for r in gradient_rows(-5.0, 0.0, 0.3)]  # every model at chance at k = 1
    assert _verdict(tmp_path, rules.vanishing_gradients, rows, "baselines") == INCONCLUSIVE


@pytest.mark.parametrize("ratio, verdict", [(1.02, SUPPORTS), (1.5, CONTRADICTS)])
def test_qk_variance_is_an_identity_check(tmp_path, ratio, verdict):
    evidence = _judge(tmp_path, rules.qk_variance, attn_init_rows(var_ratio=ratio))
    assert evidence.verdict == verdict and evidence.kind == IDENTITY


@pytest.mark.parametrize("slope, verdict", [(1.05, SUPPORTS), (0.5, CONTRADICTS)])
def test_qk_growth_is_the_models_own(tmp_path, slope, verdict):
    evidence = _judge(tmp_path, rules.qk_growth, attn_init_rows(own_slope=slope))
    assert evidence.verdict == verdict and evidence.kind != IDENTITY
    assert f"d_k^{slope:.3f}"[:8] in evidence.measured


@pytest.mark.parametrize("own, unit, verdict", [
    (0.1, 0.1, SUPPORTS), (0.3, 0.1, QUALIFIED), (0.3, 0.3, CONTRADICTS)])
def test_softmax_saturation(tmp_path, own, unit, verdict):
    rows = attn_init_rows(jac_off=own, jac_off_unit=unit)
    assert _verdict(tmp_path, rules.softmax_saturation, rows) == verdict


FAST, SLOW = (100, 150, 100, 150, 100), (300, 350, 300, 350, 300)


@pytest.mark.parametrize("steps, verdict, failed", [
    ({(16, True): FAST, (16, False): SLOW, (64, True): FAST, (64, False): five(None)},
     SUPPORTS, None),
    ({(16, True): SLOW, (16, False): FAST, (64, True): FAST, (64, False): SLOW},
     QUALIFIED, None),  # unscaled faster at d_k = 16 only
    ({(16, True): FAST, (16, False): SLOW, (64, True): five(None), (64, False): FAST},
     CONTRADICTS, None),  # a censored run counts as its budget
    ({(16, True): FAST[:2], (16, False): SLOW[:2], (64, True): FAST[:2],
      (64, False): SLOW[:2]}, INCONCLUSIVE, "seeds"),  # two seeds: min p 0.33
    ({(16, True): FAST, (16, False): SLOW, (64, True): five(None), (64, False): five(None)},
     INCONCLUSIVE, "range"),  # both arms never reached the target at d_k = 64
])
def test_scale_factor_training(tmp_path, steps, verdict, failed):
    rows = _with_accuracy(scaling_train_rows(steps))
    assert _verdict(tmp_path, rules.scale_factor_training, rows, failed) == verdict


def _with_accuracy(rows: list[dict], reached: float = 0.995, missed: float = 0.9) -> list[dict]:
    """Final accuracy per row: `reached` where the run reached its target, else `missed`."""
    return [r | {"final_accuracy": reached if r["steps_to_target"] is not None else missed}
            for r in rows]


def test_scale_factor_training_needs_models_above_chance(tmp_path):
    steps = {(16, True): FAST, (16, False): SLOW, (64, True): FAST, (64, False): SLOW}
    rows = _with_accuracy(scaling_train_rows(steps), reached=0.05, missed=0.05)
    assert _verdict(tmp_path, rules.scale_factor_training, rows, "baselines") == INCONCLUSIVE


def test_scale_factor_training_states_its_budget(tmp_path):
    steps = {(16, True): FAST, (16, False): SLOW, (64, True): FAST, (64, False): SLOW}
    rows = [r | {"lr": 0.001} for r in _with_accuracy(scaling_train_rows(steps))]
    evidence = _judge(tmp_path, rules.scale_factor_training, rows)
    assert "600 steps at learning rate 0.001 for every model" in evidence.scope


@pytest.mark.parametrize("flops, speed, verdict", [
    (lambda h: 2e5, lambda h: 9e4, SUPPORTS),
    (lambda h: 2e5, lambda h: 9e4 / h, QUALIFIED),
    (lambda h: 2e5 * h, lambda h: 9e4, CONTRADICTS)])
def test_heads_cost(tmp_path, flops, speed, verdict):
    rows = heads_rows({1: (200, 200), 4: (200, 200)}, flops, speed)
    assert _verdict(tmp_path, rules.heads_cost, rows) == verdict


LOW, MID, HIGH = five(0.80, 0.01), five(0.90, 0.01), five(0.95, 0.005)


@pytest.mark.parametrize("acc, verdict, failed", [
    ({1: LOW, 2: HIGH, 4: MID}, SUPPORTS, None),
    ({1: (0.80, 0.95, 0.85, 0.90, 0.92), 2: five(0.91), 4: MID}, QUALIFIED, None),
    ({1: HIGH, 2: LOW, 4: MID}, CONTRADICTS, None),
    ({1: LOW[:3], 2: HIGH[:3], 4: MID[:3]}, INCONCLUSIVE, "seeds"),
    ({1: five(0.05), 2: five(0.05), 4: five(0.05)}, INCONCLUSIVE, "baselines")])
def test_heads_quality_is_judged_on_accuracy(tmp_path, acc, verdict, failed):
    steps = {h: FAST[:len(a)] for h, a in acc.items()}  # equal: only the accuracy decides
    rows = heads_rows(steps, acc=acc)
    assert _verdict(tmp_path, rules.heads_quality, rows, failed) == verdict


def test_heads_quality_at_the_ceiling_is_not_judged_by_steps(tmp_path):
    """Every h at 99.5%, h=1 reaching it in a third of the steps: not "contradicts" (the claim
    is about quality), but inconclusive, naming a harder task; steps shown as secondary."""
    ceiling = {h: five(0.995, 0.0005) for h in (1, 4, 16)}
    rows = heads_rows({1: FAST, 4: SLOW, 16: five(400)}, acc=ceiling)
    evidence = _judge(tmp_path, rules.heads_quality, rows)
    assert evidence.verdict == INCONCLUSIVE and evidence.ungated != CONTRADICTS
    (gate,) = [g for g in evidence.gates if not g.passed]
    assert gate.name == "range" and "harder task" in gate.remedy and "n = 32" in gate.remedy
    assert "Secondary, steps to 99%" in evidence.measured
    assert all("steps" not in t.name for t in evidence.tests)


@pytest.mark.parametrize("past_four, unigram, verdict, failed", [
    (five(3.17), 4.3, SUPPORTS, None),
    (five(2.90), 4.3, QUALIFIED, None),
    (five(3.17), None, INCONCLUSIVE, "baselines"),  # no unigram model stored
    (five(3.17), 3.2, INCONCLUSIVE, "baselines"),  # 1x (3.30) worse than the unigram model
    # a gain past 4x under a quarter of 1x->4x's (0.12) but too noisy to bound under 0.03
    ((3.12, 3.22, 3.10, 3.24, 3.17), 4.3, INCONCLUSIVE, "power"),
    # a gain past 4x of a quarter or more, not detected by the tests: no verdict either way
    ((2.95, 3.25, 3.05, 3.20, 2.90), 4.3, INCONCLUSIVE, "power")])
def test_ffn_four(tmp_path, past_four, unigram, verdict, failed):
    rows = ffn_rows({1: five(3.30), 4: five(3.18), 8: past_four}, unigram)
    assert _verdict(tmp_path, rules.ffn_four, rows, failed) == verdict


def test_ffn_four_knee_is_not_read_off_a_step_the_tests_do_not_separate(tmp_path):
    """The step past 4x is not separated (p >= 0.05) and is under a quarter of the gain to
    4x: the rule says "knee", but the power gate asks a bound and names the seeds for one."""
    rows = ffn_rows({1: five(3.41, 0.01), 4: (3.30, 3.34, 3.31, 3.35, 3.32),
                     8: (3.30, 3.31, 3.29, 3.30, 3.31)})
    evidence = _judge(tmp_path, rules.ffn_four, rows)
    assert evidence.ungated == SUPPORTS and evidence.verdict == INCONCLUSIVE
    (gate,) = [g for g in evidence.gates if not g.passed]
    assert gate.name == "power" and "seeds per arm would bound it" in gate.detail
    assert "smallest effect of interest" in gate.detail and "more seeds" in gate.remedy


@pytest.mark.parametrize("bits, verdict", [
    ({1: five(3.3), 2: five(3.2), 4: five(3.1)}, SUPPORTS),
    ({1: five(3.3), 2: five(3.2), 4: (3.25, 3.15, 3.2, 3.22, 3.18)}, QUALIFIED),
    ({1: five(3.1), 2: five(3.2), 4: five(3.3)}, CONTRADICTS)])
def test_ffn_bigger(tmp_path, bits, verdict):
    assert _verdict(tmp_path, rules.ffn_bigger, ffn_rows(bits)) == verdict


SIN = five(0.90, 0.01)


@pytest.mark.parametrize("none, sin, verdict, failed", [
    (five(0.10), SIN, SUPPORTS, None),  # near chance (1/16) without positions
    (five(0.50), SIN, QUALIFIED, None),  # well above chance: the causal mask leaks order
    ((0.88, 0.93, 0.90, 0.91, 0.89), SIN, CONTRADICTS, None),
    (five(0.995), five(0.995), INCONCLUSIVE, "range")])  # both at the ceiling
def test_order_needs_positions(tmp_path, none, sin, verdict, failed):
    rows = positional_rows({"sinusoidal": sin, "none": none}, {"sinusoidal": sin, "none": none})
    assert _verdict(tmp_path, pos.order_needs_positions, rows, failed) == verdict


@pytest.mark.parametrize("at_2n, tasks, verdict, failed", [
    ({"sinusoidal": five(0.95), "learned": five(0.2), "none": five(0.1)}, 2, SUPPORTS, None),
    ({"sinusoidal": five(0.5), "learned": five(0.2), "none": five(0.1)}, 2, QUALIFIED, None),
    ({"sinusoidal": five(0.1), "learned": five(0.3), "none": five(0.3)}, 2, CONTRADICTS,
     None),
    # one task: judged, its scope saying so (as every claim on the positional rows)
    ({"sinusoidal": five(0.1), "learned": five(0.3), "none": five(0.3)}, 1, CONTRADICTS,
     None),
    ({"sinusoidal": five(0.05), "learned": five(0.06), "none": five(0.06)}, 2, INCONCLUSIVE,
     "baselines")])  # every encoding at chance at 2n
def test_extrapolation(tmp_path, at_2n, tasks, verdict, failed):
    acc = {"sinusoidal": SIN, "learned": SIN, "none": five(0.5)}
    rows = positional_rows(acc, at_2n, tasks=("copy", "reverse")[:tasks])
    assert _verdict(tmp_path, pos.extrapolation, rows, failed) == verdict


def test_extrapolation_scope_names_its_tasks(tmp_path):
    acc = {"sinusoidal": SIN, "learned": SIN, "none": five(0.5)}
    at_2n = {"sinusoidal": five(0.1), "learned": five(0.3), "none": five(0.3)}
    evidence = _judge(tmp_path, pos.extrapolation, positional_rows(acc, at_2n, tasks=("copy",)))
    assert "one task (copy), n = 8 evaluated at 2n" in evidence.scope
    assert "range" in [g.name for g in evidence.gates]


CEIL = five(0.995, 0.0005)
NEAR = five(0.90, 0.001)  # five seeds within 0.4 points: a difference they can bound


@pytest.mark.parametrize("sin, learned, steps, verdict, failed", [
    (NEAR, five(0.905, 0.001), None, SUPPORTS, None),
    # within 2 points on average, but too noisy to bound within 2 points
    (SIN, (0.91, 0.89, 0.9, 0.92, 0.93), None, INCONCLUSIVE, "power"),
    (SIN, (0.80, 0.99, 0.7, 0.95, 0.85), None, QUALIFIED, None),  # 4 points lower, not separated
    (SIN, five(0.7), None, CONTRADICTS, None),
    # at the ceiling: "nearly identical" is the ceiling's doing, whatever the steps
    (CEIL, CEIL, {"sinusoidal": FAST, "learned": (150, 100, 150, 100, 100)}, INCONCLUSIVE,
     "range"),
    (CEIL, five(0.992, 0.0005), {"sinusoidal": FAST, "learned": SLOW}, INCONCLUSIVE, "range"),
])
def test_learned_vs_sinusoidal(tmp_path, sin, learned, steps, verdict, failed):
    acc = {"sinusoidal": sin, "learned": learned}
    rows = positional_rows(acc, acc, steps=steps)
    assert _verdict(tmp_path, pos.learned_vs_sinusoidal, rows, failed) == verdict


def test_learned_vs_sinusoidal_at_the_ceiling_is_inconclusive(tmp_path):
    """0.998 against 0.995 (Table 3 (E) on the synthetic task): within the 2-point margin, but
    both at the ceiling that makes Table 3 (A) inconclusive: the range gate fails here too."""
    acc = {"sinusoidal": five(0.998, 0.0001), "learned": five(0.995, 0.0001)}
    evidence = _judge(tmp_path, pos.learned_vs_sinusoidal, positional_rows(acc, acc))
    assert evidence.ungated == SUPPORTS and evidence.verdict == INCONCLUSIVE
    failed = [g for g in evidence.gates if not g.passed]
    assert [g.name for g in failed] == ["range"] and "at the ceiling" in failed[0].detail
    assert "tests agree" in [g.name for g in evidence.gates]


def _norm(norm, cold, warm, seeds=5):
    return {(norm, d, w): loss[:seeds] for d in (6, 12)
            for w, loss in ((0, cold[d]), (50, warm[d]))}


WARM = {6: five(2.5, 0.01), 12: five(2.5, 0.01)}


@pytest.mark.parametrize("cold, seeds, unigram, verdict, failed", [
    ({6: five(3.0, 0.01), 12: five(3.0, 0.01)}, 5, 4.3, SUPPORTS, None),
    ({6: five(2.5, 0.01), 12: five(3.0, 0.01)}, 5, 4.3, QUALIFIED, None),  # one depth
    ({6: five(2.5, 0.01), 12: five(2.5, 0.01)}, 5, 4.3, CONTRADICTS, None),
    ({6: five(3.0, 0.01), 12: five(3.0, 0.01)}, 2, 4.3, INCONCLUSIVE, "seeds"),
    ({6: five(3.0, 0.01), 12: five(3.0, 0.01)}, 5, None, INCONCLUSIVE, "baselines"),
])
def test_post_ln_warmup(tmp_path, cold, seeds, unigram, verdict, failed):
    rows = norm_rows(_norm("post", cold, WARM, seeds), unigram)
    assert _verdict(tmp_path, pos.post_ln_warmup, rows, failed) == verdict


@pytest.mark.parametrize("cold, verdict", [
    ({6: five(2.5, 0.01), 12: five(2.5, 0.01)}, SUPPORTS),
    ({6: five(2.5, 0.01), 12: five(3.0, 0.01)}, QUALIFIED),
    ({6: five(3.0, 0.01), 12: five(3.0, 0.01)}, CONTRADICTS)])
def test_pre_ln_no_warmup(tmp_path, cold, verdict):
    rows = norm_rows(_norm("pre", cold, WARM))
    assert _verdict(tmp_path, pos.pre_ln_no_warmup, rows) == verdict


def test_pre_ln_margin_is_gated_on_the_tests_agreeing(tmp_path):
    """No warm-up better by a little at both depths, the two tests disagreeing at one: the
    margin holds, but a verdict of the kind passes "tests agree" too (harness.report.rulebook):
    inconclusive, naming it."""
    cold = {6: five(2.45, 0.01), 12: (2.38, 2.40, 2.42, 2.495, 2.525)}  # p = 0.048, 0.056
    evidence = _judge(tmp_path, pos.pre_ln_no_warmup, norm_rows(_norm("pre", cold, WARM)))
    assert evidence.ungated == SUPPORTS and evidence.verdict == INCONCLUSIVE
    assert [g.name for g in evidence.gates if not g.passed] == ["tests agree"]


def test_pre_ln_supports_needs_the_warmup_gain_bounded(tmp_path):
    """Warm-up's gain 0.05 nats on average (under the 0.1 margin) but spread over +-0.3: the
    power gate cannot bound it under 0.1."""
    cold = {6: (2.2, 2.9, 2.3, 2.8, 2.55), 12: (2.2, 2.9, 2.3, 2.8, 2.55)}
    warm = {6: (2.3, 2.7, 2.4, 2.6, 2.5), 12: (2.3, 2.7, 2.4, 2.6, 2.5)}
    evidence = _judge(tmp_path, pos.pre_ln_no_warmup, norm_rows(_norm("pre", cold, warm)))
    assert evidence.ungated == SUPPORTS and evidence.verdict == INCONCLUSIVE
    assert "power" in [g.name for g in evidence.gates if not g.passed]


@pytest.mark.parametrize("ratio, verdict, failed", [
    (lambda n, d: d / 8 if n == "post" else 0.7, SUPPORTS, None),  # 0.75 -> 1.5
    (lambda n, d: 2 - d / 12 if n == "post" else 0.7, CONTRADICTS, None),  # 1.5 -> 1.0
    (lambda n, d: 1.2 if n == "post" else 0.7, QUALIFIED, None)])  # flat with depth
def test_post_ln_gradient_scale_against_depth(tmp_path, ratio, verdict, failed):
    rows = norm_rows(_norm("post", WARM, WARM), ratio=ratio)
    assert _verdict(tmp_path, depth.post_ln_depth, rows, failed) == verdict


@pytest.mark.parametrize("ratio, verdict", [
    (lambda n, d: d / 8 if n == "post" else 0.7, SUPPORTS),  # 0.25 -> 0.75 -> 1.5
    (lambda n, d: min(d, 6) / 4 if n == "post" else 0.7, QUALIFIED)])  # flat from 6 to 12
def test_post_ln_trend_must_rise_at_every_depth(tmp_path, ratio, verdict):
    rows = norm_rows(_norm("post", WARM, WARM), ratio=ratio, depths=(2, 6, 12))
    evidence = _judge(tmp_path, depth.post_ln_depth, rows)
    assert evidence.verdict == verdict
    if verdict == QUALIFIED:
        assert "the rise stops" in evidence.measured and "from depth 6 to 12" in \
            evidence.measured


@pytest.mark.parametrize("models, decay, verdict, failed", [
    (("lstm-lm", "rnn-lm"), 2.0, SUPPORTS, None),  # an ungated RNN's gradient grows 100x
    (("lstm-lm", "rnn-lm"), -3.0, CONTRADICTS, None),
    (("lstm-lm", "gru-lm"), -3.0, INCONCLUSIVE, "model family")])  # gated cells only
def test_exploding_gradients(tmp_path, models, decay, verdict, failed):
    assert _verdict(tmp_path, depth.exploding_gradients, _grad_rows(models, decay),
                    failed) == verdict


def _grad_rows(models, decay, unigram: float | None = 4.3) -> list[dict]:
    """gradient-distance rows: the log10 ratio `decay` at init (+0.1 per seed), one lower
    after training, every model at 3 bits/char on a corpus whose unigram model gives
    `unigram`."""
    return [train_row("gradient-distance", s, "grad-distance", model=m, seq_len=64,
                      grad_decay_init=decay + 0.1 * s, grad_decay_trained=decay - 1,
                      final_bits_per_char=3.0, unigram_bits_per_char=unigram)
            for m in ("transformer-lm", *models) for s in range(5)]


def test_exploding_gradients_applies_its_kinds_gates(tmp_path):
    """Seeds, the unigram model, the ratio's float32 range and two agreeing tests of each
    model's ratio against 10^1; without the unigram model stored, the baselines gate fails."""
    evidence = _judge(tmp_path, depth.exploding_gradients, _grad_rows(("lstm-lm", "rnn-lm"),
                                                                      -3.0))
    assert {"seeds", "baselines", "range", "tests agree"} <= {g.name for g in evidence.gates}
    assert any("exact sign test below 1" in t.name for t in evidence.tests)
    bare = _judge(tmp_path, depth.exploding_gradients,
                  _grad_rows(("lstm-lm", "rnn-lm"), -3.0, unigram=None))
    assert bare.verdict == INCONCLUSIVE
    assert [g.name for g in bare.gates if not g.passed] == ["baselines"]


def _residual_rows(signal, passed, seeds: int = 5) -> list[dict]:
    """suite residual's probe rows at depths 2 and 12, Post-LN and Pre-LN, with and without
    the branch: signal(norm, depth, kept) the signal the last layer keeps and passed(...) the
    gradient at the input over the last layer's, each seed a little apart."""
    return [train_row("residual", s, "layer-grads", n_layers=d, norm=n, residual=kept,
                      steps=0, signal_last_over_input=signal(n, d, kept) * (1 + 0.01 * s),
                      grad_input_over_output=passed(n, d, kept) * (1 + 0.01 * s))
            for d in (2, 12) for n in ("post", "pre") for kept in (True, False)
            for s in range(seeds)]


def _residual(tmp_path, signal, passed, seeds: int = 5):
    write_suite(tmp_path, depth.RESIDUAL_SUITE, _residual_rows(signal, passed, seeds))
    return gated(depth.residual_connections(Stored(tmp_path)))


KEEPS = lambda n, d, kept: 0.6 if kept else 0.01 / d  # noqa: E731 -- the branch keeps signal


@pytest.mark.parametrize("signal, passed, verdict", [
    (KEEPS, lambda n, d, kept: 1.5 if kept else 1e-3, SUPPORTS),  # the gradient lost without
    (KEEPS, lambda n, d, kept: 1.5 if kept else 0.8, QUALIFIED),  # kept either way
    (lambda n, d, kept: 0.01 if kept else 0.5, lambda n, d, kept: 1.0, CONTRADICTS),
    (KEEPS, lambda n, d, kept: 0.05 if kept else 1.0, CONTRADICTS),  # lost with the branch
    (KEEPS, lambda n, d, kept: 12.0 if kept else 1e-3, QUALIFIED)])  # grown with it, not lost
def test_residual_connections_judge_signal_and_gradient_at_the_deepest_depth(
        tmp_path, signal, passed, verdict):
    evidence = _residual(tmp_path, signal, passed)
    assert evidence.verdict == verdict, (evidence.measured, evidence.gates)
    assert "judged at depth 12" in evidence.points
    assert "Post-LN" in evidence.measured and "Pre-LN" in evidence.measured
    if verdict == QUALIFIED:
        assert "the gradient half is not shown here" in evidence.measured
    assert evidence.scope.startswith("depths 2, 12, d = 64, n = 8 at initialisation, 5 seeds")


def test_residual_connections_need_five_seeds_and_both_arms(tmp_path):
    few = _residual(tmp_path, KEEPS, lambda n, d, kept: 1.5 if kept else 1e-3, seeds=3)
    assert few.verdict == INCONCLUSIVE and [g.name for g in few.gates if not g.passed] == \
        ["seeds"]
    rows = [r for r in _residual_rows(KEEPS, lambda n, d, kept: 1.0)
            if r["residual"] or r["norm"] == "post"]  # Pre-LN without the branch: not run
    write_suite(tmp_path, depth.RESIDUAL_SUITE, rows)
    with pytest.raises(Missing, match="Pre-LN at depth 12 needs rows with and without"):
        depth.residual_connections(Stored(tmp_path))
    rows = [r for r in _residual_rows(KEEPS, lambda n, d, kept: 1.0)
            if r["n_layers"] == 2 or r["norm"] == "post"]  # Pre-LN not run at depth 12
    write_suite(tmp_path, depth.RESIDUAL_SUITE, rows)
    with pytest.raises(Missing, match="Pre-LN has no rows at depth 12"):
        depth.residual_connections(Stored(tmp_path))
    rows = _residual_rows(KEEPS, lambda n, d, kept: 1.5 if kept else 1e-3)
    rows[-1]["grad_input_over_output"] = float("nan")  # one seed's ratio not measured
    write_suite(tmp_path, depth.RESIDUAL_SUITE, rows)
    with pytest.raises(Missing, match="not a number in some seed without"):
        depth.residual_connections(Stored(tmp_path))


def test_one_seed_past_the_bound_decides_no_gradient_verdict(tmp_path):
    """Lost means every seed 10x or more down: one seed of five down there with the branch
    is not a contradiction, and one seed up 10x is growth, not loss."""
    def passed(n, d, kept):
        return 1.5 if kept else 1e-3
    rows = _residual_rows(KEEPS, passed)
    first = next(r for r in rows if r["n_layers"] == 12 and r["residual"])
    first["grad_input_over_output"] = 0.05
    write_suite(tmp_path, depth.RESIDUAL_SUITE, rows)
    evidence = gated(depth.residual_connections(Stored(tmp_path)))
    assert evidence.verdict == QUALIFIED, evidence.measured
    assert "with the branch it is not within 10x in every seed (Post-LN log10 -1.3 to" in \
        evidence.measured


def _identities(tmp_path, attn_err, lstm_err, residual):
    rows = [{"runner": "identities", "mixer": m, "seq_len": 64, "d_model": 64, "seed": s,
             "equivariance_error": err, "pe_shift_residual": residual, "pe_positions": 512,
             "pe_shifts": "1 7 31"}
            for m, err in (("self-attention", attn_err), ("lstm", lstm_err)) for s in (0, 1)]
    write_suite(tmp_path, "identities", rows)
    return Stored(tmp_path)


@pytest.mark.parametrize("attn_err, lstm_err, verdict", [
    (1e-16, 0.8, SUPPORTS), (1e-16, 1e-16, QUALIFIED), (1e-3, 0.8, CONTRADICTS)])
def test_equivariance(tmp_path, attn_err, lstm_err, verdict):
    stored = _identities(tmp_path, attn_err, lstm_err, 1e-8)
    assert pos.equivariance(stored).verdict == verdict


@pytest.mark.parametrize("residual, verdict", [
    (2e-8, SUPPORTS), (1e-4, QUALIFIED), (0.9, CONTRADICTS)])
def test_pe_linear(tmp_path, residual, verdict):
    assert pos.pe_linear(_identities(tmp_path, 1e-16, 0.8, residual)).verdict == verdict
