"""The kernels the harness may run a layer's linear maps, QKV, FFN and attention on: the
swap points, each with candidates that compute the same numbers.

models/ reads as the paper (nn.Linear projections, F.relu between the FFN's two maps);
harness.measure.kernel_swap puts a built model's blocks on these functions, and
harness.measure.kernel_choice measures which candidate is fastest on the machine at hand.

The linear maps y = x W^T + b: on CPU in float32 there are two candidates, F.linear, which
runs the BLAS sgemm (MKL), and oneDNN's own matmul. Which is faster depends on the CPU (on AMD
Zen with AVX-512 MKL takes a narrower path and reaches about half of oneDNN's rate; on an
AVX2-only Zen torch.mm was the faster), so the harness measures both on the machine at hand
and sets the winner with use_linear_backend (harness.measure.kernel_choice); until then oneDNN
is used where it exists. $TVR_DISABLE_ONEDNN=1 removes the oneDNN candidate, as on a build
without it. Both run the same fp32 product (tests compare with F.linear). Elsewhere (CUDA,
bf16/fp16, float64) it is F.linear.

The other swap points (QKV, FFN, ATTENTION) work alike: each has candidates that compute the
same numbers (tests compare each with PyTorch's layers), a current choice set by use_backend
from the harness's measurement, and $TVR_DISABLE_KERNELS ("point:name,...") to remove one.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.utils import flop_counter

# oneDNN's fused linear (what torch.compile emits for CPU linears); absent without oneDNN.
_ONEDNN = getattr(torch.ops.mkldnn, "_linear_pointwise", None) \
    if torch.backends.mkldnn.is_available() else None


def onednn_mm(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """a (T, k) @ w (m, k)^T + b by oneDNN; strided (transposed) views are read as they are."""
    return _ONEDNN(a, w, b, "none", [], "")


class _OneDNNLinear(torch.autograd.Function):
    """F.linear's forward and backward, each product done by oneDNN."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])  # (T, d_in)
        ctx.save_for_backward(x2, w)
        ctx.has_bias = b is not None
        return onednn_mm(x2, w, b).view(*x.shape[:-1], w.shape[0])  # (..., d_out)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        x2, w = ctx.saved_tensors
        g2 = grad.reshape(-1, grad.shape[-1])  # (T, d_out)
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = onednn_mm(g2, w.t(), None).view(*grad.shape[:-1], w.shape[1])  # g W
        if ctx.needs_input_grad[1]:
            gw = onednn_mm(g2.t(), x2.t(), None)  # g^T x: (d_out, d_in)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g2.sum(0)
        return gx, gw, gb


def _linear_flops(input_shape, weight_shape, *args, out_shape=None, **kwargs) -> int:
    """2 T k m for input (T, k) and weight (m, k), as flop_counter counts F.linear."""
    tokens = 1
    for s in input_shape[:-1]:
        tokens *= s
    return 2 * tokens * input_shape[-1] * weight_shape[0]


# The FLOP counter knows no formula for the oneDNN op; without one, every FlopCounterMode
# would silently miss the projections and FFN that go through it.
if _ONEDNN is not None and _ONEDNN not in flop_counter.flop_registry:
    flop_counter.register_flop_formula(_ONEDNN)(_linear_flops)


DISABLE_ONEDNN_ENV = "TVR_DISABLE_ONEDNN"
ONEDNN, F_LINEAR = "onednn", "F.linear"  # the linear backends' names, as rows record them


def onednn_disabled() -> bool:
    """Whether $TVR_DISABLE_ONEDNN removes the oneDNN candidate (any value but "", "0")."""
    return os.environ.get(DISABLE_ONEDNN_ENV, "") not in ("", "0")


def uses_onednn(x: torch.Tensor) -> bool:
    """Whether oneDNN is a candidate for x: eager CPU float32 only (under torch.compile,
    inductor picks its own GEMMs and lowers the oneDNN op only for frozen, constant
    weights), and not disabled."""
    return (_ONEDNN is not None and x.device.type == "cpu" and x.dtype == torch.float32
            and not torch.compiler.is_compiling() and not onednn_disabled())


def linear_candidates(device: torch.device | str, dtype: torch.dtype) -> tuple[str, ...]:
    """The backends linear() can run for inputs of this device and dtype, F.linear last."""
    onednn = (_ONEDNN is not None and torch.device(device).type == "cpu"
              and dtype == torch.float32 and not onednn_disabled())
    return (ONEDNN, F_LINEAR) if onednn else (F_LINEAR,)


_backend = ONEDNN if _ONEDNN is not None else F_LINEAR  # where oneDNN is a candidate


def use_linear_backend(name: str) -> None:
    """Run linear() on `name` (ONEDNN or F_LINEAR) wherever oneDNN is a candidate; ValueError
    for an unknown name, or ONEDNN where this build lacks it."""
    global _backend
    if name not in (ONEDNN, F_LINEAR):
        raise ValueError(f"unknown linear backend {name!r}; valid: {ONEDNN}, {F_LINEAR}")
    if name == ONEDNN and _ONEDNN is None:
        raise ValueError("linear backend 'onednn': this torch build has no oneDNN")
    _backend = name


def linear_backend(device: torch.device | str = "cpu",
                   dtype: torch.dtype = torch.float32) -> str:
    """The backend linear() runs for inputs of this device and dtype."""
    return _backend if _backend in linear_candidates(device, dtype) else F_LINEAR


# Each backend's linear map, called directly (to time one against the other).
LINEAR_IMPLS = {ONEDNN: _OneDNNLinear.apply, F_LINEAR: F.linear}


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
           ) -> torch.Tensor:  # (..., d_in) -> (..., d_out)
    """F.linear(x, weight, bias), on the chosen backend (see the module docstring)."""
    if _backend == ONEDNN and weight.dtype == torch.float32 and uses_onednn(x):
        return _OneDNNLinear.apply(x, weight, bias)
    return F.linear(x, weight, bias)


# ---------------------------------------------------------------- the other swap points

QKV, FFN, ATTENTION = "qkv", "ffn", "attention"
LINEAR = "linear"
QKV_FUSED, QKV_SPLIT = "fused", "split"  # one (T, 3d) matmul, or one per Q, K, V
FFN_SEPARATE, FFN_ONEDNN_RELU = "linear+relu", "onednn-relu"  # oneDNN's bias+ReLU post-op
ATTN_SDPA, ATTN_MATH = "sdpa", "math"
DISABLE_ENV = "TVR_DISABLE_KERNELS"


def disabled(point: str, name: str) -> bool:
    """Whether $TVR_DISABLE_KERNELS (comma-separated "point:name") removes this candidate;
    $TVR_DISABLE_ONEDNN removes every oneDNN one."""
    if onednn_disabled() and name in (ONEDNN, FFN_ONEDNN_RELU):
        return True
    return f"{point}:{name}" in {s.strip() for s in os.environ.get(DISABLE_ENV, "").split(",")}


def candidates(point: str, device: torch.device | str, dtype: torch.dtype) -> tuple[str, ...]:
    """The candidates of a swap point for this device and dtype, the fallback last (the
    fallback is never removed: a point always has one)."""
    if point == LINEAR:
        return linear_candidates(device, dtype)
    onednn = ONEDNN in linear_candidates(device, dtype)
    every = {QKV: (QKV_FUSED, QKV_SPLIT),
             FFN: (FFN_ONEDNN_RELU, FFN_SEPARATE) if onednn else (FFN_SEPARATE,),
             ATTENTION: (ATTN_SDPA, ATTN_MATH)}[point]
    return tuple(n for n in every[:-1] if not disabled(point, n)) + every[-1:]


_choice = {QKV: QKV_FUSED, FFN: FFN_SEPARATE, ATTENTION: ATTN_SDPA}  # until measured


def use_backend(point: str, name: str) -> None:
    """Run swap point `point` on candidate `name` wherever that candidate applies."""
    if point == LINEAR:
        return use_linear_backend(name)
    valid = {QKV: (QKV_FUSED, QKV_SPLIT), FFN: (FFN_ONEDNN_RELU, FFN_SEPARATE),
             ATTENTION: (ATTN_SDPA, ATTN_MATH)}
    if name not in valid.get(point, ()):
        raise ValueError(f"unknown kernel {point}:{name!r}; valid: {valid.get(point)}")
    _choice[point] = name


def backend(point: str, device: torch.device | str = "cpu",
            dtype: torch.dtype = torch.float32) -> str:
    """The candidate `point` runs for inputs of this device and dtype."""
    if point == LINEAR:
        return linear_backend(device, dtype)
    options = candidates(point, device, dtype)
    return _choice[point] if _choice[point] in options else options[-1]


def qkv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
        sizes: list[int]) -> tuple[torch.Tensor, ...]:
    """linear(x, weight, bias) split into `sizes` along the last dim: Q, K, V of one
    self-attention, as one fused matmul or one matmul each (the chosen QKV backend)."""
    return QKV_IMPLS[backend(QKV, x.device, x.dtype)](x, weight, bias, sizes)


def _qkv_fused(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               sizes: list[int]) -> tuple[torch.Tensor, ...]:
    return linear(x, weight, bias).split(sizes, dim=-1)


def _qkv_split(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               sizes: list[int]) -> tuple[torch.Tensor, ...]:
    bs = bias.split(sizes) if bias is not None else [None] * len(sizes)
    return tuple(linear(x, w, b) for w, b in zip(weight.split(sizes), bs, strict=True))


QKV_IMPLS = {QKV_FUSED: _qkv_fused, QKV_SPLIT: _qkv_split}


class _OneDNNLinearReLU(torch.autograd.Function):
    """relu(x W^T + b) with the bias and ReLU fused into oneDNN's matmul (a post-op: the
    (T, d_ff) pre-activation is never written); backward masks by the saved output, as
    aten's relu backward does."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        h = _ONEDNN(x2, w, b, "relu", [], "")
        ctx.save_for_backward(x2, w, h)
        ctx.has_bias = b is not None
        return h.view(*x.shape[:-1], w.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        x2, w, h = ctx.saved_tensors
        g2 = torch.ops.aten.threshold_backward(grad.reshape(h.shape), h, 0)
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = onednn_mm(g2, w.t(), None).view(*grad.shape[:-1], w.shape[1])
        if ctx.needs_input_grad[1]:
            gw = onednn_mm(g2.t(), x2.t(), None)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g2.sum(0)
        return gx, gw, gb


def linear_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
                ) -> torch.Tensor:  # (..., d_in) -> (..., d_out)
    """F.relu(F.linear(x, weight, bias)) on the chosen FFN backend."""
    if (backend(FFN, x.device, x.dtype) == FFN_ONEDNN_RELU and weight.dtype == torch.float32
            and uses_onednn(x)):
        return _OneDNNLinearReLU.apply(x, weight, bias)
    return _linear_then_relu(x, weight, bias)


def _linear_then_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
                      ) -> torch.Tensor:
    return F.relu(linear(x, weight, bias))


# Each FFN backend's relu(linear(...)), called directly (to time one against the other).
FFN_IMPLS = {FFN_ONEDNN_RELU: _OneDNNLinearReLU.apply, FFN_SEPARATE: _linear_then_relu}
