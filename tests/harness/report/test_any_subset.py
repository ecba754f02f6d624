"""No traceback from the report on any subset of the committed rows: a suite cut short, run
with --only, or left with a handful of rows gives every table, figure and claim, or one line
saying what is missing (BadInput), never an exception."""

import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
import seaborn._statistics
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.cli import cli
from harness.errors import BadInput
from harness.report import figures
from harness.report.claims import ledger, render
from harness.report.document import suite_section
from harness.results import RESULTS_FILE

REFERENCE = Path(__file__).resolve().parents[3] / "results"
# 10 fixed examples (about 20 s of CPU); TVR_SUBSET_EXAMPLES=200 explores random ones instead
EXPLORE = os.environ.get("TVR_SUBSET_EXAMPLES")
EXAMPLES = int(EXPLORE or 10)
SUITES = sorted(p.parent.name for p in REFERENCE.glob(f"*/{RESULTS_FILE}"))


@cache
def rows(suite: str) -> pd.DataFrame:
    return pd.read_csv(REFERENCE / suite / RESULTS_FILE, dtype=str, keep_default_na=False)


@st.composite
def subsets(draw: st.DrawFn) -> tuple[str, pd.DataFrame]:
    """A suite and some of its rows: those of one subject (`--only`), a random fraction
    (a sweep stopped early, or points that failed), or both; none at all included."""
    suite = draw(st.sampled_from(SUITES))
    frame = rows(suite)
    subjects = sorted({s for c in ("mixer", "model") if c in frame for s in frame[c] if s})
    only = draw(st.none() | st.sampled_from(subjects))
    if only is not None:
        frame = frame[(frame.get("mixer", "") == only) | (frame.get("model", "") == only)]
    fraction = draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]))
    return suite, frame.sample(frac=fraction, random_state=draw(st.integers(0, 999)))


@pytest.fixture(autouse=True)
def cheap_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Figures are built in full but not rasterized, and seaborn's confidence bands
    bootstrap 20 times instead of 1000: the drawing code runs, in a fraction of the time."""
    def close(fig):  # noqa: ANN001, ANN202
        figures.plt.close(fig)
        return b""

    monkeypatch.setattr(figures, "png_bytes", close)
    boot = seaborn._statistics.bootstrap
    monkeypatch.setattr(seaborn._statistics, "bootstrap",
                        lambda *a, **k: boot(*a, **{**k, "n_boot": 20}))


def _no_traceback(*args: str) -> None:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code in (0, 2), (args, result.output, result.exception)


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXPLORE is None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(subsets())
@example(("convergence-quick", rows("convergence-quick").query("model == 'lstm-lm'")))
def test_every_table_figure_and_claim_on_any_subset(subset: tuple[str, pd.DataFrame]) -> None:
    suite, frame = subset
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        shutil.copytree(REFERENCE / suite, out / suite)  # curves and hypotheses beside it
        frame.to_csv(out / suite / RESULTS_FILE, index=False)
        try:
            suite_section(out, suite)  # every table and figure the suite's rows allow
        except BadInput:
            pass  # one line naming what is missing: what the report shows for a suite
        claims = ledger(out)
        for fmt in ("markdown", "json"):
            render(claims, fmt)
        _no_traceback("table", "--out", str(out), "--suite", suite)
        _no_traceback("table", "--out", str(out), "--suite", suite, "--crossover",
                      "--format", "latex")
        _no_traceback("plot", "all", "--out", str(out), "--suite", suite)
