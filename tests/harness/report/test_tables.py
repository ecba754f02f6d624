"""Tables from stored rows: exact crossovers from closed-form FLOP counts, the Markdown
renderer, and `tvr bench`'s table and verdicts."""

import pandas as pd
import pytest

from harness.errors import BadInput
from harness.report.bench import MFU_TARGET_CPU, bench_markdown, kernel_lines, verdicts
from harness.report.markdown import markdown_table
from harness.report.tables import _crossing, complexity_table, crossover_table, render

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


def test_a_ratio_that_crosses_more_than_once_gives_no_crossover():
    ns = pd.Series([32, 64, 128, 256]).to_numpy()
    star, note = _crossing(ns, pd.Series([0.5, 2.0, 0.5, 2.0]).to_numpy())
    assert star is None and "crosses 1 3 times" in note


def test_flop_exponents_of_the_recurrent_rows_are_exact():
    table = complexity_table(_rows(ds=(32, 64, 128, 256))).set_index("layer")
    assert table.loc["lstm", "flops_n_exp"] == pytest.approx(1.0)
    assert table.loc["lstm", "flops_d_exp"] == pytest.approx(2.0)
    assert table.loc["lstm", "flops_d_se"] == pytest.approx(0.0, abs=1e-9)


def test_no_exponent_from_fewer_than_four_points():
    table = complexity_table(_rows(ds=(64, 128, 256))).set_index("layer")
    assert pd.isna(table.loc["lstm", "flops_d_exp"])
    assert "3 points: too few for an exponent" in table.loc["lstm", "d_fit"]


def test_tables_refuse_rows_from_different_dtypes():
    mixed = pd.concat([_rows(), _rows(dtype="bfloat16").assign(
        point_id=lambda f: f["point_id"] + "-bf16")])
    with pytest.raises(BadInput, match="mix dtype"):
        crossover_table(mixed)


def test_tables_of_a_training_suite_are_bad_input():
    with pytest.raises(BadInput, match="no layer measurements"):
        complexity_table(pd.DataFrame([{"suite": "cq", "status": "ok", "point_id": "a"}]))


def test_a_sweep_table_leaves_out_rows_of_a_fit_or_a_study():
    plain = _rows(fit="", study="")
    grouped = _rows(fit="n", study="").assign(point_id=lambda f: "n-" + f["point_id"])
    table = complexity_table(pd.concat([plain, grouped]))  # duplicates would be refused
    assert set(table["layer"]) == set(FLOPS)


def test_markdown_blanks_missing_cells_and_keeps_text_as_written():
    table = pd.DataFrame({"layer": ["lstm", None], "note": ["0.50", "8,512,512"],
                          "k": [1.23456, float("nan")]})
    lines = markdown_table(table).splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:-1]] == ["layer", "note", "k"]
    # text kept as written, numbers formatted
    assert [c.strip() for c in lines[2].split("|")[1:-1]] == ["lstm", "0.50", "1.235"]
    assert [c.strip() for c in lines[3].split("|")[1:-1]] == ["", "8,512,512", ""]
    assert "nan" not in markdown_table(table) and "None" not in markdown_table(table)
    assert render(table, "markdown") == markdown_table(table) + "\n"
    assert markdown_table(pd.DataFrame(), empty="(none)") == "(none)"


# ---------------------------------------------------------------- tvr bench's table


def _bench_rows() -> pd.DataFrame:
    row = {"status": "ok", "mixer": "transformer-layer", "reference": "TransformerEncoderLayer",
           "batch_size": 8, "seq_len": 512, "d_model": 512, "ours_ms": 10.0, "ref_ms": 12.5,
           "ratio": 0.8, "ratio_min": 0.78, "ratio_max": 0.83, "ratio_best": 0.79,
           "mfu": 0.6, "ref_mfu": 0.5, "peak_flops_per_s": 2e11, "peak_dtype": "float32",
           "peak_kernel": "onednn", "kernel": "sdpa-flash", "ref_kernel": "sdpa-flash"}
    return pd.DataFrame([
        row | {"variant": "transformer-layer/sdpa", "target": 0.9, "meets_target": True},
        row | {"variant": "transformer-layer/math", "target": None, "ratio": 1.1},
        {"status": "oom", "variant": "lstm/fused", "mixer": "lstm", "batch_size": 8,
         "seq_len": 512, "d_model": 512}])


def test_bench_verdicts_judge_the_recorded_targets_and_mfu_on_cpu_only():
    cpu = verdicts(_bench_rows(), "cpu")
    assert cpu[0].startswith("- transformer layer (sdpa) vs nn.TransformerEncoderLayer: "
                             "ratio 0.800..0.800") and "target met at 1/1 sizes" in cpu[0]
    assert "target" not in cpu[1]  # a comparison without a target is reported only
    assert not any("LSTM" in line for line in cpu)  # no ok row, no verdict
    assert cpu[-1].endswith(f"(CPU target >= {MFU_TARGET_CPU}: met)")
    assert "CPU target" not in verdicts(_bench_rows(), "cuda")[-1]


def test_bench_markdown_has_the_header_a_line_per_row_and_the_verdicts():
    facts = {"device_name": "test cpu", "threads": 1, "torch_version": "2.x"}
    text = bench_markdown(_bench_rows(), facts, "tiny", "float32", "cpu")
    assert text.startswith("`tvr bench` (tiny grid) on test cpu (cpu, 1 threads), torch 2.x")
    assert "| transformer-layer/sdpa" in text and "| 0.800 (0.78-0.83)" in text
    assert "<= 0.90 ok" in text and "| oom" in text
    assert text.endswith(verdicts(_bench_rows(), "cpu")[-1] + "\n")
    empty = bench_markdown(_bench_rows().iloc[:0], facts, "tiny", "float32", "cpu")
    assert "(no comparisons)" in empty


def test_bench_names_the_linear_kernel_that_won_and_its_timings():
    rows = _bench_rows().assign(linear_kernel="F.linear",
                                linear_kernel_ms="onednn:3.1;F.linear:2.4")
    lines = kernel_lines(rows)
    assert lines == ["- kernel chosen by measurement on this machine: linear maps (projections, "
                     "FFN) -> F.linear (won, forward+backward ms at representative sizes: "
                     "onednn 3.1, F.linear 2.4)"]
    cpu = verdicts(rows, "cpu")
    assert lines[0] in cpu and cpu[-1].startswith("- MFU")  # the MFU line stays last
    alone = kernel_lines(_bench_rows().assign(linear_kernel="F.linear"))
    assert alone[0].endswith("-> F.linear (the only candidate)")
    assert kernel_lines(_bench_rows()) == []  # rows from before kernels were chosen


def test_bench_names_the_winner_of_every_swap_point_in_order():
    rows = _bench_rows().assign(linear_kernel="onednn", ffn_kernel="onednn-relu",
                                ffn_kernel_ms="onednn-relu:40;linear+relu:52",
                                attention_kernel="math", qkv_kernel="fused")
    lines = kernel_lines(rows)
    assert [line.split(": ", 1)[1].split(" -> ")[0] for line in lines] == [
        "linear maps (projections, FFN)", "self-attention QKV projection",
        "FFN first map and its ReLU", "attention (what attn_backend=auto runs)"]
    assert lines[2].endswith("-> onednn-relu (won, forward+backward ms at representative "
                             "sizes: onednn-relu 40, linear+relu 52)")
    assert lines[3].endswith("-> math (the only candidate)")
