import itertools
import math
import time

import pytest
import torch
from torch import nn

import models
from harness.measure.flops import count_flops, flops_and_kernels, kernels_used
from harness.measure.timing import (
    MIN_BLOCK_S,
    MIN_SAMPLES,
    layer_calls,
    measure_layer,
    saved_tensor_bytes,
    time_fn,
)
from models.blocks import MultiHeadAttention

B, N, D = 2, 24, 16  # n != d so n and d terms cannot be confused


def _forward_flops(kind: str, **cfg) -> int:
    module = models.mixer(kind, D, **cfg)
    return count_flops(lambda: module(torch.randn(B, N, D)))


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_attention_flops_match_closed_form(backend):
    # projections Q, K, V, O: 4 x 2nd^2; scores and values: 2 x 2n^2d
    expected = B * (8 * N * D**2 + 4 * N**2 * D)
    assert _forward_flops("self-attention", n_heads=4, attn_backend=backend) == expected


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_attention_flops_drop_with_d_k(backend):
    """A query/key size d_k below d/h (Table 3, rows B) shrinks W^Q, W^K and Q K^T only:
    projections 2nd (2 h d_k + d) + 2nd^2, scores 2 n^2 h d_k, values 2 n^2 d."""
    h, counted = 4, {}
    for d_k in (1, 2, D // h):
        mha = MultiHeadAttention(D, h, attn_backend=backend, d_k=d_k)
        x = torch.randn(B, N, D)
        counted[d_k] = flops_and_kernels(lambda mha=mha, x=x: mha(x))[:2]
        attn = B * (2 * N**2 * h * d_k + 2 * N**2 * D)
        assert counted[d_k] == (B * 2 * N * D * (2 * h * d_k + 2 * D) + attn, attn)
        assert count_flops(layer_calls(mha, x)[1]) == 3 * counted[d_k][0]  # fwd + bwd
    totals = [counted[d_k] for d_k in sorted(counted)]
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(totals))


@pytest.mark.parametrize("impl", ["fused", "cell"])
@pytest.mark.parametrize("kind,gates", [("lstm", 4), ("gru", 3)])
def test_rnn_flops_match_closed_form(kind, gates, impl):
    # input and recurrent product of every gate: 2 * G * (nd^2 + nd^2) = 4G nd^2
    expected = B * 4 * gates * N * D**2
    assert _forward_flops(kind, rnn_impl=impl) == expected


def test_forward_backward_flops_do_not_depend_on_attention_kernel():
    counts = {}
    for backend in ("math", "sdpa"):
        module = models.mixer("self-attention", D, n_heads=4, attn_backend=backend)
        counts[backend] = count_flops(layer_calls(module, torch.randn(B, N, D))[1])
    assert counts["math"] == counts["sdpa"] == 3 * B * (8 * N * D**2 + 4 * N**2 * D)


def test_fused_lstm_backward_counts_like_cells_but_initial_state_grad():
    counts = {}
    for impl in ("fused", "cell"):
        module = models.mixer("lstm", D, rnn_impl=impl)
        counts[impl] = count_flops(layer_calls(module, torch.randn(B, N, D))[1])
    # the fused kernel also forms dL/dh0 (one (B, 4d) x (4d, d) product) that cells skip
    assert counts["fused"] - counts["cell"] == 2 * B * 4 * D * D


def test_saved_bytes_hand_computed_for_linear_relu():
    # Linear saves its input (B*n*d floats); ReLU saves its output (B*n*2d floats);
    # the weight is a parameter and not counted.
    module = nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU())
    x = torch.randn(B, N, D, requires_grad=True)
    saved = saved_tensor_bytes(lambda: module(x), module.parameters())
    assert saved == 4 * (B * N * D + B * N * 2 * D)


def test_saved_bytes_deduplicate_one_storage_saved_twice():
    x = torch.randn(B, N, D, requires_grad=True)
    assert saved_tensor_bytes(lambda: x * x) == 4 * B * N * D


def test_attention_memory_has_quadratic_term_only_in_math_backend():
    def saved(backend: str, n: int) -> int:
        module = models.mixer("self-attention", D, n_heads=2, attn_backend=backend)
        x = torch.randn(1, n, D, requires_grad=True)
        return saved_tensor_bytes(lambda: module(x), module.parameters())

    # second differences in n vanish for a linear footprint, not for a quadratic one
    for backend, quadratic in (("math", True), ("sdpa", False)):
        a, b, c = (saved(backend, n) for n in (32, 64, 96))
        assert ((c - b) - (b - a) != 0) == quadratic, backend


def test_kernels_used_names_the_path_that_ran():
    x = torch.randn(B, N, D)
    assert kernels_used(lambda: models.mixer("self-attention", D, attn_backend="math")(x)) == "math"
    assert kernels_used(lambda: models.mixer("self-attention", D)(x)).startswith("sdpa")
    assert kernels_used(lambda: models.mixer("lstm", D, rnn_impl="cell")(x)) == "aten-loop"
    # sdpa with a mask falls back to its own math path on CPU: named, not "none"
    restricted = models.mixer("restricted-attention", D, window=4, attn_backend="sdpa")
    assert kernels_used(lambda: restricted(x)) == "sdpa-math"


def test_time_fn_reports_median_iqr_and_runs():
    t = time_fn(lambda: torch.randn(64, 64) @ torch.randn(64, 64), torch.device("cpu"),
                min_run_time=0.02)
    assert t.median_ms > 0 and t.iqr_ms >= 0 and t.runs >= MIN_SAMPLES


def test_time_fn_takes_several_samples_of_a_slow_call():
    t = time_fn(lambda: time.sleep(0.02), torch.device("cpu"), min_run_time=0.01, warmup=0)
    assert t.runs >= MIN_SAMPLES and t.median_ms == pytest.approx(20, abs=10)


@pytest.mark.parametrize("first, runs", [
    ((10, 2), 10 * MIN_SAMPLES),  # two blocks of 10: three more of 10, never more than torch's
    ((100, 1), 100 + (MIN_SAMPLES - 1) * math.ceil(MIN_BLOCK_S / 0.0009)),  # four of 23
])
def test_added_samples_are_blocks_of_the_fewest_calls_that_last_min_block_s(
        monkeypatch, first, runs):
    """A 0.9 ms call, whichever blocks torch's autorange chose for it (blocks of 10 calls
    where its timer's overhead is under 0.9 us, else of 100): the samples added are blocks
    of the fewest calls that last MIN_BLOCK_S, at most torch's. torch's timer is given those
    per-call times (a real spin's vary with the machine's load, and so would torch's
    choice); what is tested is the rule applied to them."""
    from torch.utils.benchmark.utils.common import Measurement, TaskSpec

    spec = TaskSpec("fn()", "pass")
    number, blocks = first

    def measured(n: int, count: int) -> Measurement:
        return Measurement(n, [n * 0.0009] * count, spec)

    monkeypatch.setattr(torch.utils.benchmark.Timer, "blocked_autorange",
                        lambda self, min_run_time: measured(number, blocks))
    monkeypatch.setattr(torch.utils.benchmark.Timer, "timeit", lambda self, n: measured(n, 1))
    t = time_fn(lambda: None, torch.device("cpu"), min_run_time=0.01, warmup=0)
    assert t.runs == runs and t.median_ms == pytest.approx(0.9)


def test_measure_layer_row_is_complete():
    row = measure_layer(models.mixer("gru", D), torch.randn(B, N, D), min_run_time=0.01)
    for key in ("kernel", "flops_fwd", "flops_fwdbwd", "saved_bytes", "fwd_ms", "fwd_iqr_ms",
                "fwd_runs", "fwdbwd_ms", "fwdbwd_tokens_per_s"):
        assert key in row
    assert row["fwdbwd_tokens_per_s"] == pytest.approx(B * N / (row["fwdbwd_ms"] / 1e3))


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_attention_products_are_split_from_projections(backend):
    module = models.mixer("self-attention", D, n_heads=4, attn_backend=backend)
    total, attn, _ = flops_and_kernels(lambda: module(torch.randn(B, N, D)))
    assert attn == B * 4 * N**2 * D and total - attn == B * 8 * N * D**2
    lstm = models.mixer("lstm", D, rnn_impl="cell")
    assert flops_and_kernels(lambda: lstm(torch.randn(B, N, D)))[1] == 0
