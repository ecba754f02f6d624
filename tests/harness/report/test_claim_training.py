"""Verdict rules of the training-study claims, on made-up results yielding each verdict."""

import pytest

from harness.report import claim_positions as pos
from harness.report import claim_training as rules
from harness.report.claims import CONTRADICTS, QUALIFIED, SUPPORTS, Stored
from tests.harness.report.claim_frames import (
    attn_init_rows,
    ffn_rows,
    gradient_rows,
    heads_rows,
    norm_rows,
    positional_rows,
    scaling_train_rows,
    write_suite,
)


def _verdict(tmp_path, rule, rows) -> str:
    write_suite(tmp_path, "convergence-quick", rows)
    return rule(Stored(tmp_path)).verdict


@pytest.mark.parametrize("rnn_decay, rnn_acc, verdict", [
    (-5.0, 0.3, SUPPORTS), (-5.0, 0.95, QUALIFIED), (-0.5, 0.95, CONTRADICTS)])
def test_vanishing_gradients(tmp_path, rnn_decay, rnn_acc, verdict):
    rows = gradient_rows(rnn_decay, 0.0, rnn_acc)
    assert _verdict(tmp_path, rules.vanishing_gradients, rows) == verdict


@pytest.mark.parametrize("ratio, verdict", [(1.02, SUPPORTS), (1.5, CONTRADICTS)])
def test_qk_variance(tmp_path, ratio, verdict):
    assert _verdict(tmp_path, rules.qk_variance, attn_init_rows(var_ratio=ratio)) == verdict


@pytest.mark.parametrize("own, unit, verdict", [
    (0.1, 0.1, SUPPORTS), (0.3, 0.1, QUALIFIED), (0.3, 0.3, CONTRADICTS)])
def test_softmax_saturation(tmp_path, own, unit, verdict):
    rows = attn_init_rows(jac_off=own, jac_off_unit=unit)
    assert _verdict(tmp_path, rules.softmax_saturation, rows) == verdict


@pytest.mark.parametrize("steps, verdict", [
    ({(16, True): (100, 100), (16, False): (200, 250), (64, True): (100, 150),
      (64, False): (300, None)}, SUPPORTS),
    ({(16, True): (300, 350), (16, False): (100, 150), (64, True): (100, 150),
      (64, False): (300, 300)}, QUALIFIED),  # unscaled faster at d_k = 16 only
    ({(16, True): (100, 100), (16, False): (200, 250), (64, True): (None, 350),
      (64, False): (100, 150)}, CONTRADICTS),  # a censored run counts as its budget
])
def test_scale_factor_training(tmp_path, steps, verdict):
    rows = scaling_train_rows(steps)
    assert _verdict(tmp_path, rules.scale_factor_training, rows) == verdict


@pytest.mark.parametrize("flops, speed, verdict", [
    (lambda h: 2e5, lambda h: 9e4, SUPPORTS),
    (lambda h: 2e5, lambda h: 9e4 / h, QUALIFIED),
    (lambda h: 2e5 * h, lambda h: 9e4, CONTRADICTS)])
def test_heads_cost(tmp_path, flops, speed, verdict):
    rows = heads_rows({1: (200, 200), 4: (200, 200)}, flops, speed)
    assert _verdict(tmp_path, rules.heads_cost, rows) == verdict


@pytest.mark.parametrize("steps, verdict", [
    ({1: (400, None), 2: (200, 250), 4: (300, 300)}, SUPPORTS),
    ({1: (200, 300), 2: (250, 250), 4: (300, 300)}, QUALIFIED),  # inside the noise
    ({1: (100, 100), 2: (200, 200), 4: (300, 300)}, CONTRADICTS)])
def test_heads_quality(tmp_path, steps, verdict):
    assert _verdict(tmp_path, rules.heads_quality, heads_rows(steps)) == verdict


@pytest.mark.parametrize("past_four, verdict", [((3.17, 3.20), SUPPORTS),
                                                ((2.90, 2.91), QUALIFIED)])
def test_ffn_four(tmp_path, past_four, verdict):
    rows = ffn_rows({1: (3.30, 3.31), 4: (3.18, 3.19), 8: past_four})
    assert _verdict(tmp_path, rules.ffn_four, rows) == verdict


@pytest.mark.parametrize("bits, verdict", [
    ({1: (3.3, 3.3), 2: (3.2, 3.21), 4: (3.1, 3.1)}, SUPPORTS),
    ({1: (3.3, 3.3), 2: (3.2, 3.21), 4: (3.19, 3.22)}, QUALIFIED),
    ({1: (3.1, 3.1), 2: (3.2, 3.21), 4: (3.3, 3.3)}, CONTRADICTS)])
def test_ffn_bigger(tmp_path, bits, verdict):
    assert _verdict(tmp_path, rules.ffn_bigger, ffn_rows(bits)) == verdict


SIN = (0.99, 0.995)


@pytest.mark.parametrize("none, verdict", [
    ((0.10, 0.11), SUPPORTS),  # near chance (1/16) without positions
    ((0.60, 0.50), QUALIFIED),  # well above chance: the causal mask leaks order
    ((0.99, 0.999), CONTRADICTS)])
def test_order_needs_positions(tmp_path, none, verdict):
    rows = positional_rows({"sinusoidal": SIN, "none": none}, {"sinusoidal": SIN, "none": none})
    assert _verdict(tmp_path, pos.order_needs_positions, rows) == verdict


@pytest.mark.parametrize("at_2n, verdict", [
    ({"sinusoidal": (0.95, 0.95), "learned": (0.2, 0.25), "none": (0.1, 0.1)}, SUPPORTS),
    ({"sinusoidal": (0.5, 0.55), "learned": (0.2, 0.25), "none": (0.1, 0.1)}, QUALIFIED),
    ({"sinusoidal": (0.1, 0.12), "learned": (0.3, 0.3), "none": (0.3, 0.3)}, CONTRADICTS)])
def test_extrapolation(tmp_path, at_2n, verdict):
    acc = {"sinusoidal": SIN, "learned": SIN, "none": (0.5, 0.5)}
    assert _verdict(tmp_path, pos.extrapolation, positional_rows(acc, at_2n)) == verdict


@pytest.mark.parametrize("learned, verdict", [
    ((0.985, 0.99), SUPPORTS), ((0.90, 1.0), QUALIFIED), ((0.8, 0.8), CONTRADICTS)])
def test_learned_vs_sinusoidal(tmp_path, learned, verdict):
    acc = {"sinusoidal": SIN, "learned": learned}
    assert _verdict(tmp_path, pos.learned_vs_sinusoidal, positional_rows(acc, acc)) == verdict


def _norm(norm, cold, warm, seeds=2):
    return {(norm, d, w): loss[:seeds] for d in (6, 12)
            for w, loss in ((0, cold[d]), (50, warm[d]))}


@pytest.mark.parametrize("cold, seeds, verdict", [
    ({6: (3.0, 3.1), 12: (3.0, 3.1)}, 2, SUPPORTS),
    ({6: (3.0, 3.1), 12: (3.0, 3.1)}, 1, QUALIFIED),  # one seed: the noise is not measured
    ({6: (2.5, 2.6), 12: (3.0, 3.1)}, 2, QUALIFIED),  # only at the larger depth
    ({6: (2.5, 2.6), 12: (2.5, 2.6)}, 2, CONTRADICTS)])
def test_post_ln_warmup(tmp_path, cold, seeds, verdict):
    rows = norm_rows(_norm("post", cold, {6: (2.5, 2.6), 12: (2.5, 2.6)}, seeds))
    assert _verdict(tmp_path, pos.post_ln_warmup, rows) == verdict


@pytest.mark.parametrize("cold, seeds, verdict", [
    ({6: (2.1, 2.2), 12: (2.1, 2.2)}, 2, SUPPORTS),
    ({6: (2.1, 2.2), 12: (2.1, 2.2)}, 1, QUALIFIED),
    ({6: (3.0, 3.0), 12: (3.0, 3.0)}, 2, CONTRADICTS)])
def test_pre_ln_no_warmup(tmp_path, cold, seeds, verdict):
    rows = norm_rows(_norm("pre", cold, {6: (2.1, 2.2), 12: (2.1, 2.2)}, seeds))
    assert _verdict(tmp_path, pos.pre_ln_no_warmup, rows) == verdict


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
