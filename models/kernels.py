"""The kernel behind every linear map y = x W^T + b of our layers: one swap point.

On CPU in float32 there are two candidates: F.linear, which runs the BLAS sgemm (MKL), and
oneDNN's own matmul. Which is faster depends on the CPU (on AMD Zen with AVX-512 MKL takes a
narrower path and reaches about half of oneDNN's rate; on an AVX2-only Zen torch.mm was the
faster), so the harness measures both on the machine at hand and sets the winner with
use_linear_backend (harness.measure.kernel_choice); until then oneDNN is used where it exists.
$TVR_DISABLE_ONEDNN=1 removes the oneDNN candidate, as on a build without it. Both run the
same fp32 product (tests compare with F.linear). Elsewhere (CUDA, bf16/fp16, float64) it is
F.linear.
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
