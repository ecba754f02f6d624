"""Timings flagged busy are never shown as if clean: every figure of timings draws each busy
point as an open square joined to no line (the crossover figure once drew 2 of 43 busy points
apart, those whose spread was wide, and joined the rest), and REPORT.md heads the section of
a suite with busy rows with how many of its timed rows were busy."""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from harness.report import document, rematch
from harness.report import layer_figures as plots
from harness.report.tables import sweep_frame
from harness.results import RESULTS_FILE, load_results, read_results

RESULTS = Path(__file__).resolve().parents[3] / "results"


def _flagged(rows: pd.DataFrame, every: int = 2) -> pd.DataFrame:
    """The rows with every `every`-th one flagged busy, the others idle."""
    rows = rows.reset_index(drop=True)
    return rows.assign(busy=[i % every == 0 for i in range(len(rows))])


def _open(fig: plt.Figure) -> list[tuple[float, float]]:
    """Every open marker drawn: scatter points without a face, lines of markers without one
    and without a line."""
    points = []
    for ax in fig.axes:
        for c in ax.collections:
            if isinstance(c, PathCollection) and len(c.get_offsets()) and (
                    len(c.get_facecolors()) == 0 or (c.get_facecolors()[:, 3] == 0).all()):
                points += [tuple(p) for p in c.get_offsets()]
        for line in ax.lines:
            if line.get_linestyle() == "None" and str(line.get_markerfacecolor()) == "none":
                points += list(zip(line.get_xdata(), line.get_ydata(), strict=True))
    return points


def _joined(fig: plt.Figure) -> set[tuple[float, float]]:
    """Every point a drawn line passes through."""
    return {(x, y) for ax in fig.axes for line in ax.lines if line.get_linestyle() != "None"
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)}


def _check(fig: plt.Figure, busy: list[tuple[float, float]], title: str) -> None:
    drawn = _open(fig)
    assert sorted(drawn) == pytest.approx(sorted(busy)), "a busy point not drawn open"
    assert not {(float(x), float(y)) for x, y in busy} & \
        {(float(x), float(y)) for x, y in _joined(fig)}, "a busy point on a line"
    assert f"the {len(busy)} of " in title and "flagged busy" in title
    plt.close(fig)


def _title(fig: plt.Figure) -> str:
    return " ".join(t.get_text() for t in fig.findobj(plt.Text))


@pytest.mark.slow
def test_the_crossover_draws_every_busy_timing_open_and_off_the_lines():
    df = _flagged(load_results(RESULTS, ["quick"]))
    ok = sweep_frame(df)
    hot = ok[ok["busy"]]
    busy = list(zip(hot["seq_len"], hot["ms_per_seq"], strict=True))
    assert len(busy) > 40
    fig = plots.crossover(df)
    _check(fig, busy, _title(fig))


def test_throughput_draws_every_busy_timing_open_and_off_the_lines():
    df = _flagged(load_results(RESULTS, ["quick"]), every=3)
    ok = sweep_frame(df)
    hot = ok[ok["busy"]]
    fig = plots.throughput(df)
    _check(fig, list(zip(hot["seq_len"], hot["fwdbwd_tokens_per_s"], strict=True)),
           _title(fig))


@pytest.mark.slow
def test_fixed_tokens_draws_every_busy_timing_open_and_off_the_lines():
    df = _flagged(load_results(RESULTS, ["table1"]))
    fixed = df[(df["fit"] == "fixed-tokens") & (df["status"] == "ok")]
    hot = fixed[fixed["busy"]]
    us = hot["fwdbwd_ms"] * 1e3 / (hot["batch_size"] * hot["seq_len"])
    fig = plots.fixed_tokens(df)
    _check(fig, list(zip(hot["seq_len"], us, strict=True)), _title(fig))


def test_scan_throughput_draws_every_busy_timing_open_and_off_the_lines(tmp_path):
    rows = read_results(RESULTS / "rematch-quick" / RESULTS_FILE)
    timed = rows["runner"] == "fwdbwd"
    rows.loc[timed, "busy"] = [i % 2 == 0 for i in range(int(timed.sum()))]
    (tmp_path / "rematch-quick").mkdir()
    rows.to_csv(tmp_path / "rematch-quick" / RESULTS_FILE, index=False)
    hot = rows[timed & (rows["busy"] == True)]  # noqa: E712 -- a column of objects
    fig = rematch.throughput(tmp_path, "rematch-quick")
    _check(fig, list(zip(hot["seq_len"].astype(float), hot["fwdbwd_ms"], strict=True)),
           _title(fig))


@pytest.mark.slow
def test_report_flags_a_suite_timed_on_a_busy_machine(tmp_path):
    shutil.copytree(RESULTS / "quick", tmp_path / "quick",
                    ignore=shutil.ignore_patterns("*.png", ".*.lock"))
    path = tmp_path / "quick" / RESULTS_FILE
    rows = read_results(path)
    assert not rows["busy"].astype(str).eq("True").any()  # the committed rows: idle
    idle = "\n".join(document.suite_section(tmp_path, "quick")[0])
    assert "busy machine" not in idle
    _flagged(rows).to_csv(path, index=False)
    text = "\n".join(document.suite_section(tmp_path, "quick")[0])
    assert f"**Timed on a busy machine: {(len(rows) + 1) // 2} of {len(rows)} timed rows**" \
        in text
    assert "`tvr run quick --no-resume` measures them again" in text
