"""MLflow that shows the reference: short run names unique within a study, the command as
source, the measuring commit on synced runs, a store built from the committed CSVs, and a
re-sync that adds nothing."""

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from mlflow import MlflowClient

import experiments
from harness.cli import cli
from harness.results import config_keys, read_results
from harness.track.names import run_name, run_names
from harness.track.sync import sync_suite

REFERENCE = Path(__file__).resolve().parents[3] / "results"


@pytest.mark.parametrize("suite", sorted(p.parent.name for p in REFERENCE.glob("*/results.csv")))
def test_committed_rows_get_short_names_unique_within_their_study(suite: str) -> None:
    rows = read_results(REFERENCE / suite / "results.csv").to_dict("records")
    names = run_names(rows)
    assert len(set(names.values())) == len(rows)
    assert max(len(n) for n in names.values()) <= 110  # the sizes as the rows spell them
    assert not any("#" in n or "nan" in n for n in names.values()), names
    assert not any(re.search(r"\.0*[1-9]\d{4,}", n) for n in names.values()), names  # 0.1867


def test_distance_k_points_are_told_apart_by_k() -> None:
    rows = read_results(REFERENCE / "convergence-quick" / "results.csv")
    rows = rows[rows["task"] == "distance-k"].to_dict("records")
    names = run_names(rows).values()
    assert any(" k=1 " in n for n in names) and any(" k=12 " in n for n in names)


def test_a_plain_sweep_is_named_by_subject_and_sizes_only() -> None:
    points = experiments.points("smoke")
    names = run_names([{**p.fields(), **p.columns(), "point_id": p.point_id}
                       for p in points])
    assert sorted(names.values()) == sorted(
        f"{p.subject} seq_len={p.seq_len} d_model={p.d_model}" for p in points)


def test_sizes_a_point_has_not_are_left_out_of_its_name() -> None:
    """Translation's points keep their sizes in their config (a baseline has none): their
    run names and progress labels say `retrieval`, not `retrieval seq_len=0 d_model=0`."""
    from harness.run.progress import label

    points = experiments.points("translation-quick")
    assert {p.seq_len for p in points} == {0}
    names = run_names([{**p.fields(), **p.columns(), "point_id": p.point_id} for p in points])
    assert len(set(names.values())) == len(points)
    assert not any("seq_len" in n or "d_model=0" in n for n in names.values()), names
    assert {label(p, 0) for p in points} == {p.subject for p in points}
    assert run_name({"model": "retrieval", "seq_len": 0, "d_model": 0}, "x") == "retrieval"


def test_a_matched_model_is_named_by_the_width_its_row_records() -> None:
    """convergence-quick's LSTM is matched to the Transformer's parameters at d_model 64 and
    trains (and records) a wider d_model: its live run name says the same as a synced one."""
    from harness.train.train_runner import trained_width

    rows = read_results(REFERENCE / "convergence-quick" / "results.csv")
    lstm = rows[rows["model"] == "lstm-lm"]
    point = next(p for p in experiments.points("convergence-quick")
                 if p.config_key == config_keys(lstm).iloc[0])
    assert point.d_model == 64 and trained_width(point) == lstm["d_model"].iloc[0] > 64
    assert f"d_model={lstm['d_model'].iloc[0]}" in run_names(lstm.to_dict("records"))[
        lstm["point_id"].iloc[0]]


def _runs(uri: str, suite: str):  # noqa: ANN202
    client = MlflowClient(uri)
    return client.search_runs([client.get_experiment_by_name(suite).experiment_id])


@pytest.mark.slow
def test_sync_uses_the_rows_commit_and_a_resync_adds_nothing(tmp_path: Path) -> None:
    shutil.copytree(REFERENCE / "identities", tmp_path / "identities")
    path = tmp_path / "identities" / "results.csv"
    text = path.read_text().splitlines()
    head, rows = text[0], text[1:]
    path.write_text("\n".join([head + ",git_commit,git_dirty", *(r + ",abc123,False"
                                                                 for r in rows)]) + "\n")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert sync_suite(tmp_path, "identities", uri) == (6, 6)
    assert sync_suite(tmp_path, "identities", uri) == (0, 6)
    runs = _runs(uri, "identities")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 6  # the empty re-sync left no parent
    assert {r.data.tags["mlflow.source.git.commit"] for r in children} == {"abc123"}
    assert {r.data.tags["mlflow.source.name"] for r in runs} == {"tvr run identities"}


@pytest.mark.slow
def test_doctor_reports_a_missing_store_and_builds_it_from_the_csvs(tmp_path: Path) -> None:
    shutil.copytree(REFERENCE / "quick", tmp_path / "quick")
    missing = CliRunner().invoke(cli, ["doctor", "--out", str(tmp_path)])
    assert missing.exit_code == 0 and "missing (nothing tracked here yet)" in missing.output
    assert not (tmp_path / "mlflow.db").exists()
    built = CliRunner().invoke(cli, ["doctor", "--repair", "--out", str(tmp_path)])
    stored = read_results(tmp_path / "quick" / "results.csv")
    assert built.exit_code == 0 and f"quick: {len(stored)} rows logged" in built.output
    runs = _runs(f"sqlite:///{tmp_path}/mlflow.db", "quick")
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert parent.data.metrics["n_star.layer-vs-lstm.d128.n_star_flops"] == 256
    assert any(k.startswith("verdict: ") for k in parent.data.tags)
    # the commit that measured each row (rows older than the column: "unknown"), not today's
    commits = {str(c) if isinstance(c, str) and c else "unknown"
               for c in stored.get("git_commit", ["unknown"])}
    assert {r.data.tags["mlflow.source.git.commit"] for r in runs if r != parent} == commits
