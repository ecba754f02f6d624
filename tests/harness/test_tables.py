"""Tables from results rows built with the closed-form FLOP counts: exact crossovers."""

import pandas as pd
import pytest

from harness.errors import BadInput
from harness.report.tables import _crossing, complexity_table, crossover_table

FLOPS = {  # forward matmul FLOPs per sequence
    "self-attention": lambda n, d: 8 * n * d * d + 4 * n * n * d,
    "attention-core": lambda n, d: 4 * n * n * d,
    "lstm": lambda n, d: 16 * n * d * d,
    "gru": lambda n, d: 12 * n * d * d,
}


def _rows(ns=(32, 64, 128, 256, 512, 1024), ds=(64, 128, 256), **extra) -> pd.DataFrame:
    rows = [{"suite": "t", "point_id": f"{m}-{n}-{d}", "mixer": m, "seq_len": n, "d_model": d,
             "batch_size": 2, "status": "ok", "flops_fwd": 2 * f(n, d),
             "fwd_ms": 2 * f(n, d) / 1e9, "fwdbwd_ms": 6 * f(n, d) / 1e9, "dtype": "float32",
             **extra} for m, f in FLOPS.items() for n in ns for d in ds]
    return pd.DataFrame(rows)


def test_measured_crossover_equals_the_closed_form_on_exact_counts():
    table = crossover_table(_rows())
    # layer vs LSTM: 2d; core vs LSTM: 4d (1024 for d=256: on the grid's last point);
    # layer vs GRU: d; core vs GRU: 3d
    for row in table.itertuples():
        assert row.n_star_flops == pytest.approx(row.n_star_closed_form, rel=1e-9), row
        assert row.n_star_time == pytest.approx(row.n_star_closed_form, rel=1e-9), row
    assert set(table["attention"]) == {"layer", "core"}


def test_crossing_notes_say_where_the_ratio_lies():
    ns = [32, 64, 128]
    assert _crossing(pd.Series(ns).to_numpy(), pd.Series([0.5, 0.6, 0.7]).to_numpy()) == \
        (None, "attention cheaper at every n <= 128")
    assert _crossing(pd.Series(ns).to_numpy(), pd.Series([2, 3, 4]).to_numpy())[1].startswith(
        "attention costlier")
    assert _crossing(pd.Series(ns).to_numpy(), pd.Series([2, 0.5, 0.4]).to_numpy())[1] == \
        "no crossing from cheaper to costlier on this grid"


def test_flop_exponents_of_the_recurrent_rows_are_exact():
    table = complexity_table(_rows()).set_index("layer")
    assert table.loc["lstm", "flops_n_exp"] == pytest.approx(1.0)
    assert table.loc["lstm", "flops_d_exp"] == pytest.approx(2.0)


def test_tables_refuse_rows_from_different_dtypes():
    mixed = pd.concat([_rows(), _rows(dtype="bfloat16").assign(
        point_id=lambda f: f["point_id"] + "-bf16")])
    with pytest.raises(BadInput, match="mix dtype"):
        crossover_table(mixed)


def test_tables_of_a_training_suite_are_bad_input():
    with pytest.raises(BadInput, match="no layer measurements"):
        complexity_table(pd.DataFrame([{"suite": "cq", "status": "ok", "point_id": "a"}]))
