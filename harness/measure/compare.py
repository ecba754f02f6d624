"""Ours versus PyTorch's own layer, timed interleaved in one process.

A comparison (runner "compare") times our mixer and its reference (models.reference)
on one input, forward+backward in train mode, and reports the ratio of their times. Machine
noise (other processes on shared cores, clock changes) drifts over seconds, so the two are
measured in alternation: each repetition times every contestant once, in a rotated order,
and the ratio is of the medians of the per-repetition medians. The same rotation includes a
large matmul, whose rate is this machine's peak for MFU, under the same noise.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from harness.measure.flops import count_flops, kernels_used
from harness.measure.kernels import onednn_mm, uses_onednn
from harness.measure.timing import compiled_calls, layer_calls, time_fn
from models.reference import torch_reference

# Targets (ours / reference time): the speed this project holds its layers to. A variant
# without one is reported only.
TARGETS: dict[str, float] = {"transformer-layer/sdpa": 0.9, "lstm/fused": 1.02,
                             "gru/fused": 1.02, "harness-timer": 1.03}
# Peak matmul edge per device: large enough that the GEMM runs at its best rate.
PEAK_N = {"cpu": 2048, "cuda": 8192}
# Outputs must agree before timing means anything. The check is there to catch a wrong
# weight (differences of order 1), so it allows each dtype's rounding through a whole layer
# (|diff| <= tol * (1 + |ref|)); bf16 keeps 8 bits of mantissa, fp16 11.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-7, torch.bfloat16: 0.1,
             torch.float16: 0.02}


def interleaved(measures: dict[str, Callable[[], float]], reps: int) -> dict[str, list[float]]:
    """Call every measure once per repetition, so that each one meets the machine in every
    phase of its drift; returns each one's per-repetition results. The order rotates every
    two repetitions and runs backwards every other one, so no measure always follows the same
    neighbour (whose caches and clocks it would inherit)."""
    names = list(measures)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        k = (r // 2) % len(names)
        order = names[k:] + names[:k]
        for name in (order if r % 2 == 0 else order[::-1]):
            out[name].append(measures[name]())
    return out


def peak_matmuls(device: torch.device, dtype: torch.dtype, n: int
                 ) -> tuple[dict[str, Callable[[], object]], int]:
    """Square (n x n) @ (n x n) products, one per GEMM library this build offers for the
    dtype (torch.mm's BLAS; oneDNN on CPU fp32, which harness.measure.kernels.linear uses), and the
    FLOPs of one. The machine's peak is the best of them: a slow BLAS must not flatter MFU."""
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    c = torch.empty(n, n, device=device, dtype=dtype)
    fns: dict[str, Callable[[], object]] = {"mm": lambda: torch.mm(a, b, out=c)}
    if uses_onednn(a):
        fns["onednn"] = lambda: onednn_mm(a, b)
    return fns, 2 * n**3


@functools.cache
def peak_rate(device: torch.device, threads: int, n: int = 1024, reps: int = 3) -> float:
    """The machine's peak fp32 matmul rate (FLOP/s) at `threads` torch threads: the best
    rate of peak_matmuls over `reps` short timings (the yardstick of a training MFU)."""
    fns, flops = peak_matmuls(device, torch.float32, n)
    best_ms = min(timer_ms(fn, 0.2) for fn in fns.values() for _ in range(reps))
    return flops / (best_ms / 1e3)


def timer_ms(fn: Callable[[], object], min_run_time: float) -> float:
    """Median ms of one torch.utils.benchmark.Timer.blocked_autorange: one bench turn, and the
    bare yardstick for the harness's time_fn. num_threads is the process's (Timer's default
    of 1 would time another configuration); on CUDA the Timer synchronizes around blocks."""
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


def agreement(ours: nn.Module, ref: nn.Module, x: torch.Tensor) -> float:
    """Max |ours(x) - ref(x)|; AssertionError if over the dtype's TOLERANCE anywhere."""
    with torch.no_grad():
        out, expected = ours(x).float(), ref(x).float()
    tol = TOLERANCE[x.dtype]
    diff = (out - expected).abs()
    if not (diff - tol * (1 + expected.abs())).max().item() <= 0:  # also catches NaN
        raise AssertionError(f"ours and the reference disagree: max |diff| "
                             f"{diff.max().item():.3g}, over the {x.dtype} tolerance "
                             f"{tol} * (1 + |ref|)")
    return diff.max().item()


def _versus_timer(fwdbwd: Callable[[], object], device: torch.device, reps: int,
                  min_run_time: float) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """The harness's time_fn against a bare benchmark.Timer on the same call."""
    fwdbwd(), fwdbwd()  # warm-up, as for the other comparisons
    timed = interleaved({"ours": lambda: time_fn(fwdbwd, device, min_run_time, 0).median_ms,
                         "ref": lambda: timer_ms(fwdbwd, min_run_time)}, reps)
    return {"reference": "torch.utils.benchmark.Timer"}, timed


def _versus_torch(kind: str, ours: nn.Module, fwdbwd: Callable[[], object], x: torch.Tensor,
                  reps: int, peak_n: int, min_run_time: float, compile: bool
                  ) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Ours against PyTorch's own layer with copied weights, with the machine's peak matmul
    rate measured in the same rotation."""
    ref = torch_reference(kind, ours)
    ref_fwd, ref_fwdbwd = layer_calls(ref, x)
    row: dict[str, Any] = {"reference": type(getattr(ref, "rnn", ref)).__name__,
                           "ref_kernel": kernels_used(ref_fwd),
                           "max_abs_diff": agreement(ours, ref, x)}
    if compile:
        _, fwdbwd, row["compile_s"] = compiled_calls(ours, x)
        _, ref_fwdbwd, row["ref_compile_s"] = compiled_calls(ref, x)
    peaks, matmul_flops = peak_matmuls(x.device, x.dtype, peak_n)
    fns = {"ours": fwdbwd, "ref": ref_fwdbwd} | {f"peak_{k}": f for k, f in peaks.items()}
    for fn in list(fns.values()) * 2:  # warm-up: caches, allocator, threads
        fn()
    # one short blocked_autorange per turn (time_fn's five samples would make turns
    # long, and long turns interleave worse); medians over the repetitions
    timed = interleaved({name: (lambda fn=fn: timer_ms(fn, min_run_time))
                         for name, fn in fns.items()}, reps)
    for name in peaks:  # a peak is the best rate seen, not a typical one
        row[f"peak_{name}_flops_per_s"] = matmul_flops / (min(timed[f"peak_{name}"]) / 1e3)
    best = max(peaks, key=lambda name: row[f"peak_{name}_flops_per_s"])
    row |= {"peak_flops_per_s": row[f"peak_{best}_flops_per_s"], "peak_kernel": best,
            "peak_dtype": str(x.dtype).removeprefix("torch.")}
    return row, timed


def compare_layer(kind: str, ours: nn.Module, x: torch.Tensor, variant: str, versus: str,
                  reps: int, peak_n: int | None, min_run_time: float, compile: bool = False
                  ) -> dict[str, Any]:
    """The metrics of one comparison of `ours` (a mixer of `kind`) on x (see the module
    docstring): times, ratios, MFU, kernels, and whether the variant's target is met."""
    fwd, fwdbwd = layer_calls(ours, x)
    row: dict[str, Any] = {"variant": variant, "kernel": kernels_used(fwd),
                           "flops_fwdbwd": count_flops(fwdbwd), "reps": reps}
    if versus == "timer":
        more, timed = _versus_timer(fwdbwd, x.device, reps, min_run_time)
    else:
        more, timed = _versus_torch(kind, ours, fwdbwd, x, reps,
                                    peak_n or PEAK_N[x.device.type], min_run_time, compile)
    row |= more
    ours_ms, ref_ms = statistics.median(timed["ours"]), statistics.median(timed["ref"])
    per_rep = [a / b for a, b in zip(timed["ours"], timed["ref"], strict=True)]
    row |= {"ours_ms": ours_ms, "ref_ms": ref_ms, "ratio": ours_ms / ref_ms,
            "ratio_min": min(per_rep), "ratio_max": max(per_rep),
            # other tenants only ever slow a run down: the best of each side is the estimate
            # least touched by them, reported beside the median-of-medians ratio
            "ratio_best": min(timed["ours"]) / min(timed["ref"]),
            **{f"{name}_reps_ms": ";".join(f"{t:.4g}" for t in times)
               for name, times in timed.items()},
            "tokens_per_s": x.shape[0] * x.shape[1] / (ours_ms / 1e3)}
    if "peak_flops_per_s" in row:
        row["mfu"] = row["flops_fwdbwd"] / (ours_ms / 1e3) / row["peak_flops_per_s"]
        row["ref_mfu"] = row["flops_fwdbwd"] / (ref_ms / 1e3) / row["peak_flops_per_s"]
    target = TARGETS.get(variant)
    row["target"] = target
    if target is not None:
        # the timer comparison is two-sided: the harness must neither add nor hide time
        ratio = row["ratio"]
        row["meets_target"] = (abs(ratio - 1) <= target - 1 if variant == "harness-timer"
                               else ratio <= target)
    return row
