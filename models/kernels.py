"""The fastest kernel for a linear map y = x W^T + b that this PyTorch build has for x.

On CPU in float32, F.linear runs the BLAS sgemm (MKL), which on some CPUs (AMD Zen with
AVX-512, where MKL takes a narrower code path) reaches about half of what oneDNN's own matmul
does; `tvr bench` measures both (columns peak_mm_flops_per_s, peak_onednn_flops_per_s). So on
CPU float32 the linear maps of attention and the FFN go through oneDNN, forward and backward;
the arithmetic is the same fp32 product (tests compare with F.linear). Elsewhere (CUDA,
bf16/fp16, float64, a build without oneDNN) it is F.linear.
"""

from __future__ import annotations

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


def uses_onednn(x: torch.Tensor) -> bool:
    """Eager CPU float32 only: under torch.compile, inductor picks its own GEMMs (and lowers
    the oneDNN op only for frozen, constant weights)."""
    return (_ONEDNN is not None and x.device.type == "cpu" and x.dtype == torch.float32
            and not torch.compiler.is_compiling())


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
           ) -> torch.Tensor:  # (..., d_in) -> (..., d_out)
    """F.linear(x, weight, bias), on oneDNN for CPU float32 (see the module docstring)."""
    if uses_onednn(x) and weight.dtype == torch.float32:
        return _OneDNNLinear.apply(x, weight, bias)
    return F.linear(x, weight, bias)
