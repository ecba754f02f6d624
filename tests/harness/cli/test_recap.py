"""`tvr migrate-ids` after a FLOP cap rose: runs that ended below their old cap take today's
point's names (rows, curves, configuration, hypotheses, checkpoints, the plan), the others go
to the archive, nothing today's is overwritten, and a migration killed part-way is finished
by running it again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from experiments.spec import Point
from experiments.translation import translate_point
from harness.cli import recap as recap_module
from harness.cli.recap import recap
from harness.plan import read_plan, write_plan
from harness.report.superseded import archive_path
from harness.report.unfinished import unfinished
from harness.results import config_path, read_config, read_results
from harness.train import checkpoint

OLD, NEW = 2.4e14, 4.8e14


def _points(budget: float) -> list[Point]:
    return [translate_point("s", "transformer", 32, 16, seed=s, budget_flops=budget,
                            patience=6) for s in range(6)]


def _row(point: Point, stopped_by: str, flops: float, status: str = "ok",
         budget: float = OLD) -> dict[str, str]:
    return {"suite": "s", "point_id": point.point_id, "runner": "translate",
            "model": point.subject, "seed": str(point.seed), "device": "cpu",
            "machine": "m", "status": status, "budget_flops": repr(budget),
            "stopped_by": stopped_by, "train_flops": repr(flops), "dev_bleu": "18.5",
            "dev_hypotheses": f"hypotheses/{point.subject}-s{point.seed}-{point.digest}"
                              "-cpu-m.dev.txt", "config_key": point.config_key}


def _checkpoint(folder: Path, point: Point, flops: float) -> Path:
    path = folder / "checkpoints" / f"{point.subject}-s{point.seed}-{point.digest}-cpu.pt"
    path.parent.mkdir(exist_ok=True)
    torch.save({"point_id": point.config_key, "model": {"w": torch.ones(2)},
                "log": {"flops": flops, "steps": 7}}, path)
    return path


def _suite(folder: Path, rows: list[dict[str, str]]) -> None:
    (folder / "hypotheses").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    for row in rows:
        (folder / row["dev_hypotheses"]).write_text(f"{row['point_id']}\n")
    pd.DataFrame({"point_id": [r["point_id"] for r in rows], "machine": "m",
                  "metric": "dev_bleu_greedy", "step": "193", "value": "1.5"}).to_csv(
        folder / "series.csv", index=False)


def _files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_runs_below_the_old_cap_take_todays_names_and_the_others_are_archived(
        tmp_path: Path) -> None:
    old, new = _points(OLD), _points(NEW)
    other = replace(new[3], options=replace(new[3].options, patience=5, budget_flops=OLD))
    folder = tmp_path / "s"
    rows = [_row(old[0], "patience", 1e14), _row(old[1], "budget", OLD + 1e9),
            _row(new[2], "patience", 3e14, budget=NEW), _row(other, "patience", 1e14),
            _row(old[4], "pruned", 1e13), _row(old[5], "", float("nan"), status="error")]
    _suite(folder, rows)
    under_way = _checkpoint(folder, old[3], 5e13)
    at_its_cap = _checkpoint(folder, old[2], OLD)  # a kept checkpoint of a capped run
    baseline = Point("s", "retrieval", "retrieval", 0, 0, 0)
    write_plan(folder, [baseline, old[0], old[1], new[2], old[3], old[4], old[5]])

    done = recap(tmp_path, {("s", p.config_key): p for p in new})

    assert done.rows == [f"{old[0].point_id} -> {new[0].point_id} (m)"]
    assert done.archived == [f"{old[i].point_id} (m)" for i in (1, 4, 5)] + [
        f"{at_its_cap.name} (a checkpoint)"]
    assert done.checkpoints == [f"{under_way.name} -> {new[3].point_id}"]
    kept = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)
    assert list(kept["point_id"]) == [new[0].point_id, new[2].point_id, other.point_id]
    carried = kept.iloc[0]
    assert (carried["config_key"], float(carried["budget_flops"])) == (new[0].config_key, NEW)
    assert carried["dev_hypotheses"] == rows[0]["dev_hypotheses"].replace(
        old[0].digest, new[0].digest)
    assert (folder / carried["dev_hypotheses"]).read_text() == f"{old[0].point_id}\n"
    assert not (folder / rows[0]["dev_hypotheses"]).exists()
    assert Point.from_config(read_config(folder / "results.csv", new[0].point_id)) == new[0]
    assert not config_path(folder / "results.csv", old[0].point_id).exists()
    curves = pd.read_csv(folder / "series.csv", dtype=str)
    assert list(curves["point_id"]) == [new[0].point_id, new[2].point_id, other.point_id]

    archive = archive_path(tmp_path, "s").parent
    archived = pd.read_csv(archive / "results.csv", dtype=str)
    assert list(archived["point_id"]) == [old[i].point_id for i in (1, 4, 5)]
    assert (archive / rows[1]["dev_hypotheses"]).is_file()
    assert list(pd.read_csv(archive / "series.csv")["point_id"]) == [
        old[i].point_id for i in (1, 4, 5)]
    assert (archive / "checkpoints" / at_its_cap.name).is_file()
    assert not list(folder.glob(".*.lock")) and not list(archive.glob(".*.lock"))

    assert not under_way.exists() and not at_its_cap.exists()
    moved = under_way.with_name(under_way.name.replace(old[3].digest, new[3].digest))
    state = checkpoint.load(moved, new[3].config_key, {"w": torch.zeros(2)})
    assert state is not None and state["log"] == {"flops": 5e13, "steps": 7}
    assert [e["point_id"] for e in read_plan(folder)] == [
        baseline.point_id, *(p.point_id for p in new)]
    assert [e["digest"] for e in read_plan(folder)][1:] == [p.digest for p in new]
    # what is left to train: the archived points and the run under way, by today's names
    # (and the baseline, which has no row here)
    left = unfinished(folder, read_results(folder / "results.csv"))
    assert list(left) == ["retrieval-retrieval-s0", *(
        new[i].point_id.removesuffix(f"-{new[i].digest}") for i in (1, 3, 4, 5))]

    before = _files(tmp_path)
    again = recap(tmp_path, {("s", p.config_key): p for p in new})
    assert not again and _files(tmp_path) == before


def test_a_run_today_has_measured_already_stays_and_the_old_one_is_archived(tmp_path):
    """Today's row, hypotheses and checkpoint are never overwritten by an older cap's."""
    old, new = _points(OLD), _points(NEW)
    folder = tmp_path / "s"
    rows = [_row(old[0], "patience", 1e14), _row(new[0], "patience", 3e14, budget=NEW)]
    _suite(folder, rows)
    older_run = _checkpoint(folder, old[1], 1e14)
    todays_run = _checkpoint(folder, new[1], 3e14)
    done = recap(tmp_path, {("s", p.config_key): p for p in new})
    assert done.rows == [] and done.checkpoints == []
    assert done.archived == [f"{old[0].point_id} (m)", f"{older_run.name} (a checkpoint)"]
    kept = read_results(folder / "results.csv")
    assert list(kept["point_id"]) == [new[0].point_id]
    assert (folder / rows[1]["dev_hypotheses"]).read_text() == f"{new[0].point_id}\n"
    assert torch.load(todays_run, weights_only=True)["log"]["flops"] == 3e14


def test_a_migration_killed_before_its_rows_are_written_is_finished_by_running_it_again(
        tmp_path, monkeypatch):
    old, new = _points(OLD), _points(NEW)
    folder = tmp_path / "s"
    rows = [_row(old[0], "patience", 1e14), _row(old[1], "budget", OLD)]
    _suite(folder, rows)
    import harness.files

    real = harness.files.write_atomic

    def killed(path, data):
        if Path(path).name == "results.csv":
            raise KeyboardInterrupt  # the kill, as the rows are about to be written
        real(path, data)

    monkeypatch.setattr(harness.files, "write_atomic", killed)
    with pytest.raises(KeyboardInterrupt):
        recap(tmp_path, {("s", p.config_key): p for p in new})
    monkeypatch.setattr(harness.files, "write_atomic", real)
    assert list(read_results(folder / "results.csv")["point_id"]) == [
        old[0].point_id, old[1].point_id]  # the rows as they were; the files renamed
    done = recap(tmp_path, {("s", p.config_key): p for p in new})
    assert done.rows == [f"{old[0].point_id} -> {new[0].point_id} (m)"]
    row = read_results(folder / "results.csv").iloc[0]
    assert row["point_id"] == new[0].point_id
    assert (folder / row["dev_hypotheses"]).read_text() == f"{old[0].point_id}\n"
    assert list(pd.read_csv(folder / "series.csv")["point_id"]) == [new[0].point_id]
    assert config_path(folder / "results.csv", new[0].point_id).is_file()


def test_the_budget_is_read_wherever_the_config_key_lists_it() -> None:
    point = _points(OLD)[0]
    assert recap_module._budget(point.config_key) == OLD
    assert recap_module._budget("table2-translate-x-budget_flops=1e+14-n0-d32-b16-float32-s0") \
        == 1e14  # the last option listed
    assert recap_module._budget("table2-translate-x-patience=6-n0-d32-b16-float32-s0") is None


def test_an_unreadable_checkpoint_is_named_and_left_as_it_is(tmp_path: Path) -> None:
    new = _points(NEW)
    damaged = tmp_path / "s" / "checkpoints" / "transformer-s0-0123456789ab-cpu.pt"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"not a checkpoint")
    done = recap(tmp_path, {("s", p.config_key): p for p in new})
    assert done.unreadable == [damaged.name] and damaged.read_bytes() == b"not a checkpoint"
    assert done.line().endswith(f"1 checkpoints unreadable, left as they are: {damaged.name}")
