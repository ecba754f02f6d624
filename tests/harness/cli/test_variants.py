"""A suite run with overrides (`--set`, --dtype, --corpus, ...) is a variant of the suite: its
rows and its resolved configuration live under the suite, in <out>/SUITE/variants/VARIANT/,
never in a folder of their own beside the suites; every command that reads a suite finds it
there by its name `SUITE/variants/VARIANT`, and REPORT.md shows it inside its suite's
section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import experiments
from harness.cli import cli
from harness.cli.points import chosen_points
from harness.errors import BadInput
from harness.results import append_row, load_results, read_results, results_path
from harness.track.sync import suites_with_results
from harness.variants import (
    checked_name,
    last_command,
    save_config,
    split_name,
    stored_names,
    variant_name,
)

FAST = ["--min-run-time", "0.01", "--tracking-uri", "none"]
VARIANT = "smoke/variants/seed-5"


@pytest.fixture
def one_point(monkeypatch: pytest.MonkeyPatch) -> None:
    one = [p for p in experiments.points("smoke") if p.subject == "lstm"][:1]
    monkeypatch.setitem(experiments.SUITES, "smoke", lambda: one)


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_a_set_run_is_a_variant_under_its_suite() -> None:
    """The stored name `tvr run` measures into (dry runs and real ones alike)."""
    points = experiments.points("smoke")
    for sets, name in ((("seed=5",), VARIANT), ((), "smoke"),
                       (("seed=5", "seq_len=16"), "smoke/variants/seed-5-seq_len-16")):
        assert chosen_points(points, "smoke", (), None, (), False, None, False, sets)[1] == name
    assert chosen_points(points, "smoke", ("lstm",), None, (), False, "bfloat16", True, ())[1] \
        == "smoke/variants/bfloat16-compiled"  # --dtype and --compile too; --only names none


@pytest.mark.slow
def test_a_set_run_writes_its_rows_under_its_suite_never_beside_it(tmp_path: Path,
                                                                   one_point) -> None:
    said = _run("run", "smoke", "--set", "seed=5", "--out", str(tmp_path), *FAST)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smoke"], "a top-level folder"
    assert sorted(p.name for p in (tmp_path / "smoke").iterdir()) == ["variants"]
    rows = read_results(results_path(tmp_path, VARIANT))
    assert list(rows["status"]) == ["ok"] and list(rows["seed"]) == [5]
    assert list(rows["suite"]) == ["smoke"]  # the rows name their suite, not the variant
    config = json.loads((tmp_path / VARIANT / "config.json").read_text())
    assert config["suite"] == "smoke" and config["variant"] == "seed-5"
    assert config["commands"] == ["tvr run smoke --set seed=5"]
    assert [p["point_id"] for p in config["points"]] == list(rows["point_id"])
    assert config["points"][0]["seed"] == 5 and config["points"][0]["mixer"] == "lstm"
    assert f"variant {VARIANT}: its configuration in" in said
    # resume finds the variant at its place: nothing measured again
    again = _run("run", "smoke", "--set", "seed=5", "--out", str(tmp_path), *FAST)
    assert "nothing run; 1 already done on this machine" in again, again
    assert len(read_results(results_path(tmp_path, VARIANT))) == 1


@pytest.mark.slow
def test_the_commands_that_read_a_suite_find_its_variant(tmp_path: Path, one_point) -> None:
    _run("run", "smoke", "--out", str(tmp_path), *FAST)
    _run("run", "smoke", "--set", "seed=5", "--out", str(tmp_path), *FAST)
    assert stored_names(tmp_path) == ["smoke", VARIANT]
    assert suites_with_results(tmp_path) == [(tmp_path, "smoke"), (tmp_path, VARIANT)]
    every = load_results(tmp_path, machine="all")
    assert sorted(every["seed"]) == [0, 5]
    table = _run("table", "--suite", VARIANT, "--out", str(tmp_path), "--format", "json")
    assert json.loads(table)["suite"] == VARIANT
    _run("report", "--out", str(tmp_path))
    report = (tmp_path / "REPORT.md").read_text()
    lines = report.splitlines()
    suite, variant = lines.index("## Suite `smoke`"), lines.index(
        "### Variant `seed-5` of `smoke`")
    assert suite < variant and not [h for h in lines[suite + 1:variant] if h.startswith("## ")]
    assert "## Suite `smoke/variants" not in report and "smoke-seed-5" not in report
    assert "`tvr run smoke --set seed=5` (its configuration: [config.json]" \
        "(smoke/variants/seed-5/config.json))" in report
    below = lines[variant + 1:]  # the variant's own tables one level down
    assert not [h for h in below if h.startswith("### ")], below


def test_a_variant_name_that_leads_elsewhere_is_refused() -> None:
    assert checked_name(VARIANT) == VARIANT and checked_name("smoke") == "smoke"
    for bad in ("../x", "smoke/other/seed-5", "smoke/variants/..", "smoke/variants/a/b",
                "/abs", "smoke/variants/"):
        with pytest.raises(BadInput):
            checked_name(bad)
    result = CliRunner().invoke(cli, ["table", "--suite", "smoke/variants/../../x"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert split_name(variant_name("smoke", "seed-5")) == ("smoke", "seed-5")
    assert variant_name("smoke", "") == "smoke" and split_name("smoke") == ("smoke", "")


def test_a_missing_variant_names_the_variants_there(tmp_path: Path) -> None:
    append_row(results_path(tmp_path, VARIANT), {"suite": "smoke", "point_id": "x",
                                                 "status": "ok"})
    result = CliRunner().invoke(cli, ["table", "--suite", "smoke/variants/seed-6", "--out",
                                      str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "variant 'seed-6' of suite smoke" in result.output and VARIANT in result.output
    old = CliRunner().invoke(cli, ["table", "--suite", "smoke-seed-5", "--out", str(tmp_path)])
    assert old.exit_code == 2 and f"did you mean `tvr table --suite {VARIANT}" in old.output


def test_an_early_error_leaves_no_folder_of_the_variant(tmp_path: Path, one_point) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has the CUDA device the error needs to be missing")
    result = CliRunner().invoke(cli, ["run", "smoke", "--set", "seed=5", "--out",
                                      str(tmp_path), "--device", "cuda", *FAST])
    assert result.exit_code == 2, result.output
    assert not list(tmp_path.iterdir())


def test_rows_in_the_old_place_are_named_with_the_move(tmp_path: Path, one_point) -> None:
    """A variant measured before variants lived under their suite (<out>/smoke-seed-5/):
    the run says how to move it rather than measure it again beside it."""
    old = tmp_path / "smoke-seed-5"
    old.mkdir()
    (old / "results.csv").write_text("suite,point_id,status\nsmoke,x,ok\n")
    result = CliRunner().invoke(cli, ["run", "smoke", "--set", "seed=5", "--out",
                                      str(tmp_path), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert f"mv {old} {tmp_path / VARIANT}" in result.output
    assert not (tmp_path / "smoke").exists()
    (old / "results.csv").write_text("suite,point_id,status\nsmoke-seed-5,x,ok\n")
    other = CliRunner().invoke(cli, ["run", "smoke", "--set", "seed=5", "--out",
                                     str(tmp_path), "--dry-run"])  # a suite of that name
    assert other.exit_code == 0 and "1 points in suite 'smoke': 1 to do" in other.output, \
        other.output


def test_the_command_of_a_variant_counts_every_run_into_it(tmp_path: Path) -> None:
    """Runs of one variant with --only lstm, then --only gru: its configuration keeps both
    runs' points, and the command that measures it again names both subjects."""
    folder = tmp_path / VARIANT
    folder.mkdir(parents=True)
    assert last_command(tmp_path, VARIANT) is None
    save_config(folder, "smoke", "seed-5", ["tvr", "run", "smoke", "--only", "lstm", "--set",
                                            "seed=5"], [{"point_id": "a", "seed": 5}])
    save_config(folder, "smoke", "seed-5", ["tvr", "run", "smoke", "--only", "gru", "--set",
                                            "seed=5"], [{"point_id": "b", "seed": 5}])
    config = json.loads((folder / "config.json").read_text())
    assert [p["point_id"] for p in config["points"]] == ["a", "b"]
    assert last_command(tmp_path, VARIANT) == \
        "tvr run smoke --only lstm --only gru --set seed=5"
    save_config(folder, "smoke", "seed-5", ["tvr", "run", "smoke", "--set", "seed=5"], [])
    assert last_command(tmp_path, VARIANT) == "tvr run smoke --set seed=5"  # all points


@pytest.mark.slow
def test_sync_logs_a_variant_to_an_experiment_of_its_name(tmp_path: Path) -> None:
    """`tvr sync SUITE/variants/VARIANT`: its rows in an experiment named so (apart from the
    suite's own: a point id may be in both), its source the suite's run and the variant."""
    from mlflow import MlflowClient

    append_row(results_path(tmp_path, VARIANT), {
        "suite": "smoke", "point_id": "layer-lstm-s5", "status": "ok", "device": "cpu",
        "machine": "elsewhere", "seed": 5, "measured_at": "2026-01-01T00:00:00+00:00"})
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    said = _run("sync", VARIANT, "--out", str(tmp_path), "--tracking-uri", uri)
    assert said.startswith(f"{VARIANT}: 1 rows logged"), said
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(VARIANT)
    assert experiment is not None and "Variant `seed-5`" in \
        experiment.tags["mlflow.note.content"]
    [child] = [r for r in client.search_runs([experiment.experiment_id])
               if "mlflow.parentRunId" in r.data.tags]
    assert child.data.tags["point_id"] == "layer-lstm-s5"
    assert child.data.tags["command"] == "tvr run smoke (variant seed-5)"
