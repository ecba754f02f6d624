"""The one trainer: its optimizer and schedule, an update (one host sync, clipping only when
set, no step when the loss or gradient is not finite), and a task run stopped and resumed
from its checkpoint ending as an uninterrupted one."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import models
from harness.train.loop import TIMING_KEYS, TrainConfig, lr_at, masked_loss, train
from harness.train.tasks import make_task
from harness.train.trainer import Saving, Trainer

pytestmark = pytest.mark.usefixtures("one_thread")
CPU = torch.device("cpu")


def tiny_lm(vocab_size: int, **kw) -> nn.Module:
    return models.build("transformer-lm", preset="tiny", vocab_size=vocab_size, d_model=32,
                        n_layers=1, n_heads=2, d_ff=64, **({"dropout": 0.0} | kw))


@pytest.mark.parametrize("schedule,warmup", [("noam", 5), ("cosine", 3), ("constant", 2)])
def test_the_schedule_gives_lr_at_during_each_update(schedule: str, warmup: int) -> None:
    cfg = TrainConfig(schedule=schedule, lr=0.5, warmup=warmup, steps=12)
    model = nn.Linear(2, 1)
    trainer = Trainer(model, lambda k: lr_at(k, cfg, 16), cfg.steps, seed=0, device=CPU)
    assert trainer.opt.defaults["betas"] == (0.9, 0.98) and trainer.opt.defaults["eps"] == 1e-9
    group = trainer.opt.param_groups[0]
    assert group.get("fused") or group.get("foreach")
    for step in range(1, 13):  # the lr in force during update `step`
        assert group["lr"] == lr_at(step, cfg, 16)
        trainer.update(model(torch.ones(1, 2)).sum())


def test_an_update_syncs_once_and_scales_only_with_a_clip(monkeypatch) -> None:
    task = make_task("copy", 4, 8, "lm", 0)
    model = tiny_lm(task.vocab_size)
    scaled = []
    monkeypatch.setattr(nn.utils, "clip_grads_with_norm_", lambda *a, **k: scaled.append(a))
    items = []
    real_item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda t: items.append(1) or real_item(t))
    batch = task.train_batch(1, 8)
    loss, grad = Trainer(model, lambda k: 1e-3, 1, seed=0, device=CPU).update(
        masked_loss(batch.logits(model), batch))
    assert not scaled and not items  # no .item(): one .tolist() for both numbers
    params = list(model.parameters())
    expected = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(p.grad) for p in params if p.grad is not None]))
    assert grad == pytest.approx(expected.item(), rel=1e-5) and math.isfinite(loss)
    Trainer(model, lambda k: 1e-3, 1, seed=0, device=CPU, clip=1.0).update(
        masked_loss(batch.logits(model), batch))
    assert len(scaled) == 1


@pytest.mark.parametrize("bad", ["loss", "gradient"])
def test_a_non_finite_loss_or_gradient_takes_no_step(bad: str) -> None:
    model = nn.Linear(2, 1)
    trainer = Trainer(model, lambda k: 1e-2, 3, seed=0, device=CPU)
    before = [p.detach().clone() for p in model.parameters()]
    w = model.weight
    # a NaN loss; or a finite one (sqrt(0) = 0) whose gradient is not (1 / (2 sqrt(0)))
    loss = model(torch.ones(1, 2)).sum() * math.nan if bad == "loss" else \
        torch.sqrt(w - w.detach()).sum()
    value, grad = trainer.update(loss)
    assert math.isfinite(value) == (bad == "gradient") and not math.isfinite(grad)
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    assert trainer.sched.last_epoch == 0 and not trainer.opt.state  # neither stepped


def test_a_bad_clip_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid clip 0"):
        Trainer(nn.Linear(2, 1), lambda k: 1e-3, 1, seed=0, device=CPU, clip=0)


class Killed(Exception):
    """Stands for a kill: raised at an evaluation, before its checkpoint is written."""


@pytest.mark.slow
@pytest.mark.parametrize("every_s", [0.0, 1e9])  # checkpoints at every update, or at evaluations
def test_a_task_run_resumed_from_its_checkpoint_ends_as_an_uninterrupted_one(
        tmp_path, every_s: float) -> None:
    task = make_task("sort", 4, 6, "lm", seed=3)
    cfg = TrainConfig(steps=30, batch_size=16, lr=2e-3, eval_every=10, seed=11,
                      schedule="cosine", warmup=5, clip=1.0, target_accuracy=0.999)
    saving = Saving(tmp_path / "c.pt", "p", every_s)

    def run(on_eval=None):
        torch.manual_seed(0)
        model = tiny_lm(task.vocab_size, dropout=0.1)  # dropout: the RNG is resumed too
        return train(model, task, cfg, on_eval, saving=saving), model

    def kill_at_20(record: dict) -> None:
        if record["step"] == 20:
            raise Killed

    with pytest.raises(Killed):
        run(kill_at_20)
    resumed, resumed_model = run()
    saving.path.unlink()
    whole, whole_model = run()
    def strip(history: list[dict]) -> list[dict]:  # NaN read back from a file: not `is` NaN
        return [{k: "nan" if v != v else v for k, v in r.items() if k not in TIMING_KEYS}
                for r in history]

    assert strip(resumed.history) == strip(whole.history)  # == on floats: bitwise
    assert [r["step"] for r in whole.history] == [0, 10, 20, 30]
    assert (resumed.resumed_from, whole.resumed_from) == (19 if every_s == 0 else 10, 0)
    assert all(torch.equal(a, b) for a, b in zip(resumed_model.parameters(),
                                                 whole_model.parameters(), strict=True))
    again, _ = run()  # its checkpoint says it ended: nothing is trained again
    assert again.resumed_from == 30 and strip(again.history) == strip(whole.history)
