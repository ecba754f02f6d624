"""Table 2's figure (harness.report.translation_curves) on the committed rows."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from harness.report import translation_curves
from harness.results import SERIES_FILE, load_results, read_series

RESULTS = Path(__file__).resolve().parents[3] / "results"


def test_table2_figure_draws_every_seed_to_its_own_end():
    """Seeds stop at different FLOPs (early stopping, or a budget met mid-batch): the mean
    stops where the first did, and each seed's own line runs to its last evaluation (the
    attentional LSTM's mean stopped at 4.0e13 FLOPs with two seeds run to 5.7-6.0e13, and
    nothing showed them)."""
    from harness.report.translation import finished, last_recipe

    suite = "translation-cpu-tuned"
    if not (RESULTS / suite / SERIES_FILE).exists():
        pytest.skip(f"no {suite} results")
    rows = last_recipe(finished(load_results(RESULTS, [suite]), "table2"))
    rows = rows[rows["runner"] == "translate"]
    curves = read_series(RESULTS, suite)
    flops = curves[curves["metric"] == "train_flops"].groupby("point_id")["value"].max()
    fig = translation_curves.bleu_curves(RESULTS, suite)
    drawn = {ln.get_gid().removeprefix("seed:"): max(ln.get_xdata())
             for ln in fig.axes[0].lines if str(ln.get_gid()).startswith("seed:")}
    plt.close(fig)
    assert set(drawn) == set(rows["point_id"])
    for pid, end in drawn.items():
        assert end == pytest.approx(flops[pid])
    lstm = rows[rows["model"] == "lstm-attention"]["point_id"]
    assert max(drawn[p] for p in lstm) > min(drawn[p] for p in lstm)  # they do stop apart
