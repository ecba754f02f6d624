"""Graph depth, sequential operations and path lengths on cases whose answer is known."""

import math

import pytest
import torch

import models
from harness.measure.structure import (
    graph_depth,
    max_path_length,
    path_ops,
    recurrent_path_length,
    sequential_ops,
)

D = 4


def test_graph_depth_of_a_chain_counts_its_ops():
    x = torch.randn(3, requires_grad=True)
    y = ((x * 2) + 1).sin().exp().neg()  # Mul, Add, Sin, Exp, Neg
    assert graph_depth(y) == 5


def test_graph_depth_of_a_diamond_takes_the_longest_branch():
    x = torch.randn(3, requires_grad=True)
    a = x * 2  # 1
    long = a.sin().cos().exp()  # 4
    short = a + 1  # 2
    assert graph_depth(long * short) == 5
    assert graph_depth(short * long) == 5
    assert graph_depth(short * (x - 1)) == 3  # the branch's length, not the node count (4)


def test_graph_depth_counts_no_leaves():
    x = torch.randn(3, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(3))
    assert graph_depth(x) == 0
    assert graph_depth(torch.randn(3)) == 0
    assert graph_depth(x * w) == 1  # two AccumulateGrad leaves under one Mul


def test_graph_depth_of_a_very_deep_chain_needs_no_recursion():
    x = torch.randn(2, requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0
    assert graph_depth(y) == 5000


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_sequential_ops_of_a_recurrent_cell_path_is_affine_in_n(kind):
    mixer = models.mixer(kind, D, rnn_impl="cell")
    d1, d2, d3 = (sequential_ops(mixer, n, D) for n in (4, 8, 12))
    assert d2 - d1 == d3 - d2 > 0
    assert (d2 - d1) % 4 == 0  # a whole number of ops per step


def test_sequential_ops_of_attention_and_fused_rnn_are_constant_in_n():
    for mixer in (models.mixer("self-attention", D, n_heads=2),
                  models.mixer("restricted-attention", D, n_heads=2, window=3),
                  models.mixer("convolutional", D),
                  models.mixer("lstm", D, rnn_impl="fused")):  # why the cell path is needed
        depths = {sequential_ops(mixer, n, D) for n in (4, 16, 64)}
        assert len(depths) == 1 and depths.pop() > 0


@pytest.mark.parametrize("n", [1, 2, 7, 16])
def test_self_attention_path_is_one_layer(n):
    assert max_path_length(lambda _: models.mixer("self-attention", D, n_heads=2), n, D, 3) == 1


@pytest.mark.parametrize("kernel_size", [2, 3, 4])
def test_contiguous_causal_conv_path_is_ceil_n_minus_1_over_k_minus_1(kernel_size):
    def layer(_: int) -> torch.nn.Module:
        return models.mixer("convolutional", D, kernel_size=kernel_size, padding="causal")

    for n in range(2, 12):
        assert max_path_length(layer, n, D, 12) == math.ceil((n - 1) / (kernel_size - 1))


@pytest.mark.parametrize("kernel_size", [3, 5])
def test_centred_conv_path_is_ceil_n_minus_1_over_half_k(kernel_size):
    def layer(_: int) -> torch.nn.Module:
        return models.mixer("convolutional", D, kernel_size=kernel_size)

    for n in range(2, 12):
        assert max_path_length(layer, n, D, 12) == math.ceil((n - 1) / (kernel_size // 2))


def dilated_layers(n: int, kernel_size: int) -> int:
    """Fewest L with (k-1)(2^L - 1) >= n-1: the reach of dilations 1, 2, 4, ..."""
    return next(L for L in range(1, n + 1) if (kernel_size - 1) * (2**L - 1) >= n - 1)


@pytest.mark.parametrize("kernel_size", [2, 3])
def test_dilated_conv_path_is_logarithmic(kernel_size):
    def layer(i: int) -> torch.nn.Module:
        return models.mixer("convolutional", D, kernel_size=kernel_size, padding="causal",
                            dilation=2**i)

    measured = {n: max_path_length(layer, n, D, 8) for n in (2, 3, 4, 5, 8, 9, 16, 17, 33, 64)}
    assert measured == {n: dilated_layers(n, kernel_size) for n in measured}
    if kernel_size == 2:  # log_k n exactly
        assert all(L == math.ceil(math.log2(n)) for n, L in measured.items())


def test_dilated_mixer_reaches_as_its_stack_of_layers_does():
    """One mixer with n_layers = L, dilated, reaches exactly when L dilated layers do (ReLUs
    between its layers; d = 16 so that no position's channels all die)."""
    d, n = 16, 20
    need = dilated_layers(n, 2)  # 5

    def mixer(n_layers: int) -> torch.nn.Module:
        return models.mixer("convolutional", d, kernel_size=2, padding="causal", n_layers=n_layers,
                            dilated=True)

    assert max_path_length(lambda _: mixer(need), n, d, 1) == 1
    assert max_path_length(lambda _: mixer(need - 1), n, d, 1) is None


@pytest.mark.parametrize("window", [2, 3, 5])
def test_causal_restricted_attention_path_is_ceil_n_minus_1_over_r_minus_1(window):
    def layer(_: int) -> torch.nn.Module:
        return models.mixer("restricted-attention", D, n_heads=2, window=window, causal=True)

    for n in (2, 3, 5, 8, 11):
        assert max_path_length(layer, n, D, 12) == math.ceil((n - 1) / (window - 1))


@pytest.mark.parametrize("window", [3, 4, 7])
def test_centred_restricted_attention_path_is_ceil_n_minus_1_over_half_r(window):
    def layer(_: int) -> torch.nn.Module:
        return models.mixer("restricted-attention", D, n_heads=2, window=window)

    for n in (2, 4, 7, 10):
        assert max_path_length(layer, n, D, 12) == math.ceil((n - 1) / (window // 2))


def test_max_path_length_is_none_when_the_stack_does_not_reach():
    def layer(_: int) -> torch.nn.Module:
        return models.mixer("convolutional", D, kernel_size=2, padding="causal")

    assert max_path_length(layer, 6, D, 4) is None
    assert max_path_length(layer, 6, D, 5) == 5


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_path_is_n_minus_1_steps(kind):
    mixer = models.mixer(kind, D, rnn_impl="cell")
    one_layer = max_path_length(lambda _: models.mixer(kind, D, rnn_impl="cell"), 9, D, 3)
    assert one_layer == 1  # a single layer connects: its path is in steps, not layers
    assert [recurrent_path_length(mixer, n, D) for n in (1, 2, 5, 9)] == [0, 1, 4, 8]


def test_recurrent_path_length_sees_no_steps_where_there_are_none():
    fused = models.mixer("lstm", D, rnn_impl="fused")
    attention = models.mixer("self-attention", D, n_heads=2)
    assert recurrent_path_length(fused, 6, D) == 0  # the kernel hides its loop
    assert recurrent_path_length(attention, 6, D) == 0
    conv = models.mixer("convolutional", D, kernel_size=2, padding="causal")
    assert recurrent_path_length(conv, 6, D) is None  # y[5] does not depend on x[0]


def test_path_ops_is_constant_for_attention_and_grows_for_recurrence():
    attention = models.mixer("self-attention", D, n_heads=2)
    assert len({path_ops(attention, n, D) for n in (2, 8, 16)}) == 1
    for kind, per_step in (("gru", 1), ("lstm", 2)):  # h = lerp(.., h, z); c = f c + i g
        mixer = models.mixer(kind, D, rnn_impl="cell")
        p8, p12, p16 = (path_ops(mixer, n, D) for n in (8, 12, 16))
        assert p12 - p8 == p16 - p12 == 4 * per_step


def test_path_measurements_leave_the_layer_alone():
    mixer = models.mixer("lstm", D, rnn_impl="cell")
    before = {k: v.clone() for k, v in mixer.state_dict().items()}
    recurrent_path_length(mixer, 3, D)
    assert all(v.dtype == torch.float32 for v in mixer.state_dict().values())
    assert all(torch.equal(before[k], v) for k, v in mixer.state_dict().items())
