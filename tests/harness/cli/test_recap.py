"""`tvr migrate-ids` after a FLOP cap rose: runs that ended below their old cap take today's
point's names (rows, curves, configuration, hypotheses, checkpoints), runs the cap ended go
to the archive, and everything else stays as it was."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch

from experiments.spec import Point
from experiments.translation import translate_point
from harness.cli.recap import recap
from harness.plan import read_plan, write_plan
from harness.report.superseded import archive_path
from harness.results import config_path, read_config
from harness.train import checkpoint

OLD, NEW = 2.4e14, 4.8e14


def _points(budget: float) -> list[Point]:
    return [translate_point("s", "transformer", 32, 16, seed=s, budget_flops=budget,
                            patience=6) for s in range(4)]


def _row(point: Point, stopped_by: str, flops: float) -> dict[str, str]:
    return {"suite": "s", "point_id": point.point_id, "runner": "translate",
            "model": point.subject, "seed": str(point.seed), "device": "cpu",
            "machine": "m", "status": "ok", "budget_flops": repr(OLD),
            "stopped_by": stopped_by, "train_flops": repr(flops), "dev_bleu": "18.5",
            "dev_hypotheses": f"hypotheses/{point.subject}-s{point.seed}-{point.digest}"
                              "-cpu-m.dev.txt", "config_key": point.config_key}


def _checkpoint(folder: Path, point: Point, flops: float) -> Path:
    path = folder / "checkpoints" / f"{point.subject}-s{point.seed}-{point.digest}-cpu.pt"
    path.parent.mkdir(exist_ok=True)
    torch.save({"point_id": point.config_key, "model": {"w": torch.ones(2)},
                "log": {"flops": flops, "steps": 7}}, path)
    return path


def test_runs_below_the_old_cap_take_todays_names_and_capped_ones_are_archived(
        tmp_path: Path) -> None:
    old, new = _points(OLD), _points(NEW)
    other = replace(new[3], options=replace(new[3].options, patience=5, budget_flops=OLD))
    folder = tmp_path / "s"
    (folder / "hypotheses").mkdir(parents=True)
    rows = [_row(old[0], "patience", 1e14), _row(old[1], "budget", OLD + 1e9),
            _row(new[2], "patience", 3e14), _row(other, "patience", 1e14)]
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    for row in rows:
        (folder / row["dev_hypotheses"]).write_text("a verse\n")
    pd.DataFrame({"point_id": [r["point_id"] for r in rows], "machine": "m",
                  "metric": "dev_bleu_greedy", "step": "193", "value": "1.5"}).to_csv(
        folder / "series.csv", index=False)
    under_way = _checkpoint(folder, old[3], 5e13)
    at_its_cap = _checkpoint(folder, old[2], OLD)  # a kept checkpoint of a capped run
    baseline = Point("s", "retrieval", "retrieval", 0, 0, 0)
    write_plan(folder, [baseline, old[0], old[1], new[2], old[3]])

    done = recap(tmp_path, {("s", p.config_key): p for p in new})

    assert done.rows == [f"{old[0].point_id} -> {new[0].point_id}"]
    assert done.archived == [old[1].point_id]
    assert done.checkpoints == [f"{under_way.name} -> {new[3].point_id}"]
    kept = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)
    assert list(kept["point_id"]) == [new[0].point_id, new[2].point_id, other.point_id]
    carried = kept.iloc[0]
    assert (carried["config_key"], float(carried["budget_flops"])) == (new[0].config_key, NEW)
    assert carried["dev_hypotheses"] == rows[0]["dev_hypotheses"].replace(
        old[0].digest, new[0].digest)
    assert (folder / carried["dev_hypotheses"]).read_text() == "a verse\n"
    assert not (folder / rows[0]["dev_hypotheses"]).exists()
    assert Point.from_config(read_config(folder / "results.csv", new[0].point_id)) == new[0]
    assert not config_path(folder / "results.csv", old[0].point_id).exists()
    curves = pd.read_csv(folder / "series.csv", dtype=str)
    assert list(curves["point_id"]) == [new[0].point_id, new[2].point_id, other.point_id]

    archived = pd.read_csv(archive_path(tmp_path, "s"), dtype=str)
    assert list(archived["point_id"]) == [old[1].point_id]
    assert (archive_path(tmp_path, "s").parent / rows[1]["dev_hypotheses"]).is_file()
    assert list(pd.read_csv(archive_path(tmp_path, "s").parent / "series.csv")["point_id"]) \
        == [old[1].point_id]

    assert not under_way.exists() and at_its_cap.exists()
    moved = under_way.with_name(under_way.name.replace(old[3].digest, new[3].digest))
    state = checkpoint.load(moved, new[3].config_key, {"w": torch.zeros(2)})
    assert state is not None and state["log"] == {"flops": 5e13, "steps": 7}

    assert [e["point_id"] for e in read_plan(folder)] == [
        baseline.point_id, *(p.point_id for p in new)]
    assert [e["digest"] for e in read_plan(folder)][1:] == [p.digest for p in new]

    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    again = recap(tmp_path, {("s", p.config_key): p for p in new})
    assert (again.rows, again.archived, again.checkpoints) == ([], [], [])
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before


def test_an_unreadable_checkpoint_is_named_and_left_as_it_is(tmp_path: Path) -> None:
    new = _points(NEW)
    damaged = tmp_path / "s" / "checkpoints" / "transformer-s0-0123456789ab-cpu.pt"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"not a checkpoint")
    done = recap(tmp_path, {("s", p.config_key): p for p in new})
    assert done.unreadable == [damaged.name] and damaged.read_bytes() == b"not a checkpoint"
    assert done.line().endswith(f"1 checkpoints unreadable, left as they are: {damaged.name}")
