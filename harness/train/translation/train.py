"""The translation training loop: the paper's recipe at a chosen scale.

Adam (0.9, 0.98, 1e-9); the paper's schedule lr = c * min(step^-0.5, step * w^-1.5) with the
warm-up w in updates (the paper: 4000 of 100k) and c set so the peak, at step w, is
`peak_lr`; label-smoothed cross-entropy over the target tokens. A run ends at `steps`, at
`max_flops` counted training FLOPs (a budget that does not depend on the machine), by early
stopping, or when a tuning search prunes it. Training FLOPs are counted by the FLOP counter
on a forward and backward of each distinct batch shape (the count depends on the shape
only), outside the timed region; seconds are the updates' wall time (a batch's fetch
included; evaluations, FLOP counts and checkpoints excluded). Every eval_every steps the
first dev sentences are greedy-decoded and scored, which gives the dev BLEU curve against
steps, FLOPs and seconds.
The update, clipping, a non-finite update, checkpoints and resume are the one trainer's
(harness.train.trainer); this module holds what translation decides (its hooks).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from harness.measure.flops import count_flops
from harness.train.trainer import Saving, Trainer
from harness.train.translation.data import PairBatch, TrainStream

Curve = dict[str, list[tuple[int, float]]]  # a training curve: metric -> [(step, value)]


def logits(model: nn.Module, batch: PairBatch) -> torch.Tensor:
    """(B, T, V) teacher-forced logits; every encoder-decoder masks its source padding."""
    return model(batch.src, batch.tgt_in, src_key_padding_mask=batch.pad)


def loss_of(model: nn.Module, batch: PairBatch, smoothing: float) -> torch.Tensor:
    out = logits(model, batch)
    return F.cross_entropy(out[batch.mask].float(), batch.tgt_out[batch.mask],
                           label_smoothing=smoothing)


@torch.no_grad()
def perplexity(model: nn.Module, data: list[PairBatch], device: torch.device) -> float:
    """exp(mean negative log-likelihood per target subword, EOS included), no smoothing."""
    was = model.training
    model.eval()
    nll, n = 0.0, 0
    for batch in data:
        batch = batch.to(device)
        out = logits(model, batch)
        nll += float(F.cross_entropy(out[batch.mask].double(), batch.tgt_out[batch.mask],
                                     reduction="sum"))
        n += batch.n_target_tokens
    model.train(was)
    return math.exp(nll / n) if nll / n < 700 else math.inf  # exp overflows past ~709


def schedule(peak_lr: float, warmup: int) -> Callable[[int], float]:
    """lr of update `step` (from 1): the paper's formula, scaled to peak at `warmup`."""
    c = peak_lr * math.sqrt(warmup)
    return lambda step: c * min(step**-0.5, step * warmup**-1.5)


LOWER_IS_BETTER = ("dev_ppl",)  # curve metrics whose best is their least


@dataclass
class TrainLog:
    flops: int = 0  # training FLOPs so far (forward + backward)
    seconds: float = 0.0  # update wall time so far
    steps: int = 0
    diverged_at: int | None = None
    series: Curve = field(default_factory=dict)
    best: float = -math.inf  # the best value of early stopping's key and its step (-inf: none)
    best_step: int = 0
    stopped_early: bool = False  # stopped: `patience` evaluations without a new best
    stopped_by: str = ""  # "patience", "budget" (max_flops), "pruned"; "" ran all steps (the
    # row says "steps")
    resumed_from: int = 0  # the step of the checkpoint this run resumed from (0: none)

    def add(self, key: str, step: int, value: float) -> None:
        self.series.setdefault(key, []).append((step, float(value)))


@dataclass(frozen=True)
class Plan:
    """How long and how to train, and where a checkpoint goes. `patience` > 0 stops once
    that many evaluations in a row bring no new best of `key` (early stopping), and the
    model ends with its best weights; checkpoints (when `checkpoint` is set) are written
    every `checkpoint_s` seconds of training and at every evaluation."""

    steps: int
    peak_lr: float
    warmup: int  # updates
    smoothing: float
    eval_every: int
    patience: int = 0
    key: str = "dev_bleu_greedy"  # or "dev_ppl" (LOWER_IS_BETTER: its best is its least)
    checkpoint: Path | None = None
    checkpoint_key: str = ""  # the point's config_key: trainer.Saving.key
    checkpoint_s: float = 180.0
    resume: bool = True  # False (--no-resume): train from scratch, whatever checkpoint is there
    max_flops: float = 0.0  # 0: no budget
    eval_flops: float = 0.0  # evaluate each time the FLOPs pass a multiple; 0: eval_every
    # a tuning search's pruner: (training FLOPs so far, the curve so far, a resumed run's
    # included: metric -> [(step, value)]) -> stop now; called at each evaluation after the
    # first
    prune: Callable[[int, Curve], bool] | None = None
    clip: float | None = None  # max global gradient norm; None: no clipping (the paper's)


class _Translation:
    """A translation run's hooks for harness.train.trainer: its batches and loss, its log
    (the curve, FLOPs, seconds), early stopping, the FLOP budget and a search's pruner."""

    def __init__(self, model: nn.Module, stream: TrainStream, plan: Plan, device: torch.device,
                 evaluate: Callable[[], dict[str, float]]) -> None:
        self.model, self.stream, self.plan, self.device = model, stream, plan, device
        self.values = evaluate
        self.lr_at = schedule(plan.peak_lr, max(1, plan.warmup))
        self.log, self.shape_flops, self.last_flops = TrainLog(), {}, 0
        self.running, self.n_running, self.since_best = 0.0, 0, 0
        self.best_state: dict[str, torch.Tensor] | None = None

    def batch(self, step: int) -> PairBatch:
        return self.stream.batch(step).to(self.device)

    def loss(self, batch: PairBatch) -> torch.Tensor:
        return loss_of(self.model, batch, self.plan.smoothing)

    def trained(self, step: int, batch: PairBatch, loss: float, grad_norm: float,
                seconds: float) -> None:
        if batch.shape not in self.shape_flops:  # counted once per shape, outside the timing
            self.shape_flops[batch.shape] = _count(self.model, batch, self.plan.smoothing)
        self.last_flops = self.shape_flops[batch.shape]
        log = self.log
        log.seconds += seconds
        log.flops += self.last_flops
        log.steps = step
        self.running, self.n_running = self.running + loss, self.n_running + 1

    def _spent(self) -> bool:
        return bool(self.plan.max_flops) and self.log.flops >= self.plan.max_flops

    def due(self, step: int) -> bool:
        """Every eval_flops FLOPs (the update that passed a multiple), else every eval_every
        updates; and once the FLOP budget is spent."""
        if self.plan.eval_flops:
            flops, every = self.log.flops, self.plan.eval_flops
            return flops // every > (flops - self.last_flops) // every or self._spent()
        return step % self.plan.eval_every == 0 or self._spent()

    def evaluate(self, step: int) -> bool:
        """Log the curve point of `step`; True when patience, the budget or the pruner
        says stop."""
        log, plan = self.log, self.plan
        if step:
            log.add("train_loss", step, self.running / max(1, self.n_running))
            log.add("lr", step, self.lr_at(step))
            self.running, self.n_running = 0.0, 0
        values = self.values()
        for key, value in values.items():
            log.add(key, step, value)
        log.add("train_flops", step, log.flops)
        log.add("train_s", step, log.seconds)
        if plan.key in LOWER_IS_BETTER:  # the first value, if finite, is the first best
            value = values.get(plan.key, math.inf)
            better = value < (math.inf if log.best == -math.inf else log.best)
        else:
            value = values.get(plan.key, -math.inf)
            better = value > log.best
        if better:
            log.best, log.best_step, self.since_best = value, step, 0
            if plan.patience:
                self.best_state = {k: v.detach().clone()
                                   for k, v in self.model.state_dict().items()}
        elif step:
            self.since_best += 1
        if not step:
            return False
        if plan.prune is not None and plan.prune(log.flops, log.series):
            log.stopped_by = "pruned"
        elif bool(plan.patience) and self.since_best >= plan.patience:
            log.stopped_by = "patience"
        elif self._spent():
            log.stopped_by = "budget"
        log.stopped_early = log.stopped_by == "patience" and step < plan.steps
        return bool(log.stopped_by)

    def state(self) -> dict[str, Any]:
        """The log as a dict: a checkpoint is read back with weights_only."""
        return {"log": dict(vars(self.log)),
                "shape_flops": {tuple(k): v for k, v in self.shape_flops.items()},
                "running": (self.running, self.n_running, self.since_best),
                "best_state": self.best_state}

    def restore(self, state: dict[str, Any]) -> tuple[int, bool]:
        known = TrainLog.__dataclass_fields__
        self.log = TrainLog(**{k: v for k, v in state["log"].items() if k in known})
        self.shape_flops = state["shape_flops"]
        self.running, self.n_running, self.since_best = state["running"]
        self.best_state = state["best_state"]
        self.log.resumed_from = self.log.steps
        return self.log.steps, bool(self.log.stopped_by)


def trainer(model: nn.Module, plan: Plan, device: torch.device, seed: int) -> Trainer:
    """The Trainer of a translation run: the paper's Adam and the plan's schedule."""
    return Trainer(model, schedule(plan.peak_lr, max(1, plan.warmup)), plan.steps, seed=seed,
                   device=device, clip=plan.clip,
                   saving=Saving(plan.checkpoint, plan.checkpoint_key, plan.checkpoint_s,
                                 plan.resume))


def train(model: nn.Module, stream: TrainStream, plan: Plan, device: torch.device, seed: int,
          evaluate: Callable[[], dict[str, float]]) -> TrainLog:
    """Train in place; `evaluate` (called at 0, every plan.eval_every and at the end)
    returns the curve's metrics (dev_bleu_greedy, dev_ppl), logged with the FLOPs and seconds
    reached. Resumes from plan.checkpoint when it exists."""
    hooks = _Translation(model, stream, plan, device, evaluate)
    fit = trainer(model, plan, device, seed).fit(hooks)
    hooks.log.diverged_at = fit.diverged_at
    if plan.patience and hooks.best_state is not None and fit.diverged_at is None:
        model.load_state_dict(hooks.best_state)  # early stopping ends on the best weights
    return hooks.log


def _count(model: nn.Module, batch: PairBatch, smoothing: float) -> int:
    """Forward + backward FLOPs of one update on this batch (gradients discarded)."""
    device = batch.src.device  # the count's dropout draws must not shift the run's
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        flops = count_flops(lambda: loss_of(model, batch, smoothing).backward())
    model.zero_grad(set_to_none=True)
    return flops


def to_reach(log: TrainLog, key: str, target: float) -> dict[str, Any]:
    """Step, FLOPs and seconds at the first curve point whose `key` reaches `target`."""
    curve = log.series.get(key, [])
    flops, secs = dict(log.series["train_flops"]), dict(log.series["train_s"])
    for step, value in curve:
        if value >= target:
            return {"steps_to_bleu": step, "flops_to_bleu": flops[step],
                    "seconds_to_bleu": secs[step]}
    return {}
