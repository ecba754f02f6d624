"""A checkpoint written before point ids were short is found and resumed: its file is named
by the digest of the long id (today's Point.digest) and holds the long id (today's
config_key)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

import experiments
from harness.runner import Context
from harness.train import checkpoint
from harness.train.translation.data import TrainStream, make_batch
from harness.train.translation.train import Plan, train
from tests.harness.train.test_checkpoint_faults import IDS, STEPS, _model


def _train(path: Path, key: str) -> tuple[object, list[int]]:
    model, seen = _model(), []

    def evaluate() -> dict[str, float]:
        seen.append(len(seen))
        return {"dev_bleu_greedy": float(model.w.detach())}

    data = [make_batch([[5, 6, 7]], [[8, 9]], IDS)]
    plan = Plan(STEPS, 1e-2, 2, 0.0, 4, checkpoint=path, checkpoint_key=key, checkpoint_s=0.0)
    return train(model, TrainStream(data, 0), plan, torch.device("cpu"), 0, evaluate), seen


def test_a_checkpoint_of_older_code_resumes(tmp_path: Path) -> None:
    point = experiments.points("translation-tiny")[0]
    long_id = point.config_key  # what older code called the point's id
    digest = hashlib.sha256(long_id.encode()).hexdigest()[:12]
    older = tmp_path / point.suite / "checkpoints" / \
        f"{point.subject}-s{point.seed}-{digest}-cpu.pt"
    _train(older, long_id)  # older code: the file named and keyed by the long id
    found = checkpoint.point_path(point, Context(torch.device("cpu"), cache_dir=tmp_path))
    assert found == older
    log, seen = _train(found, point.config_key)
    assert log.resumed_from == STEPS and seen == []  # resumed at its end: nothing trained
    assert found.exists() and not list(found.parent.glob("*.unusable-*"))
