"""Output fit for a terminal and a paper: LaTeX escaped with the Markdown's numbers, one line
per suite, short progress labels; `tvr ui` on a fresh clone builds its store first."""

import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from mlflow import MlflowClient

import experiments
from harness.cli import cli
from harness.report.tables import render
from harness.run.progress import label

REFERENCE = Path(__file__).resolve().parents[2] / "results"


def test_latex_escapes_text_and_formats_numbers_as_the_markdown() -> None:
    table = pd.DataFrame({"n_star": [128.0, 0.123456], "layer": ["self_attention", "50% & up"],
                          "points": [3, 4]})
    tex = render(table, "latex")
    assert r"n\_star" in tex and r"self\_attention" in tex and r"50\% \& up" in tex
    assert "128 & " in tex and "128.000" not in tex and "0.1235" in tex  # .4g, as Markdown
    assert "| 128" in render(table, "markdown")


def test_suites_one_line_each_and_long_descriptions() -> None:
    short = CliRunner().invoke(cli, ["suites"], terminal_width=100)
    assert short.exit_code == 0
    assert len(short.output.splitlines()) == len(experiments.suite_names())
    long = CliRunner().invoke(cli, ["suites", "--long"])
    assert experiments.describe("quick").split()[-1] in long.output


def test_progress_labels_are_short() -> None:
    point = next(p for p in experiments.points("convergence-quick") if p.study == "heads")
    assert label(point, 78) == f"{point.subject} seq_len={point.seq_len} d_model=78"


def test_ui_on_a_fresh_clone_builds_the_store_from_the_csvs(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    shutil.copytree(REFERENCE / "identities", tmp_path / "identities")
    served = []
    monkeypatch.setattr("harness.track.ui.serve_ui", lambda uri, out, port: served.append(uri)
                        or 0)
    done = CliRunner().invoke(cli, ["ui", "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "building it from the results CSVs" in done.output
    client = MlflowClient(served[0])
    exp = client.get_experiment_by_name("identities")
    assert len(client.search_runs([exp.experiment_id])) == 7  # the parent and 6 points
