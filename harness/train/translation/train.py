"""The translation training loop: the paper's recipe at a chosen scale.

Adam (0.9, 0.98, 1e-9); the paper's schedule lr = c * min(step^-0.5, step * w^-1.5) with the
warm-up w in updates (the paper: 4000 of 100k) and c set so the peak, at step w, is
`peak_lr`; label-smoothed cross-entropy over the target tokens. A run ends at `steps`, at
`max_flops` counted training FLOPs (a budget that does not depend on the machine), by early
stopping, or when a tuning search prunes it. Training FLOPs
are counted by the FLOP counter on a forward and backward of each distinct batch shape (the
count depends on the shape only), outside the timed region; seconds are the updates' wall
time alone (evaluations excluded). Every eval_every steps the first dev sentences are
greedy-decoded and scored, which gives the dev BLEU curve against steps, FLOPs and seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from harness.measure.flops import count_flops
from harness.train.loop import fast_adam
from harness.train.translation import checkpoint
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


@dataclass
class TrainLog:
    flops: int = 0  # training FLOPs so far (forward + backward)
    seconds: float = 0.0  # update wall time so far
    steps: int = 0
    diverged_at: int | None = None
    series: Curve = field(default_factory=dict)
    best: float = -math.inf  # the best curve value (early stopping's key) and its step
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
    key: str = "dev_bleu_greedy"
    checkpoint: Path | None = None
    point_id: str = ""
    checkpoint_s: float = 180.0
    resume: bool = True  # False (--no-resume): train from scratch, whatever checkpoint is there
    max_flops: float = 0.0  # 0: no budget
    eval_flops: float = 0.0  # evaluate each time the FLOPs pass a multiple; 0: eval_every
    # a tuning search's pruner: (training FLOPs so far, the curve so far, a resumed run's
    # included: metric -> [(step, value)]) -> stop now; called at each evaluation after the
    # first
    prune: Callable[[int, Curve], bool] | None = None


class _Run:
    """The state of one training run, which is exactly what a checkpoint holds."""

    def __init__(self, model: nn.Module, plan: Plan) -> None:
        self.lr_at = schedule(plan.peak_lr, max(1, plan.warmup))
        self.model, self.plan = model, plan
        self.opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                                    **fast_adam())
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda i: self.lr_at(i + 1))
        self.log, self.shape_flops = TrainLog(), {}
        self.running, self.n_running, self.since_best = 0.0, 0, 0
        self.best_state: dict[str, torch.Tensor] | None = None

    def state(self) -> dict[str, Any]:
        """Tensors and plain data only (the log as a dict): read back with weights_only."""
        return {"point_id": self.plan.point_id, "model": self.model.state_dict(),
                "opt": self.opt.state_dict(), "sched": self.sched.state_dict(),
                "rng": torch.get_rng_state(), "log": dict(vars(self.log)),
                "shape_flops": {tuple(k): v for k, v in self.shape_flops.items()},
                "running": (self.running, self.n_running, self.since_best),
                "best_state": self.best_state}

    def restore(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.sched.load_state_dict(state["sched"])
        torch.set_rng_state(state["rng"])
        known = TrainLog.__dataclass_fields__
        self.log = TrainLog(**{k: v for k, v in state["log"].items() if k in known})
        self.shape_flops = state["shape_flops"]
        self.running, self.n_running, self.since_best = state["running"]
        self.best_state = state["best_state"]
        self.log.resumed_from = self.log.steps

    def save(self) -> None:
        if self.plan.checkpoint is not None and \
                not checkpoint.save(self.plan.checkpoint, self.state()):
            self.plan = replace(self.plan, checkpoint=None)  # unwritable: train on without


def train(model: nn.Module, stream: TrainStream, plan: Plan, device: torch.device, seed: int,
          evaluate: Callable[[], dict[str, float]]) -> TrainLog:
    """Train in place; `evaluate` (called at 0, every plan.eval_every and at the end)
    returns the curve's metrics (dev_bleu_greedy, dev_ppl), logged with the FLOPs and seconds
    reached. Resumes from plan.checkpoint when it exists."""
    run = _Run(model, plan)
    torch.manual_seed(seed)
    model.train()
    saved = checkpoint.load(plan.checkpoint, plan.point_id, model.state_dict()) \
        if plan.checkpoint and plan.resume else None
    if saved is not None:
        run.restore(saved)
    else:
        _evaluate(run, 0, evaluate)
    last_save = time.monotonic()
    first = plan.steps + 1 if run.log.stopped_by else run.log.steps + 1
    for step in range(first, plan.steps + 1):
        batch = stream.batch(step)
        if not _update(run, batch.to(device), step, device):
            return run.log
        spent = bool(plan.max_flops) and run.log.flops >= plan.max_flops
        if _due(plan, step, run.log.flops, run.shape_flops[batch.shape]) \
                or step == plan.steps or spent:
            stop = _evaluate(run, step, evaluate)
            if spent and not stop:
                run.log.stopped_by = "budget"
            run.log.stopped_early = run.log.stopped_by == "patience" and step < plan.steps
            stop = stop or spent
            run.save()
            last_save = time.monotonic()
            if stop:
                break
        elif time.monotonic() - last_save > plan.checkpoint_s:
            run.save()
            last_save = time.monotonic()
    if plan.patience and run.best_state is not None:
        model.load_state_dict(run.best_state)  # early stopping ends on the best weights
    return run.log


def _due(plan: Plan, step: int, flops: int, last: int) -> bool:
    """An evaluation falls at this update: every eval_flops FLOPs (the update that passed a
    multiple), or every eval_every updates."""
    if plan.eval_flops:
        return flops // plan.eval_flops > (flops - last) // plan.eval_flops
    return step % plan.eval_every == 0


def _update(run: _Run, batch: PairBatch, step: int, device: torch.device) -> bool:
    """One optimiser update; False when the loss was not finite (the log says where)."""
    smoothing, log = run.plan.smoothing, run.log
    if batch.shape not in run.shape_flops:  # counted once per shape, outside the timing
        run.shape_flops[batch.shape] = _count(run.model, batch, smoothing)
    start = time.perf_counter()
    loss = loss_of(run.model, batch, smoothing)
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    run.opt.step()
    run.sched.step()
    value = float(loss.detach())
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    log.seconds += time.perf_counter() - start
    log.flops += run.shape_flops[batch.shape]
    log.steps = step
    if not math.isfinite(value):
        log.diverged_at = step
        return False
    run.running, run.n_running = run.running + value, run.n_running + 1
    return True


def _evaluate(run: _Run, step: int, evaluate: Callable[[], dict[str, float]]) -> bool:
    """Log the curve point of `step`; True when early stopping says stop."""
    log = run.log
    if step:
        log.add("train_loss", step, run.running / max(1, run.n_running))
        log.add("lr", step, run.lr_at(step))
        run.running, run.n_running = 0.0, 0
    values = evaluate()
    for key, value in values.items():
        log.add(key, step, value)
    log.add("train_flops", step, log.flops)
    log.add("train_s", step, log.seconds)
    value = values.get(run.plan.key, -math.inf)
    if value > log.best:
        log.best, log.best_step, run.since_best = value, step, 0
        if run.plan.patience:
            run.best_state = {k: v.detach().clone() for k, v in run.model.state_dict().items()}
    elif step:
        run.since_best += 1
    if step and run.plan.prune is not None and run.plan.prune(log.flops, log.series):
        log.stopped_by = "pruned"
        return True
    if bool(run.plan.patience) and run.since_best >= run.plan.patience:
        log.stopped_by = "patience"
        return True
    return False


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
