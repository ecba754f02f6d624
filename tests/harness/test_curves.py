"""The study figures end to end: `tvr run convergence-smoke`, then `tvr plot all` and
`tvr report` from the stored results alone."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

import experiments
from harness import curves, plots
from harness.cli import cli
from harness.errors import BadInput
from harness.results import read_results, read_series, results_path
from harness.study_tables import study_tables

SUITE = "convergence-smoke"


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def smoke_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    result = tvr("run", SUITE, "--out", str(out), "--device", "cpu", "--tracking-uri", "none")
    assert result.exit_code == 0, result.output
    return out


def test_every_point_ok_with_curves(smoke_out):
    df = read_results(results_path(smoke_out, SUITE))
    assert len(df) == len(experiments.points(SUITE))
    assert (df["status"] == "ok").all(), df.loc[df["status"] != "ok", "message"].tolist()
    series = read_series(smoke_out, SUITE)
    trained = df.loc[df["measure"] == "train", "point_id"]
    assert set(trained) <= set(series["point_id"])
    assert {"loss", "accuracy", "layer_grad_norm", "grad_norm_init",
            "grad_norm_trained"} <= set(series["metric"])


def test_plot_all_draws_every_study_figure(smoke_out):
    result = tvr("plot", "all", "--suite", SUITE, "--out", str(smoke_out))
    assert result.exit_code == 0, result.output
    for name in curves.FIGURES:
        png = smoke_out / SUITE / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert "crossover" not in result.output  # layer figures do not apply to training rows


def test_figures_read_stored_results_only(smoke_out, monkeypatch):
    """Drawing must not train or probe anything: with every runner broken, figures work."""
    from harness import sweep

    def broken(*args, **kwargs):
        raise AssertionError("a figure called a runner")

    monkeypatch.setattr(sweep, "RUNNERS", {k: broken for k in sweep.RUNNERS})
    fig = plots.FIGURES["grad-distance"].draw(smoke_out, SUITE)
    assert fig.axes and "Gradient" in fig.texts[0].get_text()


def test_figure_for_a_missing_study_is_bad_input(smoke_out, tmp_path):
    df = read_results(results_path(smoke_out, SUITE))
    only = df[df["role"] == "heads"]
    (tmp_path / "h").mkdir()
    only.to_csv(results_path(tmp_path, "h"), index=False)
    applies = [n for n, f in plots.FIGURES.items() if f.applies(only)]
    assert applies == ["heads"]
    with pytest.raises(BadInput, match="convergence"):
        curves.steps_to_target(tmp_path, "h")


def test_report_has_a_table_per_study(smoke_out):
    result = tvr("report", "--suite", SUITE, "--out", str(smoke_out))
    assert result.exit_code == 0, result.output
    text = (smoke_out / "REPORT.md").read_text()
    df = read_results(results_path(smoke_out, SUITE))
    titles = [spec.title for spec, _ in study_tables(df)]
    assert len(titles) == 9
    for title in titles:
        assert f"### {title}" in text
    assert "![grad-distance](convergence-smoke/grad-distance.png)" in text
    table = pd.read_csv(smoke_out / SUITE / "convergence-train.csv")
    assert set(table["architecture"]) == {"Transformer", "LSTM", "GRU"}
    assert (table["seeds"] == 2).all()
