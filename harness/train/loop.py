"""Training on a task (language-model and synthetic-task studies): Adam, the paper's
schedule, held-out evaluation, early stop at a target accuracy.

The task's Batch knows how to call the model (harness.train.batch), so nothing here depends on
a model's internals; the update, clipping, a non-finite update, checkpoints and resume are
the one trainer's (harness.train.trainer), this module gives it the task's hooks. Runs are
reproducible: data is a pure function of (task seed, step), dropout draws from cfg.seed, and
on CPU two runs with one seed give bitwise-identical history (timing fields aside).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import models
from harness.train.batch import Batch, Task, check_int
from harness.train.trainer import BETAS, EPS, NO_SAVING, Saving, Trainer

SCHEDULES = ("constant", "noam", "cosine")
TIMING_KEYS = ("tokens_per_s", "wall_s")  # the only history fields that differ between reruns


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000  # optimizer updates at most; early stop may end sooner
    batch_size: int = 32  # sequences per update (and per evaluation batch)
    lr: float = 1e-3  # peak lr for constant/cosine; for noam a multiplier (1.0 = the paper)
    schedule: str = "constant"  # "constant" | "noam" | "cosine"
    warmup: int = 0  # linear warm-up steps; noam needs > 0 (the paper used 4000)
    betas: tuple[float, float] = BETAS  # the paper's Adam betas (PyTorch's are 0.999)
    eps: float = EPS  # the paper's Adam epsilon
    clip: float | None = None  # max global grad norm; None = no clipping (the paper had none)
    eval_every: int = 100  # steps between evaluations on the held-out set
    eval_batches: int = 4  # held-out batches (of batch_size) per evaluation
    target_accuracy: float | None = None  # stop once held-out token accuracy >= this
    seed: int = 0  # dropout and any other torch randomness inside the loop
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_every", "eval_batches"):
            check_int(name, getattr(self, name), 1)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"invalid schedule {self.schedule!r}; valid: {', '.join(SCHEDULES)}")
        check_int("warmup", self.warmup, 0)
        if self.schedule == "noam" and self.warmup == 0:
            raise ValueError("invalid warmup 0 for schedule 'noam'; it needs warmup > 0")
        if not self.lr > 0:
            raise ValueError(f"invalid lr {self.lr!r}; must be > 0")
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"invalid clip {self.clip!r}; must be None or > 0")
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise ValueError(f"invalid target_accuracy {self.target_accuracy!r}; must be in (0, 1]")


def lr_at(step: int, cfg: TrainConfig, d_model: int | None = None) -> float:
    """Learning rate of update `step` (1-based).

    constant: cfg.lr, after a linear warm-up over cfg.warmup steps if warmup > 0.
    noam:     cfg.lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)   (the paper, eq. 3)
    cosine:   linear warm-up to cfg.lr, then cosine decay to 0 at cfg.steps.
    """
    if step < 1:
        raise ValueError(f"invalid step {step!r}; updates are numbered from 1")
    if cfg.schedule == "noam":
        if d_model is None:
            raise ValueError("schedule 'noam' needs d_model")
        return cfg.lr * d_model**-0.5 * min(step**-0.5, step * cfg.warmup**-1.5)
    if cfg.warmup and step <= cfg.warmup:
        return cfg.lr * step / cfg.warmup
    if cfg.schedule == "constant":
        return cfg.lr
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def masked_loss(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy (nats) over the target positions the batch's mask counts."""
    return F.cross_entropy(logits[batch.mask].float(), batch.targets[batch.mask])


def evaluate(model: nn.Module, batches: Sequence[Batch]) -> dict[str, float]:
    """loss (nats/token), bits_per_token (= bits per char on a character corpus), token
    accuracy and sequence accuracy (every counted position right), over counted targets."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    nll = torch.zeros((), dtype=torch.float64, device=device)
    correct = n_tokens = seq_correct = n_seqs = 0
    with torch.no_grad():
        for batch in batches:
            batch = batch.to(device)
            logits = batch.logits(model)
            m = batch.mask
            nll += F.cross_entropy(logits[m].double(), batch.targets[m], reduction="sum")
            right = logits.argmax(-1) == batch.targets
            correct += int((right & m).sum())
            n_tokens += int(m.sum())
            seq_correct += int((right | ~m).all(-1).sum())
            n_seqs += batch.batch_size
    model.train(was_training)
    loss = float(nll) / n_tokens
    return {"loss": loss, "bits_per_token": loss / math.log(2), "accuracy": correct / n_tokens,
            "seq_accuracy": seq_correct / n_seqs, "n_eval_tokens": n_tokens}


@dataclass(frozen=True)
class TrainResult:
    status: str  # "ok" (ran to the end or reached the target) | "diverged"
    steps_run: int  # updates attempted, including a diverging one
    history: list[dict[str, Any]] = field(repr=False)  # one record per evaluation, step 0 first
    steps_to_target: int | None  # None: target not set or not reached
    tokens_to_target: int | None  # training input tokens read up to the target
    wall_to_target: float | None  # training seconds (evaluation excluded) up to the target
    final: dict[str, Any]  # last evaluation record; if diverged, {step, train_loss, grad_norm}
    n_params: int
    diverged_at: int | None = None  # the update whose loss or gradient was NaN/inf
    resumed_from: int = 0  # the step of the checkpoint this run resumed from (0: none)


def count_params(model: nn.Module) -> int:
    """Distinct trainable parameters (tied embedding/head weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class _Task:
    """A task run's hooks for harness.train.trainer: its batches and loss, the evaluation
    records with the training sums since the last one, the target accuracy."""

    def __init__(self, model: nn.Module, task: Task, cfg: TrainConfig, d_model: int | None,
                 eval_set: list[Batch], on_eval: Callable[[dict[str, Any]], None] | None):
        self.model, self.task, self.cfg, self.d_model = model, task, cfg, d_model
        self.eval_set, self.on_eval = eval_set, on_eval
        self.device = torch.device(cfg.device)
        self.records: list[dict[str, Any]] = []
        self.steps, self.tokens, self.wall = 0, 0, 0.0  # totals: updates, input tokens trained
        # on, training seconds
        self.hit = False  # the target accuracy was reached (at the last record)
        self._reset()

    def _reset(self) -> None:
        self.since: dict[str, float] = {"loss": 0.0, "grad": 0.0, "steps": 0, "tokens": 0,
                                        "wall": 0.0}

    def batch(self, step: int) -> Batch:
        return self.task.train_batch(step, self.cfg.batch_size).to(self.device)

    def loss(self, batch: Batch) -> torch.Tensor:
        return masked_loss(batch.logits(self.model), batch)

    def trained(self, step: int, batch: Batch, loss: float, grad_norm: float,
                seconds: float) -> None:
        tokens = batch.n_input_tokens
        self.steps = step
        self.tokens += tokens
        self.wall += seconds
        for key, value in (("loss", loss), ("grad", grad_norm), ("steps", 1), ("tokens", tokens),
                           ("wall", seconds)):
            self.since[key] += value

    def due(self, step: int) -> bool:
        return step % self.cfg.eval_every == 0

    def evaluate(self, step: int) -> bool:
        """Record an evaluation; True once held-out accuracy reaches the target."""
        since, n = self.since, max(1, self.since["steps"])
        rec: dict[str, Any] = {"step": step, **evaluate(self.model, self.eval_set)}
        if self.task.reports_bpc:
            rec["bits_per_char"] = rec["bits_per_token"]
        rec |= {
            "train_loss": since["loss"] / n if since["steps"] else math.nan,
            "grad_norm": since["grad"] / n if since["steps"] else math.nan,
            "lr": lr_at(max(step, 1), self.cfg, self.d_model),  # the rate of update `step`
            "tokens": self.tokens,
            "tokens_per_s": since["tokens"] / since["wall"] if since["wall"] else math.nan,
            "wall_s": self.wall,
        }
        self._reset()
        self.records.append(rec)
        if self.on_eval is not None:
            self.on_eval(rec)
        target = self.cfg.target_accuracy
        self.hit = target is not None and step > 0 and rec["accuracy"] >= target
        return self.hit

    def state(self) -> dict[str, Any]:
        return {"records": self.records, "since": self.since,
                "totals": (self.steps, self.tokens, self.wall, self.hit)}

    def restore(self, state: dict[str, Any]) -> tuple[int, bool]:
        self.records, self.since = state["records"], state["since"]
        self.steps, self.tokens, self.wall, self.hit = state["totals"]
        return self.steps, self.hit


def train(
    model: nn.Module,
    task: Task,
    cfg: TrainConfig,
    on_eval: Callable[[dict[str, Any]], None] | None = None,
    *,
    d_model: int | None = None,
    saving: Saving = NO_SAVING,
) -> TrainResult:
    """Train `model` on `task` in place. Evaluates at step 0, every cfg.eval_every steps and
    at the end; each record {step, loss, accuracy, seq_accuracy, bits_per_token,
    [bits_per_char], train_loss, grad_norm, lr, tokens, tokens_per_s, wall_s} goes to history
    and to on_eval. train_loss and grad_norm (pre-clipping) are means since the last record;
    wall_s and tokens_per_s count training time only. d_model is needed for schedule noam.
    With `saving`, checkpoints as the trainer writes them, and a resume from one."""
    if cfg.schedule == "noam" and d_model is None:
        raise ValueError("schedule 'noam' needs d_model")
    device = torch.device(cfg.device)
    model.to(device)
    model.train()
    trainer = Trainer(model, lambda k: lr_at(k, cfg, d_model), cfg.steps, seed=cfg.seed,
                      device=device, clip=cfg.clip, betas=cfg.betas, eps=cfg.eps,
                      saving=saving)
    eval_set = [b.to(device) for b in task.eval_batches(cfg.batch_size, cfg.eval_batches)]
    hooks = _Task(model, task, cfg, d_model, eval_set, on_eval)
    fit = trainer.fit(hooks)
    n_params = count_params(model)
    if fit.diverged_at is not None:
        final = {"step": fit.steps, "train_loss": fit.loss, "grad_norm": fit.grad_norm}
        return TrainResult("diverged", fit.steps, hooks.records, None, None, None, final,
                           n_params, fit.diverged_at, fit.resumed_from)
    hit = hooks.hit
    return TrainResult("ok", fit.steps, hooks.records, fit.steps if hit else None,
                       hooks.tokens if hit else None, hooks.wall if hit else None,
                       hooks.records[-1], n_params, None, fit.resumed_from)


def param_count(name: str, **config: Any) -> int:
    """Parameters of models.build(name, **config), built on the meta device (no memory)."""
    with torch.device("meta"):
        return count_params(models.build(name, **config))


def matched_config(arch: str, target_params: int, base: dict[str, Any],
                   tolerance: float = 0.10) -> dict[str, Any]:
    """`base` with d_model chosen so `arch` has the parameter count closest to target_params
    (e.g. an LSTM matched to a Transformer). Keys `arch` does not take (n_heads, d_ff for an
    RNN) are dropped; for attention models d_model stays a multiple of n_heads. Raises
    ValueError if the closest count is more than `tolerance` away from the target."""
    fields = {f.name for f in dataclasses.fields(models.model_config(arch))}
    config = {k: v for k, v in base.items() if k in fields}
    step = config.get("n_heads", 1) if "n_heads" in fields else 1

    def count(units: int) -> int:
        return param_count(arch, **(config | {"d_model": units * step}))

    lo, hi = 1, 2
    while count(hi) < target_params and hi < 2**16:  # count grows with d_model
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # smallest units with count >= target lies in (lo, hi]
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) < target_params else (lo, mid)
    best = min((lo, hi), key=lambda u: abs(count(u) - target_params))
    got = count(best)
    if abs(got - target_params) > tolerance * target_params:
        raise ValueError(f"cannot match {target_params} parameters with {arch!r} within "
                         f"{tolerance:.0%}: closest is d_model={best * step} with {got}")
    return config | {"d_model": best * step}
