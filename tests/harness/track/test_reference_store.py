"""A store built from the committed CSVs (`tvr ui` on a fresh clone, `tvr doctor --repair`)
labels the reference: every run carries the machine, commit and measurement days of its
rows and a `reference` tag, its parent a name that says so; the user's own rows get a
parent of their own; the GPU suites are in; each experiment has its description."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from harness.cli.tracking import build_store
from harness.machines import this_machine
from harness.results import read_results
from harness.track.values import REFERENCE_TAG

REFERENCE = Path(__file__).resolve().parents[3] / "results"
SUITES = ["identities", "bench", "gpu/complexity-gpu-quick"]


def _day(ms: int) -> str:
    return pd.Timestamp(ms, unit="ms", tz="UTC").strftime("%Y-%m-%d")


@pytest.mark.slow
def test_a_store_built_from_the_committed_csvs_labels_the_reference(tmp_path: Path) -> None:
    for suite in SUITES:
        shutil.copytree(REFERENCE / suite, tmp_path / suite)
    mine = tmp_path / "identities" / "results.csv"  # one row of the user's own beside them
    own = read_results(mine).iloc[:1].assign(machine=this_machine(), git_commit="feed42")
    pd.concat([read_results(mine), own], ignore_index=True).to_csv(mine, index=False)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    build_store(tmp_path, uri)

    client = MlflowClient(uri)
    for suite in SUITES:
        folder, name = tmp_path / suite, suite.rsplit("/", 1)[-1]
        experiment = client.get_experiment_by_name(name)
        assert experiment is not None, f"{suite} is not in the store"  # GPU suites too
        assert experiment.tags.get("mlflow.note.content", "").strip(), f"{name}: no description"
        runs = client.search_runs([experiment.experiment_id], max_results=1000)
        rows = read_results(folder / "results.csv")
        theirs = rows[rows["machine"] != this_machine()]
        by_point = {(r["point_id"], r["machine"], r["device"]): r
                    for r in theirs.to_dict("records")}
        children = [r for r in runs if "mlflow.parentRunId" in r.data.tags
                    and r.data.tags.get(REFERENCE_TAG) == "true"]
        assert len(children) == len(theirs)
        for run in children:
            tags = run.data.tags
            row = by_point[(tags["point_id"], tags["machine"], tags["device"])]
            commit = row.get("git_commit")
            assert tags["mlflow.source.git.commit"] == (commit if isinstance(commit, str)
                                                        else "unknown")
            assert _day(run.info.end_time) == str(row["measured_at"])[:10]
            assert tags["command"] == f"tvr run {name}" and tags["mlflow.user"] == "reference"
        parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags
                   and r.data.tags.get(REFERENCE_TAG) == "true"]
        machines = sorted(set(theirs["machine"]))
        assert sorted(p.data.tags["machine"] for p in parents) == machines
        for parent in parents:
            days = sorted(str(v)[:10] for v in theirs["measured_at"])
            assert parent.info.run_name.startswith(f"reference {name} · {machines[0]}")
            assert parent.data.tags["measured"] in (days[0], f"{days[0]} to {days[-1]}")
            assert days[0] in parent.info.run_name
            assert parent.data.tags["command"] == f"tvr run {name}"
            assert _day(parent.info.start_time) == days[0]
            assert parent.data.tags["host"] != "" and "tvr ui" not in str(parent.data.tags)

    # the user's row: a parent of its own, named as a run of theirs, with their commit
    identities = client.get_experiment_by_name("identities").experiment_id
    users = client.search_runs([identities], f"tags.machine = '{this_machine()}'")
    assert len(users) == 2 and all(REFERENCE_TAG not in r.data.tags for r in users)
    parent = next(r for r in users if "mlflow.parentRunId" not in r.data.tags)
    assert not parent.info.run_name.startswith("reference")
    child = next(r for r in users if r is not parent)
    assert child.data.tags["mlflow.source.git.commit"] == "feed42"
