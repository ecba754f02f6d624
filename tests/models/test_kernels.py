"""models.kernels.linear: F.linear's numbers and gradients, on oneDNN for CPU float32."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from harness.measure.flops import OpRecorder
from models import kernels
from models.kernels import linear

needs_onednn = pytest.mark.skipif(kernels._ONEDNN is None, reason="build without oneDNN")
TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(autouse=True)
def _backend_restored():
    """Each test starts on the import-time default (a sweep in an earlier test may have
    set the measured one) and leaves the backend as it found it."""
    saved = kernels._backend
    kernels.use_linear_backend(kernels.ONEDNN if kernels._ONEDNN else kernels.F_LINEAR)
    yield
    kernels._backend = saved


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
