"""Timing and activation memory of one callable, and the layer measurement built on them.

Timing: warm-up, then torch.utils.benchmark's blocked_autorange on CPU, CUDA events around
each call (with a device sync) on GPU. Memory: bytes of tensors autograd saves for backward
(device independent, deduplicated by storage) and, on CUDA, the allocator's peak.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from harness.measure.flops import count_flops, flops_and_kernels

# torch.utils.benchmark imports cpp_extension, which warns "No CUDA runtime is found" on
# CPU-only machines with a CUDA build of torch; that is expected here and not the user's concern.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
from torch.utils import benchmark  # noqa: E402


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
# An added block's least length: where torch.utils.benchmark's own rule (its timer's overhead
# at most 1e-4 of a block) puts it for an overhead of 2 us (1.8 us measured on a 2-core EPYC)
MIN_BLOCK_S = 0.02


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
    # a slow call fills min_run_time in one block; a median and IQR need a few samples.
    # torch sizes its blocks in powers of ten calls (0.9 ms calls get blocks of 100, 90 ms):
    # the samples added take the fewest calls that still last MIN_BLOCK_S
    number = min(parts[0].number_per_run, math.ceil(MIN_BLOCK_S / parts[0].median))
    while sum(len(p.raw_times) for p in parts) < MIN_SAMPLES:
        parts.append(timer.timeit(number))
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
