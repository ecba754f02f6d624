"""The study figures end to end: `tvr run convergence-smoke`, then `tvr plot all` and
`tvr report` from the stored results alone."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

import experiments
from harness.cli import cli
from harness.errors import BadInput
from harness.report import curves
from harness.report import figures as plots
from harness.report.studies import STUDIES, study_tables
from harness.results import read_results, read_series, results_path

# the convergence studies' figures (the rematch suites' figures need their own studies)
CONVERGENCE_FIGURES = [name for s in STUDIES if s.suite == "convergence-quick" and s.tables
                       for name in s.figures]

SUITE = "convergence-smoke"


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def smoke_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    result = tvr("run", SUITE, "--out", str(out), "--device", "cpu", "--tracking-uri", "none")
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_every_point_ok_with_curves(smoke_out):
    df = read_results(results_path(smoke_out, SUITE))
    assert len(df) == len(experiments.points(SUITE))
    assert (df["status"] == "ok").all(), df.loc[df["status"] != "ok", "message"].tolist()
    series = read_series(smoke_out, SUITE)
    trained = df.loc[df["runner"] == "train", "point_id"]
    assert set(trained) <= set(series["point_id"])
    assert {"loss", "accuracy", "layer_grad_norm", "grad_norm_init",
            "grad_norm_trained"} <= set(series["metric"])


@pytest.mark.slow
def test_plot_all_draws_every_study_figure(smoke_out):
    result = tvr("plot", "all", "--suite", SUITE, "--out", str(smoke_out))
    assert result.exit_code == 0, result.output
    for name in CONVERGENCE_FIGURES:
        png = smoke_out / SUITE / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert "crossover" not in result.output  # layer figures do not apply to training rows


@pytest.mark.slow
def test_figures_read_stored_results_only(smoke_out, monkeypatch):
    """Drawing must not train or measure anything: with the training loop, the layer timer
    and the optimiser step all raising, every study figure still draws."""
    from harness.measure import timing as measure
    from harness.run import runner_table
    from harness.runner import Context
    from harness.train import loop as train
    from harness.train import probes
    from harness.train import train_runner as ablations

    def broken(*args, **kwargs):
        raise AssertionError("a figure retrained or remeasured")

    # patch each name where it is bound, since `from x import f` copies the reference
    for module, name in ((train, "train"), (ablations, "train"), (probes, "train"),
                         (measure, "measure_layer"), (runner_table, "measure_layer"),
                         (torch.optim.Adam, "step")):
        monkeypatch.setattr(module, name, broken)
    trained = set(read_results(results_path(smoke_out, SUITE)).query("runner == 'train'")
                  ["point_id"])
    point = next(p for p in experiments.points(SUITE) if p.point_id in trained)
    with pytest.raises(AssertionError, match="retrained"):  # the patches do cut training off
        ablations.run_train(point, Context(torch.device("cpu"), 0.1))
    for name in CONVERGENCE_FIGURES:
        fig = plots.FIGURES[name].draw(smoke_out, SUITE)
        assert any(ax.has_data() for ax in fig.axes), name
        plt.close(fig)


def test_fill_stopped_carries_a_run_that_reached_its_target():
    """Survivor bias: seed 0 stops at step 100, so without filling the mean at 200 is seed
    1 alone. A run that did not reach its target (NaN) is never extended."""
    long = pd.DataFrame({
        "point_id": ["a", "a", "b", "b", "b", "c"],
        "metric": "accuracy", "step": [50, 100, 50, 100, 200, 50],
        "value": [0.5, 0.99, 0.4, 0.6, 0.8, 0.1],
        "steps_to_target": [100, 100, np.nan, np.nan, np.nan, np.nan],
        "architecture": ["T", "T", "T", "T", "T", "L"]})
    filled = curves.fill_stopped(long, ["architecture"])
    at_200 = filled[filled["step"] == 200].set_index("point_id")["value"]
    assert at_200.to_dict() == {"a": 0.99, "b": 0.8}  # c is another curve: not filled
    assert len(filled) == len(long) + 1
    assert curves.fill_stopped(long.assign(steps_to_target=np.nan), ["architecture"]).equals(
        long.assign(steps_to_target=np.nan))


@pytest.mark.slow
def test_figure_for_a_missing_study_is_bad_input(smoke_out, tmp_path):
    df = read_results(results_path(smoke_out, SUITE))
    only = df[df["study"] == "heads"]
    (tmp_path / "h").mkdir()
    only.to_csv(results_path(tmp_path, "h"), index=False)
    applies = [n for n, f in plots.FIGURES.items() if f.applies(only)]
    assert applies == ["heads"]
    with pytest.raises(BadInput, match="convergence"):
        curves.steps_to_target(tmp_path, "h")


@pytest.mark.slow
def test_report_has_a_table_per_study(smoke_out):
    result = tvr("report", "--suite", SUITE, "--out", str(smoke_out))
    assert result.exit_code == 0, result.output
    text = (smoke_out / "REPORT.md").read_text()
    df = read_results(results_path(smoke_out, SUITE))
    titles = [spec.title for _, spec, _ in study_tables(df)]
    assert len(titles) == 9
    for title in titles:
        assert f"### {title}" in text
    assert "![grad-distance](convergence-smoke/grad-distance.png)" in text
    table = pd.read_csv(smoke_out / SUITE / "convergence-train.csv")
    assert set(table["architecture"]) == {"Transformer", "LSTM", "GRU"}
    assert (table["seeds"] == 2).all()


def test_a_long_title_is_wrapped_to_the_figure_not_widening_it():
    from harness.report.labels import title_above

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2])
    title_above(fig, "word " * 60 + "\nd = 32, batch 4, cpu")
    png = plots.png_bytes(fig)  # saved with bbox_inches="tight", 110 dpi
    width = int.from_bytes(png[16:20], "big")  # the PNG header's width
    assert width <= 3 * 110 * 1.15, width
