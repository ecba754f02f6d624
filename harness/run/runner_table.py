"""The runner table: which function measures a point of each `Point.runner`.

Layer-level runners are here, thin adapters from a point to harness.measure; training-type
runners live in harness.train. Every runner is `runner(point, context) -> Result`
(harness.runner); a raised exception becomes an error (or oom) row in the sweep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

import models
from experiments.spec import CompareOptions, PathOptions, Point, ThreadOptions
from harness.measure.compare import compare_layer
from harness.measure.kernel_swap import use_kernels
from harness.measure.structure import (
    max_path_length,
    path_ops,
    recurrent_path_length,
    sequential_ops,
)
from harness.measure.timing import (
    compiled_calls,
    layer_calls,
    measure_layer,
    saved_tensor_bytes,
    time_fn,
)
from harness.runner import Context, Result, Runner
from harness.train.probes import run_attn_init, run_grad_distance, run_layer_grads
from harness.train.train_runner import run_train
from harness.train.translation.baselines import run_constant, run_retrieval, run_source_copy
from harness.train.translation.translate_runner import run_translate
from models.minrnn import scan_error

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _layer_input(point: Point, device: torch.device, batch: int, n: int) -> torch.Tensor:
    return torch.randn(batch, n, point.d_model, device=device, dtype=DTYPES[point.dtype])


def _build_mixer(point: Point, device: torch.device) -> nn.Module:
    torch.manual_seed(point.seed)
    module = use_kernels(models.mixer(point.subject, point.d_model, **dict(point.config)))
    return module.to(device=device, dtype=DTYPES[point.dtype]).train()


def predict_layer_bytes(point: Point, device: torch.device) -> int:
    """Predicted training footprint of a layer point: activations saved for backward, measured
    at n = 8, 16, 32 with batch 1 and extrapolated with the exact quadratic through them
    (attention's n^2 term, recurrence's n term), times the batch; plus weights and grads."""
    module = _build_mixer(point, device)
    ns = np.array([8, 16, 32])
    saved = [saved_tensor_bytes(lambda n=n: module(_layer_input(point, device, 1, int(n))),
                                module.parameters()) for n in ns]
    coeffs = np.polyfit(ns, saved, 2)
    per_seq = max(0.0, float(np.polyval(coeffs, point.seq_len)))
    params = sum(p.numel() * p.element_size() for p in module.parameters())
    return int(point.batch_size * per_seq + 2 * params)


def run_layer(point: Point, ctx: Context) -> Result:
    """Time, FLOPs, saved bytes and kernel of one mixer on x[B, n, d]."""
    module = _build_mixer(point, ctx.device)
    x = _layer_input(point, ctx.device, point.batch_size, point.seq_len)
    return Result(measure_layer(module, x, min_run_time=ctx.min_run_time,
                                compile=point.compile))


def run_fwdbwd(point: Point, ctx: Context) -> Result:
    """Forward+backward time of one mixer on x[B, n, d], as in a training step, and nothing
    else: a throughput sweep to long n has no time for FLOP counting at every point."""
    module = _build_mixer(point, ctx.device)
    x = _layer_input(point, ctx.device, point.batch_size, point.seq_len)
    if point.compile:
        _, step, compile_s = compiled_calls(module, x)
    else:
        (_, step), compile_s = layer_calls(module, x), None
    t = time_fn(step, ctx.device, ctx.min_run_time)
    row = {"fwdbwd_ms": t.median_ms, "fwdbwd_iqr_ms": t.iqr_ms, "fwdbwd_runs": t.runs,
           "fwdbwd_tokens_per_s": point.batch_size * point.seq_len / (t.median_ms / 1e3)}
    return Result(row if compile_s is None else row | {"compile_s": compile_s})


def run_scan_error(point: Point, ctx: Context) -> Result:
    """A minGRU/minLSTM layer in float32 by its scan against the float64 loop: the largest
    relative error over every h_t (models.minrnn.scan_error; forward only, on the CPU)."""
    scan = str(dict(point.config).get("scan", "log"))
    return Result({"scan_rel_error": scan_error(
        point.subject, point.d_model, point.batch_size, point.seq_len, scan, point.seed)})


def variant(point: Point) -> str:
    """"transformer-layer/sdpa", "lstm/cell", "harness-timer": what a comparison compares."""
    options = point.options if isinstance(point.options, CompareOptions) else CompareOptions()
    if options.versus == "timer":
        return "harness-timer"
    cfg = dict(point.config)
    return f"{point.subject}/{cfg.get('attn_backend') or cfg.get('rnn_impl') or 'default'}"


def run_compare(point: Point, ctx: Context) -> Result:
    """Our mixer against PyTorch's own layer (or the harness timer against a bare Timer),
    interleaved; see harness.measure.compare."""
    options = point.options if isinstance(point.options, CompareOptions) else CompareOptions()
    ours = _build_mixer(point, ctx.device)
    x = _layer_input(point, ctx.device, point.batch_size, point.seq_len)
    return Result(compare_layer(point.subject, ours, x, variant(point), options.versus,
                                options.reps, options.peak_n, ctx.min_run_time, point.compile))


def _stacked(point: Point, index: int = 0) -> nn.Module:
    """A fresh mixer for stack position `index`. With dilation_growth a convolution's
    dilation is k^index, so L layers see k^L positions: the paper's O(log_k n) stack."""
    config = dict(point.config)
    if isinstance(point.options, PathOptions) and point.options.dilation_growth:
        # past n a dilation only adds padding (no position is that far): cap it, or a deep
        # search would allocate k^L zeros
        config["dilation"] = min(config.get("kernel_size", 3) ** index, point.seq_len)
    torch.manual_seed(point.seed + index)
    return use_kernels(models.mixer(point.subject, point.d_model, **config))


def run_seq_ops(point: Point, ctx: Context) -> Result:
    """Longest chain of dependent ops in one forward (recurrent layers via rnn_impl="cell")."""
    layer = _stacked(point).to(ctx.device)
    return Result({"seq_ops": sequential_ops(layer, point.seq_len, point.d_model)})


def run_path(point: Point, ctx: Context) -> Result:
    """Fewest sequential applications linking x[0] to y[n-1]: time steps for a recurrent
    layer (its cells), ops on the shortest chain for a scanned recurrence (minGRU, minLSTM),
    stacked layers for every other type; decided from exact gradients."""
    n, d = point.seq_len, point.d_model
    kind = models.declared(point.subject).kind
    if kind == "recurrent":
        steps = recurrent_path_length(_stacked(point).to(ctx.device), n, d, seed=point.seed)
        return Result({"path_length": steps, "path_unit": "steps"})
    if kind == "scanned":  # ops on the chain: n - 1 steps in a loop, log n in a scan
        ops = path_ops(_remembering(_stacked(point)).to(ctx.device), n, d, seed=point.seed)
        return Result({"path_length": ops, "path_unit": "ops"})
    layers = max_path_length(lambda i: _stacked(point, i).to(ctx.device), n, d, max_depth=n)
    return Result({"path_length": layers, "path_unit": "layers"})


def _remembering(layer: nn.Module, margin: float = 4.0) -> nn.Module:
    """A minGRU/minLSTM whose state is kept (a_t near 1) for the path search: with gates half
    shut, x[0]'s share of y[n-1] is about 2^-n, below float64 rounding by n = 64, and the exact
    comparison that decides dependence would miss a chain the graph has. Weights do not
    change which ops link x[0] to y[n-1], only whether the comparison can see it."""
    with torch.no_grad():
        for name, gate in getattr(layer, "gates", {}).items():  # minGRU: z; minLSTM: f, i
            gate.bias.fill_(margin if name == "f" else -margin)
    return layer


def run_threads(point: Point, ctx: Context) -> Result:
    """One mixer's time on x[B, n, d] with torch limited to the point's thread count. At one
    thread it also measures what a work-span projection needs: the layer's sequential depth
    (its autograd graph, recurrences through their cell loop) and the time of one dependent
    step (the layer at batch 1, divided by that depth)."""
    threads = point.options.threads if isinstance(point.options, ThreadOptions) else 1
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        row = measure_layer(_build_mixer(point, ctx.device),
                            _layer_input(point, ctx.device, point.batch_size, point.seq_len),
                            min_run_time=ctx.min_run_time)
        if threads == 1:
            row |= _span(point, ctx)
    finally:
        torch.set_num_threads(before)
    return Result(row)


def _span(point: Point, ctx: Context) -> dict[str, float | int]:
    knobs = {f.name for f in dataclasses.fields(models.mixer_config(point.subject))}
    config = dict(point.config) | ({"rnn_impl": "cell"} if "rnn_impl" in knobs else {})
    torch.manual_seed(point.seed)
    cell = use_kernels(models.mixer(point.subject, point.d_model, **config)).to(ctx.device)
    depth = sequential_ops(cell, point.seq_len, point.d_model)
    single = _build_mixer(point, ctx.device)
    forward, _ = layer_calls(single, _layer_input(point, ctx.device, 1, point.seq_len))
    with torch.no_grad():
        batch1 = time_fn(forward, ctx.device, ctx.min_run_time)
    return {"span_ops": depth, "batch1_ms": batch1.median_ms,
            "step_ms": batch1.median_ms / depth}


SHIFTS = (1, 7, 31)  # offsets k for PE[pos + k] = PE[pos] M_k


def run_identities(point: Point, ctx: Context) -> Result:
    """Two identities the paper states, measured: how far the mixer is from permutation
    equivariance (float64: |f(x P) - f(x) P| / |f(x)|, largest entry), and how far the
    sinusoidal table is from PE[pos + k] = PE[pos] M_k (the least-squares M_k's relative
    residual over 8 d positions, largest over SHIFTS; the table is float32, so the
    residual is float32 rounding, not zero)."""
    torch.manual_seed(point.seed)
    n, d = point.seq_len, point.d_model
    mixer = use_kernels(models.mixer(point.subject, d, **dict(point.config)))
    mixer = mixer.to(ctx.device, torch.float64).eval()
    x = torch.randn(1, n, d, dtype=torch.float64, device=ctx.device)
    perm = torch.randperm(n, device=ctx.device)
    with torch.no_grad():
        y = mixer(x)
        err = (mixer(x[:, perm]) - y[:, perm]).abs().max() / y.abs().max()
    # 8d positions: with fewer than d + k rows a d x d map fits any table exactly
    positions = 8 * d
    pe = models.blocks.sinusoid_table(positions, d).double()
    residuals = []
    for k in SHIFTS:
        src, dst = pe[: positions - k], pe[k:]
        m = torch.linalg.lstsq(src, dst).solution  # (d, d)
        residuals.append(float(torch.linalg.norm(src @ m - dst) / torch.linalg.norm(dst)))
    # the dtypes each identity was computed in (the point's own dtype plays no part here)
    return Result({"equivariance_error": float(err), "pe_shift_residual": max(residuals),
                   "pe_shifts": " ".join(map(str, SHIFTS)), "pe_positions": positions,
                   "equivariance_dtype": str(y.dtype).removeprefix("torch."),
                   "pe_table_dtype": str(models.blocks.sinusoid_table(2, 2).dtype)
                   .removeprefix("torch.")})


RUNNERS: dict[str, Runner] = {
    "layer": run_layer,  # time, FLOPs, memory of one mixer
    "compare": run_compare,  # ours vs PyTorch's layer, interleaved (tvr bench)
    "fwdbwd": run_fwdbwd,  # forward+backward time only (training throughput)
    "scan-error": run_scan_error,  # float32 scans of minGRU/minLSTM against a float64 loop
    "seq-ops": run_seq_ops,  # Table 1's sequential operations (autograd graph depth)
    "path": run_path,  # Table 1's maximum path length
    "threads": run_threads,  # a layer on 1..all CPU threads, and its span at 1 thread
    "identities": run_identities,  # permutation equivariance, sinusoid shift linearity
    "train": run_train,  # train a model on a task: final metrics + curves
    "attn-init": run_attn_init,  # q.k variance, attention entropy, softmax Jacobian at init
    "layer-grads": run_layer_grads,  # per-layer gradient norm at init
    "grad-distance": run_grad_distance,  # ||dL_t/dx_{t-k}|| vs k, at init and trained
    "translate": run_translate,  # train a translation model, beam-decode, BLEU/chrF
    "source-copy": run_source_copy,  # the source as its own translation, scored
    "constant": run_constant,  # the best constant sentence (chosen on dev), scored
    "retrieval": run_retrieval,  # the target of the nearest training source (TF-IDF)
}
# Runners whose memory can be predicted before measuring (`tvr run --max-memory`).
PREDICTORS: dict[str, Callable[[Point, torch.device], int]] = {"layer": predict_layer_bytes}
