"""Table 1 from a tiny run of its grid: exponents of counted FLOPs, sequential ops and path
length against the paper's O(), and exact path lengths on small cases."""

import math

import pytest
import torch
from click.testing import CliRunner

from experiments.spec import PathOptions, Point, config
from experiments.table1 import table1_points
from harness.cli import cli
from harness.report.table1 import table1
from harness.results import read_results, results_path
from harness.run import sweep
from harness.run.runner_table import run_path
from harness.runner import Context

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("t1")
    # four sizes per fit: fewer give no exponent
    points = table1_points("t1", ns=(32, 64, 128, 256), ds=(4, 8, 16, 32), kr_n=128,
                           structure_ns=(4, 8, 16, 32), path_ns=(4, 8, 12, 16), tokens=128)
    summary = sweep.run_suite("t1", points, CPU, out, None, min_run_time=0.01, progress=False)
    assert summary.statuses == {"ok": len(points)}, summary.line()
    return out, read_results(results_path(out, "t1"))


@pytest.mark.slow
def test_flop_exponents_match_the_papers_complexity(tiny):
    table = table1(tiny[1])[0].set_index("layer")
    # counted FLOPs are exact, so the fits are too (attention: its QK^T and AV products)
    expected = {"self-attention": (2, 1), "recurrent": (1, 2), "convolutional": (1, 2),
                "self-attention (restricted)": (1, 1)}
    for layer, (n_exp, d_exp) in expected.items():
        assert table.loc[layer, "flops_n_exp"] == pytest.approx(n_exp, abs=0.02), layer
        assert table.loc[layer, "flops_d_exp"] == pytest.approx(d_exp, abs=0.02), layer
        assert table.loc[layer, "flops_n_r2"] > 0.999


@pytest.mark.slow
def test_sequential_ops_and_path_grow_only_for_recurrence(tiny):
    table = table1(tiny[1])[0].set_index("layer")
    assert table.loc["recurrent", "seq_ops_n_exp"] > 0.7
    assert table.loc["recurrent", "path_n_exp"] > 0.9
    for layer in ("self-attention", "convolutional", "self-attention (restricted)"):
        assert abs(table.loc[layer, "seq_ops_n_exp"]) < 0.05, layer
    assert table.loc["self-attention", "path_n_exp"] == pytest.approx(0, abs=1e-9)
    # the quadratic memory term of explicit attention scores
    assert table.loc["self-attention", "memory_n_exp"] > 1.3
    assert table.loc["recurrent", "memory_n_exp"] == pytest.approx(1, abs=0.1)


@pytest.mark.slow
def test_table_columns_and_cli(tiny):
    out, _ = tiny
    table, notes = table1(tiny[1])
    assert list(table.columns[:4]) == ["layer", "complexity", "sequential_ops",
                                       "max_path_length"]
    for col in ("flops_n_exp", "flops_d_exp", "time_n_exp", "time_d_exp", "seq_ops_n_exp",
                "path_n_exp", "memory_n_exp"):
        for suffix in ("_r2", "_se"):
            assert col.replace("_exp", suffix) in table.columns, (col, suffix)
    assert any("fitted over" in n for n in notes)
    result = CliRunner().invoke(cli, ["table", "--out", str(out), "--suite", "t1"])
    assert result.exit_code == 0, result.output
    assert "| self-attention (restricted)" in result.output and "fitted over" in result.output
    figures = CliRunner().invoke(cli, ["plot", "all", "--out", str(out), "--suite", "t1"])
    assert figures.exit_code == 0, figures.output
    for name in ("sequential-ops", "path-length", "memory", "fixed-tokens"):
        assert (out / "t1" / f"{name}.png").exists(), name


def _path(mixer: str, n: int, growth: bool = False, **cfg) -> int:
    options = PathOptions(dilation_growth=growth)
    point = Point("t", "path", mixer, n, 4, 1, config=config(cfg), options=options)
    return run_path(point, Context(CPU)).values["path_length"]


@pytest.mark.parametrize("n", [2, 5, 9])
def test_exact_path_lengths(n):
    assert _path("self-attention", n, n_heads=2) == 1
    assert _path("lstm", n, rnn_impl="cell") == n - 1
    assert _path("convolutional", n, kernel_size=3) == math.ceil((n - 1) / 1)  # centred: 1/side
    assert _path("convolutional", n, kernel_size=3, padding="causal") == math.ceil((n - 1) / 2)
    assert _path("convolutional", n, kernel_size=3, padding="causal", growth=True) == \
        math.ceil(math.log(n, 3) - 1e-9)  # reach after L layers: 3^L - 1 >= n - 1


def test_table_without_table1_results_says_what_to_run(tmp_path):
    result = CliRunner().invoke(cli, ["table", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "tvr run table1" in result.output


@pytest.mark.slow
def test_parallel_scan_row_has_log_depth_and_no_paper_claim(tiny):
    """minGRU through its level-by-level scan: depth adds a constant per doubling of n (the
    note lists it), far below the LSTM's; the paper column says it is later work."""
    table, notes = table1(tiny[1])
    row = table.set_index("layer").loc["recurrent (parallel scan)"]
    assert row["complexity"] == "not in the paper (Feng et al. 2024)"
    assert row["seq_ops_n_exp"] < 0.5 < table.set_index("layer").loc["recurrent",
                                                                      "seq_ops_n_exp"]
    assert row["flops_n_exp"] == pytest.approx(1, abs=0.05)  # projections: O(n d^2)
    (note,) = (n for n in notes if n.startswith("recurrent (parallel scan)"))
    assert "ops more per doubling of n" in note and "path length in ops" in note
