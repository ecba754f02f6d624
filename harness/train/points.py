"""Runners for training-type points: train a model on a task, or measure it at initialisation.

A point's knobs (experiments.spec.knobs) hold three kinds of keys: the task's (task, framing,
vocab = the data alphabet, and its keywords), the training loop's (steps, lr, ...), and the
model's (any field of the model's config; d_model comes from Point.d_model, vocab_size from
the task). An unknown key is a ValueError, which the sweep records as an error row.

Parameter matching happens here, at run time (declaring a suite must stay cheap): a point
with match=REF is built at the d_model that gives it REF's parameter count, REF being built
at Point.d_model from the knobs it takes (so a matched LSTM point carries the Transformer's
n_heads, d_ff, ... as knobs). Its rows record the resolved d_model.

Runners (sweep.RUNNERS): "train" here; "attn-init", "layer-grads" and "grad-distance" in
harness.probes. Each returns metrics plus "series" {name: [(step, value), ...]}.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch
from torch import nn

import models
from experiments.spec import Point
from harness.measure.flops import count_flops
from harness.train.batch import Task
from harness.train.loop import (
    TrainConfig,
    TrainResult,
    count_params,
    evaluate,
    matched_config,
    param_count,
    train,
)
from harness.train.tasks import TASK_KEYWORDS, make_task

TASK_KEYS = ("task", "framing", "vocab", *TASK_KEYWORDS)
# knob -> TrainConfig field
TRAIN_KEYS = {"steps": "steps", "lr": "lr", "schedule": "schedule", "warmup": "warmup",
              "clip": "clip", "eval_every": "eval_every", "eval_batches": "eval_batches",
              "target": "target_accuracy"}
OTHER_KEYS = ("length_gen", "match")  # evaluate at 2n and 4n too; parameter-match to a model
LENGTH_FACTORS = (2, 4)  # length generalisation: train at n, evaluate at 2n and 4n
SERIES_KEYS = ("loss", "accuracy", "seq_accuracy", "bits_per_char", "train_loss", "grad_norm",
               "lr", "tokens_per_s")
FINAL_KEYS = ("loss", "accuracy", "seq_accuracy", "bits_per_char", "train_loss", "grad_norm")
# Below this many parameters a CPU step is too short for intra-op threads to pay for their
# synchronisation; on a shared 2-core machine one thread ran tiny models several times faster.
TINY_PARAMS = 2_000_000
_FROM_POINT = {"vocab_size", "d_model"}  # set from the task and Point.d_model, never a knob


@dataclass(frozen=True)
class TrainSpec:
    """Everything a training-type point builds, derived from the point alone."""

    task: Task
    model: dict[str, Any]  # models.build(point.model, **model)
    train: TrainConfig
    eval_lengths: tuple[int, ...]  # extra held-out lengths (length generalisation)


def _model_fields(name: str) -> set[str]:
    return {f.name for f in dataclasses.fields(models.model_config(name))}


@cache
def _matched_d_model(model: str, ref: str, base: tuple[tuple[str, Any], ...]) -> int:
    """d_model giving `model` the parameter count of `ref` built from `base` (cached: a
    suite has many seeds of one configuration)."""
    config = dict(base)
    if model == ref:
        return config["d_model"]
    return matched_config(model, param_count(ref, **config), config)["d_model"]


def matched_d_model(point: Point, vocab_size: int, max_len: int) -> int:
    """The point's d_model, or with knob match=REF the width matching REF's parameters
    (REF built at the point's d_model, vocabulary and max_len, and the knobs it takes)."""
    ref = point.config.get("match")
    if ref is None:
        return point.d_model
    base = {k: v for k, v in point.config.items() if k in _model_fields(ref)}
    base = {"max_len": max_len} | base | {"vocab_size": vocab_size, "d_model": point.d_model}
    return _matched_d_model(point.model, ref, tuple(sorted(base.items())))


def point_task(point: Point) -> Task:
    """The task a point trains or probes on, seeded by the point's seed."""
    cfg = point.config
    if "task" not in cfg:
        raise ValueError(f"point {point.point_id} has no 'task' knob")
    kw = {k: cfg[k] for k in TASK_KEYWORDS if k in cfg}
    return make_task(cfg["task"], point.seq_len, cfg.get("vocab"), cfg.get("framing", "lm"),
                     point.seed, **kw)


def train_spec(point: Point, device: str = "cpu") -> TrainSpec:
    """Split the knobs into task, model and training settings; ValueError on unknown keys."""
    cfg = point.config
    fields = _model_fields(point.model)
    ref_fields = _model_fields(cfg["match"]) if "match" in cfg else set()
    allowed = {*TASK_KEYS, *TRAIN_KEYS, *OTHER_KEYS} | ((fields | ref_fields) - _FROM_POINT)
    unknown = sorted(set(cfg) - allowed)
    if unknown:
        raise ValueError(f"unknown knob {unknown[0]!r} for {point.model!r} (d_model and "
                         f"vocab_size come from the point and the task); valid: "
                         f"{', '.join(sorted(allowed))}")
    task = point_task(point)
    lengths = tuple(f * point.seq_len for f in LENGTH_FACTORS) if cfg.get("length_gen") else ()
    longest = task.train_batch(0, 1).model_len
    for n in lengths:
        longest = max(longest, task.eval_batches(1, 1, seq_len=n)[0].model_len)
    model = {"max_len": longest}  # learned positions must cover the longest evaluated input
    model |= {k: v for k, v in cfg.items() if k in fields}
    model |= {"vocab_size": task.vocab_size,
              "d_model": matched_d_model(point, task.vocab_size, model["max_len"])}
    models.model_config(point.model, **model)  # validate now: a bad value names itself
    train_kw = {field: cfg[knob] for knob, field in TRAIN_KEYS.items() if knob in cfg}
    tcfg = TrainConfig(batch_size=point.batch_size, seed=point.seed, device=device, **train_kw)
    return TrainSpec(task, model, tcfg, lengths)


def build_model(point: Point, spec: TrainSpec, device: torch.device) -> nn.Module:
    """The point's model, initialised from the point's seed."""
    if point.dtype != "float32":
        raise ValueError(f"invalid dtype {point.dtype!r} for training points; use float32")
    torch.manual_seed(point.seed)
    return models.build(point.model, **spec.model).to(device)


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


def run_train(point: Point, device: torch.device, min_run_time: float) -> dict[str, Any]:
    """Train the point's model on its task; final metrics, curves as "series", and status
    "diverged" (with the step in the message) if a loss or gradient went NaN/inf."""
    spec = train_spec(point, str(device))
    model = build_model(point, spec, device)
    with tiny_threads(model, device) as threads:
        flops = flops_per_token(model, spec.task, device)
        result = train(model, spec.task, spec.train, d_model=spec.model["d_model"])
        metrics = result_metrics(result) | {"flops_fwd_per_token": flops,
                                            "threads_used": threads,
                                            # the row's d_model: the width trained (match)
                                            "d_model": spec.model["d_model"]}
        if result.status == "ok":
            metrics |= length_metrics(model, spec, device)
    metrics["series"] = history_series(result.history)
    if result.status != "ok":
        metrics["status"] = result.status
        metrics["message"] = (f"loss or gradient not finite at step {result.diverged_at} "
                              f"(train_loss {result.final.get('train_loss')})")
    return metrics
