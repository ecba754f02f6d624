"""The one training loop: every study's updates, schedule, clipping, non-finite handling,
checkpoints and resume; what differs between studies is in its hooks.

A study (harness.train.loop: language-model and synthetic tasks; harness.train.translation
.train: translation) hands the Trainer its model, its learning rate per update and a Hooks
object: the batch of each update and its loss, what to log after an update, when to
evaluate, what an evaluation logs and whether it ends the run (a target reached, patience,
a FLOP budget, a search's pruner), and the study's own part of a checkpoint. The Trainer
does the rest, alike for every study:

- Adam (the paper's betas and epsilon unless told otherwise), fused where this torch has it
  for the CPU too, under a LambdaLR whose lr during update k (1-based) is exactly lr_at(k);
- an update: the loss's backward, the global gradient norm (before clipping), clipping to
  `clip` when set, then the optimizer and schedule step;
- a loss or gradient norm that is not finite: no step, and the run stops there, diverged;
- seconds: fetching a batch and its update, synchronised on a GPU (evaluations and
  checkpoints excluded);
- randomness (dropout): seeded from `seed` in a fork of the caller's RNG, so the caller's
  is left as it was;
- checkpoints (where Saving names a file): after every evaluation, and every `every_s`
  seconds of training between them; a run resumes from its checkpoint (its model,
  optimizer, schedule, RNG and the hooks' state) to the numbers of an uninterrupted run.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from harness.train import checkpoint

BETAS, EPS = (0.9, 0.98), 1e-9  # the paper's Adam (PyTorch's betas are (0.9, 0.999))


class Hooks(Protocol):
    """What a study decides; the Trainer calls them in this order for each update."""

    def batch(self, step: int) -> Any:
        """The batch of update `step` (from 1), on the model's device."""

    def loss(self, batch: Any) -> torch.Tensor:
        """The scalar training loss of `batch` (the forward pass)."""

    def trained(self, step: int, batch: Any, loss: float, grad_norm: float,
                seconds: float) -> None:
        """After update `step` (not finite: the last; its step was not taken)."""

    def due(self, step: int) -> bool:
        """Whether an evaluation falls after update `step` (the last update always has one)."""

    def evaluate(self, step: int) -> bool:
        """Evaluate after update `step` (0: before training); True ends the run."""

    def state(self) -> dict[str, Any]:
        """The study's part of a checkpoint: tensors and plain data only."""

    def restore(self, state: dict[str, Any]) -> tuple[int, bool]:
        """Take back state() from a checkpoint; (the step it reached, whether it had ended)."""


@dataclass(frozen=True)
class Saving:
    """Where a run's checkpoint goes (None: no checkpoints) and how often."""

    path: Path | None = None
    # the point's config_key, held in its checkpoint (as "point_id": a point id of older runs
    # was its config_key, so their checkpoints resume): another point's is moved aside
    key: str = ""
    every_s: float = 180.0  # seconds of training between checkpoints, besides evaluations
    resume: bool = True  # False (--no-resume): train from scratch whatever is there


NO_SAVING = Saving()  # no checkpoints


@dataclass
class Fit:
    """How a run ended."""

    steps: int = 0  # the last update run (a diverging one included)
    diverged_at: int | None = None  # the update whose loss or gradient norm was not finite
    loss: float = math.nan  # that update's loss and gradient norm (the last update's)
    grad_norm: float = math.nan
    resumed_from: int = 0  # the step of the checkpoint this run resumed from (0: none)


def fast_adam() -> dict[str, bool]:
    """Adam's fused implementation (one kernel over every parameter) where this torch has it
    for the CPU too, else the multi-tensor (foreach) one: the same update, fewer calls."""
    return {"fused": True} if "fused" in inspect.signature(torch.optim.Adam).parameters \
        else {"foreach": True}


class Trainer:
    """Trains `model` in place for at most `steps` updates with the learning rate lr_at(k)
    during update k (1-based)."""

    def __init__(self, model: nn.Module, lr_at: Callable[[int], float], steps: int, *,
                 seed: int, device: torch.device, clip: float | None = None,
                 betas: tuple[float, float] = BETAS, eps: float = EPS,
                 saving: Saving = NO_SAVING) -> None:
        if clip is not None and not clip > 0:
            raise ValueError(f"invalid clip {clip!r}; must be None or > 0")
        self.model, self.steps, self.seed, self.device = model, steps, seed, device
        self.clip, self.saving = clip, saving
        self.params = [p for p in model.parameters() if p.requires_grad]
        # the base lr is 1.0, so the lambda's value is the learning rate itself; LambdaLR
        # calls it with 0 before the first update, hence the shift by one
        self.opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=betas, eps=eps,
                                    **fast_adam())
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda i: lr_at(i + 1))

    def update(self, loss: torch.Tensor) -> tuple[float, float]:
        """One update from `loss`: (loss, gradient norm before clipping). The optimizer and
        schedule do not step when either is not finite."""
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.get_total_norm([p.grad for p in self.params if p.grad is not None])
        if self.clip is not None:  # without a clip, no pass over the gradients scaling by 1
            nn.utils.clip_grads_with_norm_(self.params, self.clip, grad_norm)
        # one host sync for both numbers (the divergence check needs them every update)
        loss_value, grad_value = torch.stack([loss.detach().float(), grad_norm.float()]).tolist()
        if math.isfinite(loss_value) and math.isfinite(grad_value):
            self.opt.step()
            self.sched.step()
        return loss_value, grad_value

    def fit(self, hooks: Hooks) -> Fit:
        """Train to the end, to a stop an evaluation asks for, or to a non-finite update;
        from the checkpoint when there is one (and resuming is on)."""
        cuda = [self.device] if self.device.type == "cuda" else []
        fit = Fit()
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(self.seed)
            self.model.train()
            saved = checkpoint.load(self.saving.path, self.saving.key,
                                    self.model.state_dict()) \
                if self.saving.path is not None and self.saving.resume else None
            if saved is None:
                hooks.evaluate(0)
                first = 1
            else:
                fit.steps, ended = self._restore(saved, hooks)
                fit.resumed_from = fit.steps
                first = self.steps + 1 if ended else fit.steps + 1
            last_save = time.monotonic()
            for step in range(first, self.steps + 1):
                start = time.perf_counter()
                batch = hooks.batch(step)
                fit.loss, fit.grad_norm = self.update(hooks.loss(batch))
                if cuda:
                    torch.cuda.synchronize(self.device)
                hooks.trained(step, batch, fit.loss, fit.grad_norm, time.perf_counter() - start)
                fit.steps = step
                if not (math.isfinite(fit.loss) and math.isfinite(fit.grad_norm)):
                    fit.diverged_at = step
                    break
                if hooks.due(step) or step == self.steps:
                    stop = hooks.evaluate(step)
                    self._save(hooks)
                    last_save = time.monotonic()
                    if stop:
                        break
                elif time.monotonic() - last_save > self.saving.every_s:
                    self._save(hooks)
                    last_save = time.monotonic()
        return fit

    def _save(self, hooks: Hooks) -> None:
        if self.saving.path is None:
            return
        state = {"point_id": self.saving.key, "model": self.model.state_dict(),
                 "opt": self.opt.state_dict(), "sched": self.sched.state_dict(),
                 "rng": torch.get_rng_state(), **hooks.state()}
        if self.device.type == "cuda":  # dropout on a GPU draws from the GPU's generator
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        if not checkpoint.save(self.saving.path, state):  # unwritable: train on without
            self.saving = NO_SAVING

    def _restore(self, state: dict[str, Any], hooks: Hooks) -> tuple[int, bool]:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.sched.load_state_dict(state["sched"])
        torch.set_rng_state(state["rng"])
        if self.device.type == "cuda" and "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        return hooks.restore(state)
