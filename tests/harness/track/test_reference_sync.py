"""The store `make run` builds holds the reference: `tvr run SUITE` logs the suite's rows of
other machines (committed with the code) before its sweep, into a fresh real SQLite store,
with no `tvr sync`; a parent run per invocation is named by what it measured, and a resume
that measured nothing leaves none (it carried the suite's whole headline as if measured)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from mlflow import MlflowClient

import experiments
from harness.cli import cli
from harness.machines import MACHINE_ENV
from harness.results import read_results
from harness.run import point, sweep
from harness.runner import Result
from harness.track.values import REFERENCE_TAG

REFERENCE = Path(__file__).resolve().parents[3] / "results"


def _uri(out: Path) -> str:
    return f"sqlite:///{out.resolve()}/mlflow.db"


def _parents(client: MlflowClient, suite: str) -> list:
    experiment = client.get_experiment_by_name(suite)
    assert experiment is not None, f"no experiment {suite}"
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags]


def test_a_run_logs_the_reference_rows_into_a_fresh_store(tmp_path: Path, monkeypatch) -> None:
    """This machine has done every point already (a second `make run`, or rows copied in):
    the run measures nothing, yet the store it creates holds the reference, tagged, and no
    parent run of this machine's."""
    out = tmp_path / "results"
    shutil.copytree(REFERENCE / "identities", out / "identities")
    csv = out / "identities" / "results.csv"
    theirs = read_results(csv)
    monkeypatch.setenv(MACHINE_ENV, "user-box")
    pd.concat([theirs, theirs.assign(machine="user-box")], ignore_index=True).to_csv(
        csv, index=False)
    assert not (out / "mlflow.db").exists()
    result = CliRunner().invoke(cli, ["run", "identities", "--out", str(out), "--tracking-uri",
                                      _uri(out)])
    assert result.exit_code == 0, result.output
    assert "nothing run" in result.output
    assert f"{len(theirs)} reference rows" in result.stderr

    client = MlflowClient(_uri(out))
    experiment = client.get_experiment_by_name("identities").experiment_id
    reference = client.search_runs([experiment], f"tags.{REFERENCE_TAG} = 'true'")
    children = [r for r in reference if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.data.tags["point_id"] for r in children) == sorted(theirs["point_id"])
    parents = _parents(client, "identities")
    (parent,) = [r for r in parents if r.data.tags.get(REFERENCE_TAG) == "true"]
    assert parent.info.run_name.startswith("reference identities · vm-")
    # this machine's rows, never logged (as a killed run leaves them): logged under a
    # parent of its own that says so, measured nothing and carries no headline
    (mine,) = [r for r in parents if r is not parent]
    assert mine.info.run_name.endswith(f" · {len(theirs)} stored rows logged, "
                                       f"{len(theirs)} done before")
    assert mine.data.metrics == {"points_resumed": len(theirs), "wall_s": pytest.approx(
        mine.data.metrics["wall_s"])}

    again = CliRunner().invoke(cli, ["run", "identities", "--out", str(out), "--tracking-uri",
                                     _uri(out)])
    assert again.exit_code == 0 and "reference rows" not in again.stderr  # logged once
    assert len(client.search_runs([experiment], f"tags.{REFERENCE_TAG} = 'true'")) == \
        len(reference)
    assert len(_parents(client, "identities")) == 2  # a resume of nothing: no parent run


@pytest.fixture
def fake_points(monkeypatch):
    """Each point 'measured' at once: the sweep, its rows and its MLflow runs are real."""
    monkeypatch.setattr(point, "run_point",
                        lambda p, *args, **kwargs: (Result({"fwd_ms": 1.0}), None))
    return experiments.points("smoke")[:3]


def test_parent_runs_are_named_by_what_they_measured_and_a_resume_of_nothing_leaves_none(
        tmp_path: Path, fake_points) -> None:
    headline = lambda: ({"n_star": 64.0}, {"verdict": "supports"})  # noqa: E731

    def run(points) -> sweep.SweepSummary:
        return sweep.run_suite("named", points, torch.device("cpu"), tmp_path, _uri(tmp_path),
                               progress=False, headline=headline)

    run(fake_points[:2])
    run(fake_points[:2])  # nothing to do
    run(fake_points)  # the third point only
    client = MlflowClient(_uri(tmp_path))
    parents = sorted(_parents(client, "named"), key=lambda r: r.info.start_time)
    names = [r.info.run_name for r in parents]
    assert len(parents) == 2, names  # the resume that measured nothing left no parent run
    assert names[0].startswith("named 20") and names[0].endswith(" · 2 points measured")
    assert names[1].endswith(" · 1 point measured, 2 done before")
    assert all(r.data.metrics["n_star"] == 64.0 for r in parents)
    assert [r.data.metrics["points_ok"] for r in parents] == [2.0, 1.0]
