"""Timing, FLOPs, activation memory and machine facts for one callable.

Timing: warm-up, then torch.utils.benchmark's blocked_autorange on CPU, CUDA events around
each call (with a device sync) on GPU. FLOPs: torch.utils.flop_counter, plus formulas for
the kernels it does not know (CPU flash attention, oneDNN and cuDNN RNNs), so counts do not
depend on which kernel ran. Memory: bytes of tensors autograd saves for backward (device
independent, deduplicated by storage) and, on CUDA, the allocator's peak.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

# torch.utils.benchmark imports cpp_extension, which warns "No CUDA runtime is found" on
# CPU-only machines with a CUDA build of torch; that is expected here and not the user's concern.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
from torch.utils import benchmark  # noqa: E402

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


# ---------------------------------------------------------------- memory


def saved_tensor_bytes(fn: Callable[[], object], params: Iterable[torch.Tensor] = ()) -> int:
    """Bytes autograd saves for backward during one forward call of fn.

    Deduplicated by storage (a tensor saved twice, or two views of one buffer, count once).
    Storages of `params` are left out: weights exist whether or not anything is saved, and
    autograd often saves them as views (weight.t()) that no isinstance check would catch.
    """
    skip = {p.untyped_storage().data_ptr() for p in params}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(seen.values())


def cuda_peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak bytes allocated above the pre-call baseline during one call (CUDA only)."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - base)


# ---------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    median_ms: float
    iqr_ms: float
    runs: int  # calls whose time the median summarises


def _cuda_timing(fn: Callable[[], object], device: torch.device, min_run_time: float) -> Timing:
    times: list[float] = []
    while sum(times) < min_run_time * 1e3 or len(times) < MIN_SAMPLES:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    q = statistics.quantiles(times, n=4)
    return Timing(statistics.median(times), q[2] - q[0], len(times))


MIN_SAMPLES = 5  # timed blocks per measurement, at least (CUDA: timed calls)


def time_fn(
    fn: Callable[[], object], device: torch.device, min_run_time: float = 0.2, warmup: int = 2
) -> Timing:
    """Median and IQR of fn's wall time after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        return _cuda_timing(fn, device, min_run_time)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    parts = [timer.blocked_autorange(min_run_time=min_run_time)]
    # a slow call fills min_run_time in one block; a median and IQR need a few samples
    while sum(len(p.raw_times) for p in parts) < MIN_SAMPLES:
        parts.append(timer.timeit(parts[0].number_per_run))
    m = benchmark.Measurement.merge(parts)[0]  # per-call times of every block
    runs = sum(len(p.raw_times) * p.number_per_run for p in parts)
    return Timing(m.median * 1e3, m.iqr * 1e3, runs)


# ---------------------------------------------------------------- one layer, all metrics


def layer_calls(
    module: nn.Module, x: torch.Tensor
) -> tuple[Callable[[], torch.Tensor], Callable[[], None]]:
    """Closures for a forward, and a forward+backward as in training (input needs grad,
    parameter grads reset each call so every call does the same work)."""
    x = x.detach().requires_grad_(True)
    grad = torch.randn_like(module(x)).detach()

    def forward() -> torch.Tensor:
        return module(x)

    def forward_backward() -> None:
        for p in module.parameters():
            p.grad = None
        x.grad = None
        module(x).backward(grad)

    return forward, forward_backward


def compiled_calls(
    module: nn.Module, x: torch.Tensor
) -> tuple[Callable[[], torch.Tensor], Callable[[], None], float]:
    """layer_calls of torch.compile(module), and the wall seconds of the first calls that
    compile the forward and backward graphs (one run of each included), kept out of timing."""
    started = time.perf_counter()
    forward, forward_backward = layer_calls(torch.compile(module), x)  # compiles forward
    forward_backward()  # compiles backward
    forward()
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)
    return forward, forward_backward, time.perf_counter() - started


def measure_layer(
    module: nn.Module, x: torch.Tensor, min_run_time: float = 0.2, time_it: bool = True,
    compile: bool = False,
) -> dict[str, float | int | str]:
    """Every per-point metric for one (B, n, d) input: time, throughput, FLOPs, memory, kernel.

    With compile=True the timing (and CUDA peak memory) is of torch.compile(module), with the
    compile time in "compile_s"; FLOPs, kernel and saved bytes stay those of the eager module,
    which the dispatch-level counters can see.
    """
    device = x.device
    forward, forward_backward = layer_calls(module, x)
    tokens = x.shape[0] * x.shape[1]
    flops_fwd, flops_attn, kernel = flops_and_kernels(forward)
    row: dict[str, float | int | str] = {"kernel": kernel, "flops_fwd": flops_fwd,
                                         "flops_fwd_attn": flops_attn}
    row["flops_fwdbwd"] = count_flops(forward_backward)
    row["saved_bytes"] = saved_tensor_bytes(forward, module.parameters())
    if compile:
        forward, forward_backward, row["compile_s"] = compiled_calls(module, x)
    if device.type == "cuda":
        row["peak_mem_bytes"] = cuda_peak_bytes(forward_backward, device)
    if time_it:
        for name, fn in (("fwd", forward), ("fwdbwd", forward_backward)):
            t = time_fn(fn, device, min_run_time)
            row[f"{name}_ms"], row[f"{name}_iqr_ms"], row[f"{name}_runs"] = (
                t.median_ms, t.iqr_ms, t.runs)
            row[f"{name}_tokens_per_s"] = tokens / (t.median_ms / 1e3)
    return row


# ---------------------------------------------------------------- machine facts


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux: fall back to what the platform module knows
        pass
    return platform.processor() or platform.machine()


def machine_facts(device: torch.device) -> dict[str, str | int | bool]:
    """Facts recorded beside every measurement, so rows from different machines compare."""
    facts: dict[str, str | int | bool] = {
        "cpu": _cpu_model(),
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "host": socket.gethostname(),
        "device_name": _cpu_model(),
        # "highest" = true fp32 matmuls; "high"/"medium" let TF32 or bf16 in (CUDA, oneDNN)
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if device.type == "cuda":
        facts["device_name"] = torch.cuda.get_device_name(device)
        facts["cuda_version"] = torch.version.cuda or ""
        facts["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
        facts["tf32_cudnn"] = torch.backends.cudnn.allow_tf32
    facts["cpu_count"] = os.cpu_count() or 0
    return facts
