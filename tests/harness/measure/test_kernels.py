"""harness.measure.kernels: every swap point's candidates give PyTorch's numbers and gradients
(a layer put on them by harness.measure.kernel_swap)."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from harness.measure import kernels
from harness.measure.flops import OpRecorder
from harness.measure.kernel_swap import use_kernels
from harness.measure.kernels import linear

needs_onednn = pytest.mark.skipif(kernels._ONEDNN is None, reason="build without oneDNN")
TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(autouse=True)
def _backend_restored():
    """Each test starts on the import-time default (a sweep in an earlier test may have
    set the measured one) and leaves the backend as it found it."""
    saved, choices = kernels._backend, dict(kernels._choice)
    kernels.use_linear_backend(kernels.ONEDNN if kernels._ONEDNN else kernels.F_LINEAR)
    yield
    kernels._backend = saved
    kernels._choice.update(choices)


def _ops(fn) -> set[str]:
    with OpRecorder() as rec:
        fn()
    return rec.ops


def _grads(fn, *tensors):
    out = fn(*tensors)
    out.backward(torch.ones_like(out) + torch.arange(out.shape[-1]) / out.shape[-1])
    grads = [t.grad for t in tensors if t is not None]
    for t in tensors:
        if t is not None:
            t.grad = None
    return out, grads


@needs_onednn
@pytest.mark.parametrize("backend", [kernels.ONEDNN, kernels.F_LINEAR])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "transposed-input", "weight-rows"])
def test_linear_matches_f_linear_with_gradients(backend, bias, layout):
    kernels.use_linear_backend(backend)
    x = torch.randn(4, 37, 64, requires_grad=True)
    w = torch.randn(3 * 96, 64, requires_grad=True)
    b = torch.randn(3 * 96, requires_grad=True) if bias else None

    def ours(x, w, b):
        if layout == "transposed-input":  # as the output of attention heads, (B, h, n) -> (B, n, h)
            x = x.transpose(0, 1)
        if layout == "weight-rows":  # as cross-attention's K/V rows of the fused in_proj
            return linear(x, w[96:], None if b is None else b[96:])
        return linear(x, w, b)

    def ref(x, w, b):
        if layout == "transposed-input":
            x = x.transpose(0, 1)
        if layout == "weight-rows":
            return F.linear(x, w[96:], None if b is None else b[96:])
        return F.linear(x, w, b)

    out, grads = _grads(ours, x, w, b)
    expected, expected_grads = _grads(ref, x, w, b)
    torch.testing.assert_close(out, expected, **TOL)
    for g, e in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e, **TOL)


@needs_onednn
def test_cpu_float32_runs_onednn_and_float64_runs_blas():
    w = torch.randn(8, 16)
    assert "mkldnn._linear_pointwise" in _ops(lambda: linear(torch.randn(2, 16), w))
    assert "aten.addmm" not in _ops(lambda: linear(torch.randn(2, 16), w, torch.randn(8)))
    double = _ops(lambda: linear(torch.randn(2, 16).double(), w.double(), None))
    assert "mkldnn._linear_pointwise" not in double and "aten.mm" in double


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_flop_counter_counts_it_like_f_linear(dtype):
    x = torch.randn(3, 5, 16, dtype=dtype, requires_grad=True)
    w = torch.randn(24, 16, dtype=dtype, requires_grad=True)

    def count(fn) -> int:
        with FlopCounterMode(display=False) as counter:
            fn(x, w, None).sum().backward()
        return counter.get_total_flops()

    assert count(linear) == count(F.linear) == 3 * 2 * 15 * 16 * 24  # forward + 2 backward


@needs_onednn
def test_double_backward_is_refused_not_wrong():
    x = torch.randn(2, 16, requires_grad=True)
    w = torch.randn(8, 16, requires_grad=True)
    # the square makes the incoming gradient depend on w: a true second derivative
    (gx,) = torch.autograd.grad(linear(x, w).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gx.sum().backward()


@pytest.mark.slow
def test_compiled_code_gets_f_linear():
    # inductor lowers the oneDNN op only for constant weights; compiled graphs take F.linear
    w, b = torch.randn(8, 16, requires_grad=True), torch.randn(8, requires_grad=True)
    compiled = torch.compile(lambda x: linear(x, w, b), backend="aot_eager", fullgraph=True)
    x = torch.randn(2, 16)
    torch.testing.assert_close(compiled(x), F.linear(x, w, b), **TOL)


@needs_onednn
def test_the_backend_set_is_the_one_that_runs():
    x, w, b = torch.randn(2, 16), torch.randn(8, 16), torch.randn(8)
    kernels.use_linear_backend(kernels.F_LINEAR)
    ops = _ops(lambda: linear(x, w, b))
    assert "mkldnn._linear_pointwise" not in ops and "aten.addmm" in ops
    assert kernels.linear_backend("cpu", torch.float32) == kernels.F_LINEAR
    kernels.use_linear_backend(kernels.ONEDNN)
    assert "mkldnn._linear_pointwise" in _ops(lambda: linear(x, w, b))
    assert kernels.linear_backend("cpu", torch.float32) == kernels.ONEDNN
    assert kernels.linear_backend("cpu", torch.float64) == kernels.F_LINEAR


@needs_onednn
def test_disabling_onednn_falls_back_to_f_linear(monkeypatch):
    kernels.use_linear_backend(kernels.ONEDNN)
    monkeypatch.setenv(kernels.DISABLE_ONEDNN_ENV, "1")
    assert kernels.linear_candidates("cpu", torch.float32) == (kernels.F_LINEAR,)
    assert kernels.linear_backend("cpu", torch.float32) == kernels.F_LINEAR
    x = torch.randn(3, 16, requires_grad=True)
    w = torch.randn(8, 16, requires_grad=True)
    assert "mkldnn._linear_pointwise" not in _ops(lambda: linear(x, w))
    out, grads = _grads(linear, x, w)
    expected, expected_grads = _grads(F.linear, x, w)
    torch.testing.assert_close(out, expected, **TOL)
    for g, e in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e, **TOL)
    monkeypatch.setenv(kernels.DISABLE_ONEDNN_ENV, "0")  # "0" disables nothing
    assert kernels.linear_candidates("cpu", torch.float32) == (kernels.ONEDNN, kernels.F_LINEAR)


def test_candidates_outside_cpu_float32_are_f_linear_only():
    assert kernels.linear_candidates("cpu", torch.float64) == (kernels.F_LINEAR,)
    assert kernels.linear_candidates("cpu", torch.bfloat16) == (kernels.F_LINEAR,)
    assert kernels.linear_candidates("cuda", torch.float32) == (kernels.F_LINEAR,)


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown linear backend"):
        kernels.use_linear_backend("mkl")


# ---------------------------------------------------------------- QKV, FFN, attention

SWAPS = [(kernels.QKV, kernels.QKV_FUSED), (kernels.QKV, kernels.QKV_SPLIT),
         pytest.param(kernels.FFN, kernels.FFN_ONEDNN_RELU, marks=needs_onednn),
         (kernels.FFN, kernels.FFN_SEPARATE),
         (kernels.ATTENTION, kernels.ATTN_SDPA), (kernels.ATTENTION, kernels.ATTN_MATH)]
# what each candidate leaves in the op trace: (an op it must run, an op it must not)
SIGNS = {kernels.QKV_FUSED: (None, None), kernels.QKV_SPLIT: (None, None),
         kernels.FFN_ONEDNN_RELU: (None, "aten.relu"), kernels.FFN_SEPARATE: ("aten.relu", None),
         kernels.ATTN_SDPA: ("aten._scaled_dot_product_flash_attention_for_cpu", "aten._softmax"),
         kernels.ATTN_MATH: ("aten._softmax", "aten._scaled_dot_product_flash_attention_for_cpu")}


@pytest.mark.parametrize("point,name", SWAPS)
def test_each_candidate_gives_pytorchs_encoder_layer_with_gradients(point, name):
    from models.blocks import EncoderLayer
    from models.reference import torch_reference

    kernels.use_backend(point, name)
    assert kernels.backend(point, "cpu", torch.float32) == name
    ours = use_kernels(EncoderLayer(32, 4, 64, attn_backend="auto"))
    for p in ours.parameters():  # non-zero biases, so a dropped bias shows
        p.data.add_(torch.randn_like(p) * 0.1)
    ref = torch_reference("transformer-layer", ours)
    x = torch.randn(2, 9, 32, requires_grad=True)
    ops = _ops(lambda: ours(x))
    must, must_not = SIGNS[name]
    assert (must is None or must in ops) and (must_not is None or must_not not in ops), ops
    out, (gx, *grads) = _grads(lambda x, *ps: ours(x), x, *ours.parameters())
    expected, (ex, *_) = _grads(ref, x)
    torch.testing.assert_close(out, expected, **TOL)
    torch.testing.assert_close(gx, ex, **TOL)
    named = dict(ref.named_parameters())
    for (k, _), g in zip(ours.named_parameters(), grads, strict=True):
        other = named[k.replace("in_proj.", "in_proj_").replace("ffn.", "")]
        torch.testing.assert_close(g, other.grad, **TOL)


def test_split_qkv_runs_three_matmuls_and_fused_one():
    x, w, b = torch.randn(2, 5, 8), torch.randn(24, 8), torch.randn(24)
    counts = {}
    for name in (kernels.QKV_FUSED, kernels.QKV_SPLIT):
        kernels.use_backend(kernels.QKV, name)
        with FlopCounterMode(display=False) as counter:
            q, k, v = kernels.qkv(x, w, b, [8, 8, 8])
        counts[name] = counter.get_total_flops()
        for got, rows in zip((q, k, v), (slice(0, 8), slice(8, 16), slice(16, 24)), strict=True):
            torch.testing.assert_close(got, F.linear(x, w[rows], b[rows]), **TOL)
    assert counts[kernels.QKV_FUSED] == counts[kernels.QKV_SPLIT] == 2 * 10 * 8 * 24


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
def test_fused_linear_relu_counts_and_differentiates_like_f_linear(bias):
    kernels.use_backend(kernels.FFN, kernels.FFN_ONEDNN_RELU)
    x = torch.randn(3, 5, 16, requires_grad=True)
    w = torch.randn(24, 16, requires_grad=True)
    b = torch.randn(24, requires_grad=True) if bias else None
    out, grads = _grads(kernels.linear_relu, x, w, b)
    expected, expected_grads = _grads(lambda *a: F.relu(F.linear(*a)), x, w, b)
    torch.testing.assert_close(out, expected, **TOL)
    for g, e in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e, **TOL)
    with FlopCounterMode(display=False) as counter:
        kernels.linear_relu(x, w, b)
    assert counter.get_total_flops() == 2 * 15 * 16 * 24


def test_disabling_a_candidate_falls_back(monkeypatch):
    for point, name in ((kernels.QKV, kernels.QKV_FUSED), (kernels.ATTENTION, kernels.ATTN_SDPA),
                        (kernels.FFN, kernels.FFN_ONEDNN_RELU)):
        kernels.use_backend(point, name)
    monkeypatch.setenv(kernels.DISABLE_ENV, "qkv:fused, attention:sdpa,ffn:onednn-relu")
    assert kernels.candidates(kernels.QKV, "cpu", torch.float32) == (kernels.QKV_SPLIT,)
    assert kernels.backend(kernels.QKV) == kernels.QKV_SPLIT
    assert kernels.backend(kernels.ATTENTION) == kernels.ATTN_MATH
    assert kernels.backend(kernels.FFN) == kernels.FFN_SEPARATE
    x = torch.randn(2, 3, 16)
    assert "aten.relu" in _ops(lambda: kernels.linear_relu(x, torch.randn(8, 16)))
    monkeypatch.setenv(kernels.DISABLE_ENV, "")
    monkeypatch.setenv(kernels.DISABLE_ONEDNN_ENV, "1")  # removes the oneDNN FFN fusion too
    assert kernels.candidates(kernels.FFN, "cpu", torch.float32) == (kernels.FFN_SEPARATE,)
    assert kernels.backend(kernels.FFN) == kernels.FFN_SEPARATE
    assert kernels.backend(kernels.QKV) == kernels.QKV_FUSED


def test_fallbacks_are_never_removed_and_unknown_kernels_refused(monkeypatch):
    monkeypatch.setenv(kernels.DISABLE_ENV, "qkv:split,attention:math,ffn:linear+relu")
    assert kernels.candidates(kernels.QKV, "cpu", torch.float64)[-1] == kernels.QKV_SPLIT
    assert kernels.candidates(kernels.ATTENTION, "cpu", torch.float64)[-1] == kernels.ATTN_MATH
    assert kernels.candidates(kernels.FFN, "cpu", torch.float64) == (kernels.FFN_SEPARATE,)
    with pytest.raises(ValueError, match="unknown kernel"):
        kernels.use_backend(kernels.FFN, "gelu")


@pytest.mark.parametrize("backend", [pytest.param(kernels.ONEDNN, marks=needs_onednn),
                                     kernels.F_LINEAR])
def test_the_output_head_runs_the_swap_point_with_tied_gradients(backend):
    from models.blocks import OutputHead, TokenEmbedding

    kernels.use_linear_backend(backend)
    embed = TokenEmbedding(11, 16)
    head = use_kernels(OutputHead(embed, 11, 16, tie=True, final_norm=True))
    tokens = torch.tensor([[1, 4, 9], [2, 2, 10]])
    ops = _ops(lambda: head(embed(tokens)))
    assert ("mkldnn._linear_pointwise" in ops) == (backend == kernels.ONEDNN)
    out = head(embed(tokens))
    out.backward(torch.arange(out.numel(), dtype=out.dtype).view_as(out) / out.numel())
    grads = [p.grad.clone() for p in (embed.weight, head.norm.weight)]
    embed.weight.grad = head.norm.weight.grad = None
    expected = F.linear(head.norm(embed(tokens)), embed.weight)  # nn.Linear's arithmetic
    expected.backward(torch.arange(out.numel(), dtype=out.dtype).view_as(out) / out.numel())
    torch.testing.assert_close(out, expected, **TOL)
    for g, p in zip(grads, (embed.weight, head.norm.weight), strict=True):
        torch.testing.assert_close(g, p.grad, **TOL)
