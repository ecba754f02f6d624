"""Runners for training-type points: train a model on a task, or measure it at initialisation.

A training point carries the model config (handed to models.build as it is; d_model comes
from the point, vocab_size from the task) and TrainOptions: the task spec, the training
loop's settings (None = the loop's default), length generalisation and parameter matching.

Parameter matching happens here, at run time (declaring a suite must stay cheap): a point
with a Match is built at the d_model that gives it the matched model's parameter count, that
model being built at Point.d_model from its own config. Its rows record the resolved d_model.

Runners (harness.run.runner_table.RUNNERS): "train" here; "attn-init", "layer-grads" and
"grad-distance" in harness.train.probes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import torch
from torch import nn

import models
from experiments.spec import Config, Point, TrainOptions
from harness.measure.compare import peak_rate
from harness.measure.flops import count_flops
from harness.measure.kernel_swap import use_kernels
from harness.runner import Context, Result
from harness.train import checkpoint
from harness.train.batch import Task
from harness.train.loop import (
    TrainConfig,
    TrainResult,
    count_params,
    evaluate,
    masked_loss,
    matched_config,
    param_count,
    train,
)
from harness.train.tasks import make_task
from harness.train.trainer import Saving

# TrainOptions field -> TrainConfig field, where the names differ
_TRAIN_FIELDS = {"target": "target_accuracy"}
_LOOP_SETTINGS = ("steps", "lr", "schedule", "warmup", "clip", "eval_every", "eval_batches",
                  "target")
LENGTH_FACTORS = (2, 4)  # length generalisation: train at n, evaluate at 2n and 4n
SERIES_KEYS = ("loss", "accuracy", "seq_accuracy", "bits_per_char", "train_loss", "grad_norm",
               "lr", "tokens_per_s")
FINAL_KEYS = ("loss", "accuracy", "seq_accuracy", "bits_per_char", "train_loss", "grad_norm")
# Below this many parameters a CPU step is too short for intra-op threads to pay for their
# synchronisation; on a shared 2-core machine one thread ran tiny models several times faster.
TINY_PARAMS = 2_000_000


@dataclass(frozen=True)
class TrainSpec:
    """Everything a training-type point builds, derived from the point alone."""

    task: Task
    model: dict[str, Any]  # models.build(point.model, **model)
    train: TrainConfig
    eval_lengths: tuple[int, ...]  # extra held-out lengths (length generalisation)


@cache
def _matched_d_model(model: str, ref: str, base: Config) -> int:
    """d_model giving `model` the parameter count of `ref` built from `base` (cached: a
    suite has many seeds of one configuration)."""
    config = dict(base)
    if model == ref:
        return config["d_model"]
    return matched_config(model, param_count(ref, **config), config)["d_model"]


def matched_d_model(point: Point, vocab_size: int, max_len: int) -> int:
    """The point's d_model, or with a Match the width matching the matched model's
    parameters (built at the point's d_model, vocabulary and max_len, and its own config)."""
    match = _options(point).match
    if match is None:
        return point.d_model
    base = {"max_len": max_len} | dict(match.config) | {"vocab_size": vocab_size,
                                                         "d_model": point.d_model}
    return _matched_d_model(point.subject, match.model, tuple(sorted(base.items())))


def trained_width(point: Point) -> int:
    """The d_model a point's row will record: a model matched to another's parameter count
    trains at the width that matches (which neither the seed nor the steps change). A point
    that cannot be built keeps its declared width here: running it makes its error row."""
    if not isinstance(point.options, TrainOptions) or point.options.match is None:
        return point.d_model
    try:
        return _trained_width(replace(point, seed=0))
    except ValueError:
        return point.d_model


@cache
def _trained_width(point: Point) -> int:
    return train_spec(point).model["d_model"]


def _options(point: Point) -> TrainOptions:
    if not isinstance(point.options, TrainOptions):
        raise ValueError(f"point {point.point_id} has no TrainOptions (runner {point.runner!r})")
    return point.options


def point_task(point: Point) -> Task:
    """The task a point trains or probes on, seeded by the point's seed."""
    task = _options(point).task
    return make_task(task.name, point.seq_len, task.alphabet_size, task.framing, point.seed,
                     **dict(task.keywords))


def train_spec(point: Point, device: str = "cpu") -> TrainSpec:
    """The task, model config and training settings a point builds; ValueError on bad ones."""
    opts = _options(point)
    for key in ("vocab_size", "d_model"):
        if key in dict(point.config):
            raise ValueError(f"invalid config key {key!r}: d_model comes from the point, "
                             f"vocab_size from the task")
    task = point_task(point)
    lengths = tuple(f * point.seq_len for f in LENGTH_FACTORS) if opts.length_gen else ()
    longest = task.train_batch(0, 1).model_len
    for n in lengths:
        longest = max(longest, task.eval_batches(1, 1, seq_len=n)[0].model_len)
    model = {"max_len": longest}  # learned positions must cover the longest evaluated input
    model |= dict(point.config)
    model |= {"vocab_size": task.vocab_size,
              "d_model": matched_d_model(point, task.vocab_size, model["max_len"])}
    models.model_config(point.subject, **model)  # validate now: a bad value names itself
    loop = {_TRAIN_FIELDS.get(k, k): getattr(opts, k) for k in _LOOP_SETTINGS
            if getattr(opts, k) is not None and (k != "steps" or opts.steps)}
    tcfg = TrainConfig(batch_size=point.batch_size, seed=point.seed, device=device, **loop)
    return TrainSpec(task, model, tcfg, lengths)


def build_model(point: Point, spec: TrainSpec, device: torch.device) -> nn.Module:
    """The point's model, initialised from the point's seed."""
    if point.dtype != "float32":
        raise ValueError(f"invalid dtype {point.dtype!r} for training points; use float32")
    torch.manual_seed(point.seed)
    return use_kernels(models.build(point.subject, **spec.model)).to(device)


@contextmanager
def tiny_threads(model: nn.Module, device: torch.device) -> Iterator[int]:
    """One intra-op thread for tiny models on CPU, restored afterwards; yields the count."""
    old = torch.get_num_threads()
    if device.type != "cpu" or count_params(model) > TINY_PARAMS:
        yield old
        return
    torch.set_num_threads(1)
    try:
        yield 1
    finally:
        torch.set_num_threads(old)


def flops_per_token(model: nn.Module, task: Task, device: torch.device) -> float:
    """Counted forward FLOPs of one training batch per input token (the cost h must not
    change, as the seed says of multi-head attention)."""
    batch = task.train_batch(0, 2).to(device)
    with torch.no_grad():
        flops = count_flops(lambda: batch.logits(model))
    return flops / batch.n_input_tokens


def step_flops_per_token(model: nn.Module, task: Task, batch_size: int,
                         device: torch.device) -> float:
    """Counted FLOPs of one training step (forward, loss and backward of a training batch)
    per input token, counted once with flop_counter; Adam's elementwise update counts 0 there,
    as every MFU convention has it. The parameters' gradients are cleared afterwards."""
    batch = task.train_batch(1, batch_size).to(device)
    flops = count_flops(lambda: masked_loss(batch.logits(model), batch).backward())
    model.zero_grad(set_to_none=True)
    return flops / batch.n_input_tokens


def throughput(flops_per_token: float, tokens_per_s: float | None, device: torch.device
               ) -> dict[str, float]:
    """Training tokens and counted FLOPs per second of update time, and the MFU: that FLOP
    rate over this machine's peak matmul rate at the current thread count (measured once
    per process, beside whatever else the machine runs). The column names are the
    translation runner's."""
    if not tokens_per_s:
        return {}
    peak = peak_rate(device, torch.get_num_threads())
    rate = flops_per_token * tokens_per_s
    return {"train_tokens_per_s": tokens_per_s, "train_flops_per_s": rate,
            "train_flops_per_token": flops_per_token, "peak_flops_per_s": peak,
            "mfu": rate / peak}


def history_series(history: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """The evaluation records as {metric: [(step, value), ...]}, skipping missing/non-finite."""
    series: dict[str, list[tuple[int, float]]] = {}
    for rec in history:
        for key in SERIES_KEYS:
            value = rec.get(key)
            if value is not None and math.isfinite(value):
                series.setdefault(key, []).append((rec["step"], float(value)))
    return series


def result_metrics(result: TrainResult) -> dict[str, Any]:
    """Scalar metrics of a finished (or diverged) run; None values are left out."""
    last = result.history[-1] if result.history else {}
    m: dict[str, Any] = {
        "n_params": result.n_params,
        "steps_run": result.steps_run,
        "steps_to_target": result.steps_to_target,
        "tokens_to_target": result.tokens_to_target,
        "wall_to_target": result.wall_to_target,
        "train_s": last.get("wall_s"),  # training time up to the last evaluation
        "tokens_per_s": last["tokens"] / last["wall_s"] if last.get("wall_s") else None,
        "diverged_at": result.diverged_at,
        "resumed_from_step": result.resumed_from or None,  # a resumed run only
    }
    m |= {f"final_{k}": result.final[k] for k in FINAL_KEYS if k in result.final}
    return {k: v for k, v in m.items() if v is not None}


def length_metrics(model: nn.Module, spec: TrainSpec, device: torch.device) -> dict[str, float]:
    """Held-out accuracy and loss at each extra length, named by the factor: accuracy_2n."""
    out: dict[str, float] = {}
    for n in spec.eval_lengths:
        batches = spec.task.eval_batches(spec.train.batch_size, spec.train.eval_batches,
                                         seq_len=n)
        ev = evaluate(model, [b.to(device) for b in batches])
        factor = n // spec.task.seq_len
        out |= {f"accuracy_{factor}n": ev["accuracy"], f"seq_accuracy_{factor}n":
                ev["seq_accuracy"], f"loss_{factor}n": ev["loss"]}
    return out


def run_train(point: Point, ctx: Context) -> Result:
    """Train the point's model on its task; final metrics, curves, and status "diverged"
    (with the step in the message) if a loss or gradient went NaN/inf. It checkpoints
    under the output folder and resumes from there, as a translation point does."""
    device = ctx.device
    spec = train_spec(point, str(device))
    model = build_model(point, spec, device)
    path = checkpoint.point_path(point, ctx)
    with tiny_threads(model, device) as threads:
        flops = flops_per_token(model, spec.task, device)
        step_flops = step_flops_per_token(model, spec.task, spec.train.batch_size, device)
        result = train(model, spec.task, spec.train, d_model=spec.model["d_model"],
                       saving=Saving(path, point.config_key, resume=ctx.resume))
        checkpoint.finished(path, ctx)
        metrics = result_metrics(result)
        metrics |= throughput(step_flops, metrics.get("tokens_per_s"), device)
        metrics |= {"flops_fwd_per_token": flops, "threads_used": threads,
                    # the row's d_model: the width trained (match)
                    "d_model": spec.model["d_model"]}
        if result.status == "ok":
            metrics |= length_metrics(model, spec, device)
        unigram = getattr(spec.task, "unigram_bits_per_char", None)  # corpus tasks only
        if unigram is not None:
            metrics["unigram_bits_per_char"] = unigram()
    out = Result(metrics, history_series(result.history))
    if result.status != "ok":
        out.status = result.status
        out.message = (f"loss or gradient not finite at step {result.diverged_at} "
                       f"(train_loss {result.final.get('train_loss')})")
    return out
