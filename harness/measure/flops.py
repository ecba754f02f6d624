"""FLOPs and kernels of one callable.

FLOPs: torch.utils.flop_counter, plus formulas for the kernels it does not know (CPU flash
attention, oneDNN and cuDNN RNNs), so counts do not depend on which kernel ran. Kernels: the
attention / RNN kernels a call actually dispatched to, recorded with a TorchDispatchMode.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

aten = torch.ops.aten

# ---------------------------------------------------------------- FLOP formulas
# flop_counter counts 0 for the CPU flash-attention kernel and the oneDNN / cuDNN RNN kernels,
# and its fused-attention backward formulas include the forward recomputation of Q K^T that
# flash kernels do. We count algorithmic matmul FLOPs, the convention flop_counter uses for
# every other op, so a fused kernel and the explicit path it replaces count the same:
# attention backward = 2x its forward (dQ, dK, dV, dP), an RNN's backward = 2x its forward.


def _core_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return 2 * sdpa_flop_count(query, key, value)


def _core_forward(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _rnn_layer_flops(input_shape, w_ih_shape, w_hh_shape) -> int:
    """2 * tokens * (G*H) * (d_in + H): the input and recurrent products of every gate."""
    gates_h, d_in = w_ih_shape
    tokens = 1
    for s in input_shape[:-1]:
        tokens *= s
    return 2 * tokens * gates_h * (d_in + w_hh_shape[1])


def _mkldnn_rnn(input, w_ih, w_hh, *args, out_shape=None, **kwargs) -> int:
    return _rnn_layer_flops(input, w_ih, w_hh)


def _mkldnn_rnn_backward(input, w_ih, w_hh, *args, out_shape=None, **kwargs) -> int:
    return 2 * _rnn_layer_flops(input, w_ih, w_hh)  # grads of the inputs and of the weights


def _cudnn_flops(input, weights, num_layers: int) -> int:
    per_layer = len(weights) // num_layers  # 4 with biases, 2 without
    total, shape = 0, input
    for layer in range(num_layers):
        w_ih, w_hh = weights[layer * per_layer], weights[layer * per_layer + 1]
        total += _rnn_layer_flops(shape, w_ih, w_hh)
        shape = (*shape[:-1], w_hh[1])  # the next layer reads hidden states
    return total


def _cudnn_rnn(input, weight, stride0, weight_buf, hx, cx, mode, hidden, proj, num_layers,
               *args, out_shape=None, **kwargs) -> int:
    return _cudnn_flops(input, weight, num_layers)


def _cudnn_rnn_backward(input, weight, stride0, weight_buf, hx, cx, output, grad_output,
                        grad_hy, grad_cy, mode, hidden, proj, num_layers,
                        *args, out_shape=None, **kwargs) -> int:
    return 2 * _cudnn_flops(input, weight, num_layers)


FLOP_FORMULAS = {
    aten._scaled_dot_product_flash_attention_for_cpu: _core_forward,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _core_backward,
    aten._scaled_dot_product_flash_attention_backward: _core_backward,
    aten._scaled_dot_product_efficient_attention_backward: _core_backward,
    aten._scaled_dot_product_cudnn_attention_backward: _core_backward,
    aten.mkldnn_rnn_layer: _mkldnn_rnn,
    aten.mkldnn_rnn_layer_backward: _mkldnn_rnn_backward,
    aten._cudnn_rnn: _cudnn_rnn,
    aten._cudnn_rnn_backward: _cudnn_rnn_backward,
}


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of fn: flop_counter's matmul-class count plus FLOP_FORMULAS."""
    with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as counter:
        fn()
    return int(counter.get_total_flops())


# ---------------------------------------------------------------- which kernel ran

_KERNEL_OPS = {
    "aten._scaled_dot_product_flash_attention_for_cpu": "sdpa-flash",
    "aten._scaled_dot_product_flash_attention": "sdpa-flash",
    "aten._scaled_dot_product_efficient_attention": "sdpa-efficient",
    "aten._scaled_dot_product_cudnn_attention": "sdpa-cudnn",
    "aten._scaled_dot_product_fused_attention_overrideable": "sdpa-fused",
    "aten.mkldnn_rnn_layer": "onednn-rnn",
    "aten._cudnn_rnn": "cudnn-rnn",
}


class OpRecorder(TorchDispatchMode):
    """The set of ATen op packets a block of code dispatches (e.g. "aten.mkldnn_rnn_layer")."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def kernels_used(fn: Callable[[], object]) -> str:
    """The attention / RNN kernels one forward call dispatched to, e.g. "sdpa-flash",
    "math" (explicit softmax(QK^T)V), "aten-loop" (a recurrence as per-step ATen ops)."""
    with OpRecorder() as rec:
        fn()
    return _kernel_name(rec.ops)


# Ops that multiply sequence positions with each other (Q K^T, A V): where attention's
# O(n^2 d) (or restricted attention's O(r n d)) lives. Projections run as addmm/mm, which
# are position-wise (O(n d^2)) and so not in this set.
SEQUENCE_PRODUCT_OPS = frozenset({
    "aten.bmm", "aten.baddbmm",
    "aten._scaled_dot_product_flash_attention_for_cpu",
    "aten._scaled_dot_product_flash_attention",
    "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_cudnn_attention",
})


def flops_and_kernels(fn: Callable[[], object]) -> tuple[int, int, str]:
    """(all FLOPs, FLOPs in SEQUENCE_PRODUCT_OPS, kernels_used) from one call: dispatch-mode
    passes are costly on long recurrent loops (thousands of Python-level dispatches each)."""
    with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as counter, \
            OpRecorder() as rec:
        fn()
    by_op = counter.get_flop_counts().get("Global", {})
    attn = sum(v for op, v in by_op.items() if str(op) in SEQUENCE_PRODUCT_OPS)
    return int(counter.get_total_flops()), int(attn), _kernel_name(rec.ops)


def _kernel_name(ops: set[str]) -> str:
    found = sorted({name for op, name in _KERNEL_OPS.items() if op in ops})
    if not found and "aten._safe_softmax" in ops:  # sdpa's own math fallback (masks, dropout)
        found = ["sdpa-math"]
    if not found and "aten._softmax" in ops:  # our written-out softmax(QK^T)V
        found = ["math"]
    if not found and {"aten.sigmoid", "aten.sigmoid_"} & ops:
        found = ["aten-loop"]
    return "+".join(found) or "none"
