"""`tvr migrate-ids`: rows, curves and variant configs of older runs, keyed by long point ids,
renamed to today's short ids, so resume finds them; run twice, it changes nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

import experiments
from experiments.spec import Point, short_id
from harness.cli import cli
from harness.cli.migrate import migrate
from harness.errors import BadInput
from harness.machines import this_machine
from harness.results import config_path, read_config, read_results, results_path
from harness.run import sweep
from harness.schema import config_key_of
from harness.variants import CONFIG_FILE

REPO = Path(__file__).resolve().parents[3]
ANCHOR = "anchor-joeynmt-transformer-bible-ny-en-split7b636607f6-bpe4000-max80-cfg0"


def _as_older_code_wrote_it(folder: Path) -> None:
    """The suite's rows as older code wrote them: keyed by the long id, no config_key, no
    configurations."""
    csv = folder / "results.csv"
    rows = pd.read_csv(csv, dtype=str, keep_default_na=False)
    rows["point_id"] = rows.pop("config_key")
    csv.write_text(rows.to_csv(index=False, lineterminator="\n"))
    for config in (folder / "configs").glob("*.json"):
        config.unlink()


@pytest.mark.slow  # two points of the smoke suite measured
def test_resume_finds_the_rows_of_older_runs_once_migrated(tmp_path: Path) -> None:
    points = [p for p in experiments.points("smoke") if p.seq_len == 16][:2]
    cpu = torch.device("cpu")
    first = sweep.run_suite("smoke", points, cpu, tmp_path, None, min_run_time=0.01,
                            progress=False)
    assert first.statuses["ok"] == 2
    folder = tmp_path / "smoke"
    for p in points:
        assert Point.from_config(read_config(folder / "results.csv", p.point_id)) == p
    _as_older_code_wrote_it(folder)
    with pytest.raises(BadInput, match="2 finished rows name their point by the long id"):
        sweep.run_suite("smoke", points, cpu, tmp_path, None, progress=False)

    done = migrate(tmp_path)
    assert (done.rows, done.configs) == (2, 2)
    rows = read_results(folder / "results.csv")
    assert list(rows["point_id"]) == [p.point_id for p in points]
    assert list(rows["config_key"]) == [p.config_key for p in points]
    for p in points:
        saved = read_config(folder / "results.csv", p.point_id)
        assert Point.from_config(saved) == p and saved["machine"] == this_machine()
    again = sweep.run_suite("smoke", points, cpu, tmp_path, None, progress=False)
    assert (again.resumed, sum(again.statuses.values())) == (2, 0)

    before = (folder / "results.csv").read_bytes()
    assert migrate(tmp_path).files == []  # twice: nothing to change
    assert (folder / "results.csv").read_bytes() == before
    assert not list(folder.glob(".*.lock"))


def _point(seed: int) -> Point:
    return Point("s", "train", "lstm-lm", 16, 8, 2, seed=seed, study="heads")


def test_migration_renames_every_file_keyed_by_point_id(tmp_path: Path) -> None:
    """Results and curves of a suite, its archive and a variant, and gpu/'s; a short id
    and another tool's are left as they are; an old and a new row of one point keep the
    later, as append_row would."""
    old, new = _point(0), _point(1)
    rows = pd.DataFrame({"suite": "s", "point_id": [old.config_key, new.point_id, ANCHOR,
                                                    new.config_key],
                         "device": "cpu", "machine": "m", "status": "ok",
                         "loss": ["1.5", "2.5", "3.5", "4.5"]})
    curves = pd.DataFrame({"point_id": [old.config_key, new.point_id, new.config_key],
                           "machine": "m", "metric": "loss", "step": ["1", "1", "2"],
                           "value": ["1.0", "2.0", "3.0"]})
    folders = [tmp_path / "s", tmp_path / "s" / "archive", tmp_path / "s" / "variants" / "v",
               tmp_path / "gpu" / "s"]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        rows.to_csv(folder / "results.csv", index=False)
        curves.to_csv(folder / "series.csv", index=False)
    (folders[2] / CONFIG_FILE).write_text(json.dumps(
        {"suite": "s", "variant": "v", "commands": ["tvr run s --set x=1"],
         "points": [{"point_id": old.config_key, "seed": 0}]}))
    artifact = tmp_path / "mlartifacts" / "s" / "r" / "artifacts" / "results.csv"
    artifact.parent.mkdir(parents=True)
    rows.to_csv(artifact, index=False)

    done = migrate(tmp_path)
    assert (done.rows, done.curves, done.configs) == (4 * 2, 4 * 2, 0)  # no suite "s" today
    assert len(done.files) == 4 * 2 + 1
    assert done.longest == (max(len(old.config_key), len(ANCHOR)), len(ANCHOR))
    for folder in folders:
        got = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)
        assert list(got["point_id"]) == [old.point_id, ANCHOR, new.point_id]
        assert list(got["loss"]) == ["1.5", "3.5", "4.5"]  # the new row replaced by the later
        assert list(got["config_key"]) == [old.config_key, "", new.config_key]
        series = pd.read_csv(folder / "series.csv", dtype=str)
        assert list(series["point_id"]) == [old.point_id, new.point_id]
        assert list(series["value"]) == ["1.0", "3.0"]
    variant = json.loads((folders[2] / CONFIG_FILE).read_text())
    assert variant["points"] == [{"point_id": old.point_id, "seed": 0}]
    assert pd.read_csv(artifact)["point_id"][0] == old.config_key  # MLflow's copy: as logged
    assert migrate(tmp_path).files == []


def test_migration_saves_the_configuration_of_declared_points(tmp_path: Path) -> None:
    point = experiments.points("smoke")[0]
    folder = tmp_path / "smoke"
    folder.mkdir()
    pd.DataFrame({"suite": "smoke", "point_id": [point.config_key], "device": "cpu",
                  "machine": "ref", "status": "ok"}).to_csv(folder / "results.csv", index=False)
    assert migrate(tmp_path).configs == 1
    saved = json.loads(config_path(folder / "results.csv", point.point_id).read_text())
    assert Point.from_config(saved) == point
    assert (saved["machine"], saved["device"], saved["config_key"]) == \
        ("ref", "cpu", point.config_key)


def test_committed_hypotheses_keep_their_names() -> None:
    """Every hypotheses file a committed row names carries the digest of the row's long id,
    which ends its short id: the names today's code gives them (Point.digest)."""
    seen = 0
    for csv in sorted((REPO / "results").rglob("results.csv")):
        rows = pd.read_csv(csv, dtype=str, keep_default_na=False)
        for row in rows.to_dict("records"):
            key = config_key_of(row)
            digest = hashlib.sha256(key.encode()).hexdigest()[:12]
            short = short_id(key) or row["point_id"]
            for name in (v for k, v in row.items() if k.endswith("_hypotheses") and v):
                assert f"-{digest}-" in name, (csv, name)
                assert short == row["point_id"] or short.endswith(f"-{digest}"), (csv, key)
                seen += 1
    assert seen > 100


def test_migrate_ids_says_what_it_did_and_refuses_a_missing_folder(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli, ["migrate-ids", "--out", str(tmp_path / "nope")],
                            prog_name="tvr")
    assert missing.exit_code == 2
    assert missing.output.strip().splitlines() == [
        f"Error: --out {tmp_path / 'nope'}: no such folder"]
    point = _point(0)
    folder = tmp_path / "s"
    folder.mkdir()
    pd.DataFrame({"suite": "s", "point_id": [point.config_key], "status": "ok"}).to_csv(
        results_path(tmp_path, "s"), index=False)
    done = runner.invoke(cli, ["migrate-ids", "--out", str(tmp_path)], prog_name="tvr")
    assert done.exit_code == 0, done.output
    assert done.output == (f"{tmp_path}: 1 rows and 0 curve rows renamed in 1 files, 0 "
                           f"configurations written; the longest point id "
                           f"{len(point.config_key)} characters before, "
                           f"{len(point.point_id)} after\n")
