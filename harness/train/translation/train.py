"""The translation training loop: the paper's recipe at a chosen scale.

Adam (0.9, 0.98, 1e-9); the paper's schedule lr = c * min(step^-0.5, step * w^-1.5) with the
warm-up w a fraction of the run (the paper: 4000 of 100k steps) and c set so the peak, at
step w, is `peak_lr`; label-smoothed cross-entropy over the target tokens. Training FLOPs
are counted by the FLOP counter on a forward and backward of each distinct batch shape (the
count depends on the shape only), outside the timed region; seconds are the updates' wall
time alone (evaluations excluded). Every eval_every steps the first dev sentences are
greedy-decoded and scored, which gives the dev BLEU curve against steps, FLOPs and seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from harness.measure.flops import count_flops
from harness.train.translation.data import PairBatch, TrainStream
from models.rnn import RNNSeq2Seq


def logits(model: nn.Module, batch: PairBatch) -> torch.Tensor:
    """(B, T, V) teacher-forced logits. The plain RNN encoder-decoder takes no padding mask
    (it reads its source's padding, which length-sorted batches keep short)."""
    if isinstance(model, RNNSeq2Seq):
        return model(batch.src, batch.tgt_in)
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
    return math.exp(nll / n)


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
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    def add(self, key: str, step: int, value: float) -> None:
        self.series.setdefault(key, []).append((step, float(value)))


def train(model: nn.Module, stream: TrainStream, steps: int, peak_lr: float,
          warmup_fraction: float, smoothing: float, device: torch.device, seed: int,
          eval_every: int, evaluate: Callable[[], dict[str, float]]) -> TrainLog:
    """Train in place; `evaluate` (called at 0, every eval_every and at the end) returns the
    curve's metrics (dev_bleu_greedy), logged with the FLOPs and seconds reached."""
    warmup = max(1, round(warmup_fraction * steps))
    lr_at = schedule(peak_lr, warmup)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: lr_at(i + 1))
    log, shape_flops = TrainLog(), {}
    running, n_running = 0.0, 0
    torch.manual_seed(seed)
    model.train()
    _eval(log, 0, evaluate)
    for step in range(1, steps + 1):
        batch = stream.batch(step).to(device)
        if batch.shape not in shape_flops:  # counted once per shape, outside the timing
            shape_flops[batch.shape] = _count(model, batch, smoothing)
        start = time.perf_counter()
        loss = loss_of(model, batch, smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        value = float(loss.detach())
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        log.seconds += time.perf_counter() - start
        log.flops += shape_flops[batch.shape]
        log.steps = step
        if not math.isfinite(value):
            log.diverged_at = step
            return log
        running, n_running = running + value, n_running + 1
        if step % eval_every == 0 or step == steps:
            log.add("train_loss", step, running / n_running)
            log.add("lr", step, lr_at(step))
            running, n_running = 0.0, 0
            _eval(log, step, evaluate)
    return log


def _count(model: nn.Module, batch: PairBatch, smoothing: float) -> int:
    """Forward + backward FLOPs of one update on this batch (gradients discarded)."""
    device = batch.src.device  # the count's dropout draws must not shift the run's
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        flops = count_flops(lambda: loss_of(model, batch, smoothing).backward())
    model.zero_grad(set_to_none=True)
    return flops


def _eval(log: TrainLog, step: int, evaluate: Callable[[], dict[str, float]]) -> None:
    for key, value in evaluate().items():
        log.add(key, step, value)
    log.add("train_flops", step, log.flops)
    log.add("train_s", step, log.seconds)


def to_reach(log: TrainLog, key: str, target: float) -> dict[str, Any]:
    """Step, FLOPs and seconds at the first curve point whose `key` reaches `target`."""
    curve = log.series.get(key, [])
    flops, secs = dict(log.series["train_flops"]), dict(log.series["train_s"])
    for step, value in curve:
        if value >= target:
            return {"steps_to_bleu": step, "flops_to_bleu": flops[step],
                    "seconds_to_bleu": secs[step]}
    return {}
