"""The example plugin (examples/linear-attention) as a user meets it: installed into a
temporary folder, found through its entry points, measured by a suite file and by its own
suite, reported in `tvr table` and the crossover; without it the mixer is unknown."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from harness.cli import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "linear-attention"
SUITE = """
name = "la-test"
[config.self-attention]
n_heads = 2
[config.linear-attention]
n_heads = 2
[config.linear-attention-rnn]
n_heads = 2
[[grid]]
fit = "n"
mixers = ["linear-attention", "self-attention", "lstm"]
seq_len = [16, 32, 64, 128]  # an exponent needs at least 4 points
d_model = 8
batch_size = 1
[[grid]]
fit = "d"
mixers = ["linear-attention", "self-attention", "lstm"]
seq_len = 16
d_model = [8, 16]
batch_size = 1
[[grid]]
measure = "seq-ops"
fit = "seq-ops"
mixers = ["linear-attention", "linear-attention-rnn", "self-attention"]
seq_len = [8, 16]
d_model = 8
batch_size = 1
[[grid]]
measure = "path"
fit = "path"
mixers = ["linear-attention", "self-attention"]
seq_len = [4, 8, 16, 32]
d_model = 4
batch_size = 1
[[grid]]
mixers = ["linear-attention", "self-attention", "lstm"]
seq_len = [8, 16, 32]
d_model = 8
batch_size = 1
[[grid]]
measure = "compare"
versus = "timer"
mixers = ["linear-attention"]
seq_len = 16
d_model = 8
batch_size = 1
[[grid]]
measure = "train"
models = ["mixer-lm"]
seq_len = 4
d_model = 16
batch_size = 8
config = { mixer_kind = "linear-attention", n_layers = 1, n_heads = 2, d_ff = 32 }
[grid.train]
task = "copy"
alphabet_size = 4
steps = 4
eval_every = 2
eval_batches = 1
"""


def tvr(*args: str, plugin: Path | None, cwd: Path) -> subprocess.CompletedProcess:
    """`tvr ARGS` in a fresh process, with the plugin's install folder on its path or not."""
    path = [str(plugin)] if plugin else []
    env = os.environ | {"PYTHONPATH": os.pathsep.join([*path, str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example package pip-installed into a temporary folder (not the test venv)."""
    tmp = tmp_path_factory.mktemp("plugin")
    source, target = tmp / "src", tmp / "site"
    shutil.copytree(EXAMPLE, source)  # pip builds in the tree: keep the repository clean
    isolation = [] if importlib.util.find_spec("setuptools") is None \
        else ["--no-build-isolation"]  # build with this venv's setuptools when it has one
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           *isolation, "--target", str(target), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return target


@pytest.fixture(scope="module")
def measured(installed, tmp_path_factory) -> Path:
    """The small suite file run through the plugin's entry points."""
    work = tmp_path_factory.mktemp("work")
    (work / "la.toml").write_text(SUITE)
    done = tvr("run", "--suite-file", "la.toml", "--out", "out", "--tracking-uri", "none",
               "--device", "cpu", "--min-run-time", "0.01", plugin=installed, cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "out"


@pytest.mark.slow
def test_plugin_rows_are_in_results_csv(measured):
    df = pd.read_csv(measured / "la-test" / "results.csv")
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"][["point_id", "message"]]
    plugin = df[df["mixer"] == "linear-attention"]
    assert set(plugin["runner"]) == {"layer", "seq-ops", "path", "compare"}
    assert (plugin.loc[plugin["runner"] == "layer", "flops_fwd"] > 0).all()
    trained = df[df["model"] == "mixer-lm"]  # the plugin mixer inside the shared LM
    assert len(trained) == 1 and trained["mixer"].isna().all()
    assert trained["mixer_kind"].iloc[0] == "linear-attention"
    assert trained["final_accuracy"].notna().all()
    seq = df[df["runner"] == "seq-ops"].groupby("mixer")["seq_ops"].agg(["min", "max"])
    assert seq.loc["linear-attention", "min"] == seq.loc["linear-attention", "max"]  # O(1)
    assert seq.loc["linear-attention-rnn", "max"] > seq.loc["linear-attention-rnn", "min"]


@pytest.mark.slow
def test_plugin_rows_are_in_tvr_table_and_the_crossover(measured):
    table = CliRunner().invoke(cli, ["table", "--suite", "la-test", "--out", str(measured),
                                     "--format", "csv"])
    assert table.exit_code == 0, table.output
    rows = pd.read_csv(pd.io.common.StringIO(table.output.split("\n\n")[0]))
    assert {"self-attention", "recurrent", "linear-attention"} <= set(rows["layer"])
    la = rows.set_index("layer").loc["linear-attention"]
    assert la["flops_n_exp"] == pytest.approx(1.0, abs=0.1)  # O(n d^2): linear in n
    assert la["path_n_exp"] == pytest.approx(0.0, abs=1e-9)  # one layer at every n
    cross = CliRunner().invoke(cli, ["table", "--suite", "la-test", "--crossover", "--out",
                                     str(measured), "--format", "csv"])
    assert cross.exit_code == 0, cross.output
    versus = pd.read_csv(pd.io.common.StringIO(cross.output))["versus"]
    assert {"lstm", "linear-attention"} <= set(versus)


@pytest.mark.slow
def test_report_has_table1_crossover_and_figures_of_a_suite_file(measured):
    result = CliRunner().invoke(cli, ["report", "--suite", "la-test", "--out", str(measured)])
    assert result.exit_code == 0, result.output
    text = (measured / "REPORT.md").read_text()
    assert "### Table 1, measured" in text and "### Crossover" in text
    assert "| linear-attention" in text
    for figure in ("crossover", "sequential-ops", "path-length"):
        assert (measured / "la-test" / f"{figure}.png").stat().st_size > 0
    assert not (measured / "table1.md").exists()  # the table1 suite's file, not this one's


@pytest.mark.slow
def test_plugin_suite_and_listing_come_from_the_entry_points(installed, tmp_path):
    listed = tvr("suites", plugin=installed, cwd=tmp_path)
    assert "linear-attention-smoke" in listed.stdout
    assert "[from tvr-linear-attention]" in listed.stdout
    mixers = tvr("models", plugin=installed, cwd=tmp_path)
    line = next(s for s in mixers.stdout.splitlines() if s.split()[:1] == ["linear-attention"])
    assert "[from tvr-linear-attention]" in line
    done = tvr("run", "linear-attention-smoke", "--out", "out", "--tracking-uri", "none",
               "--device", "cpu", "--min-run-time", "0.01", plugin=installed, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    df = pd.read_csv(tmp_path / "out" / "linear-attention-smoke" / "results.csv")
    assert (df["status"] == "ok").all() and "linear-attention-rnn" in set(df["mixer"])


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tvr_linear_attention") is not None,
                    reason="the example package is installed here (README's pip install -e): "
                           "its absence cannot be tested in this environment")
def test_without_the_package_the_mixer_is_unknown(tmp_path):
    (tmp_path / "la.toml").write_text(SUITE)
    done = tvr("run", "--suite-file", "la.toml", "--tracking-uri", "none", plugin=None,
               cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "unknown mixer 'linear-attention'" in line and "la.toml" in line
    assert "grid[0].mixers" in line and not (tmp_path / "results").exists()
    gone = tvr("run", "linear-attention-smoke", plugin=None, cwd=tmp_path)
    assert gone.returncode == 2 and "unknown suite 'linear-attention-smoke'" in gone.stderr


@pytest.mark.slow
def test_plugin_module_without_packaging(tmp_path):
    (tmp_path / "my_layers.py").write_text(
        "import models\nfrom tvr_linear_attention import LinearAttention\n"
        "models.register_mixer('my-linear', LinearAttention)\n")
    done = tvr("--plugin", "my_layers", "models", plugin=EXAMPLE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "my-linear" in done.stdout and "[from module tvr_linear_attention]" in done.stdout
    bad = tvr("--plugin", "no_such_module_xyz", "models", plugin=None, cwd=tmp_path)
    assert bad.returncode == 2 and "no_such_module_xyz" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


@pytest.fixture
def linear_attention(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import tvr_linear_attention

    return tvr_linear_attention


def test_parallel_and_recurrent_forms_are_equal(linear_attention):
    la = linear_attention
    parallel = la.LinearAttention(16, n_heads=4, causal=True).double()
    recurrent = la.recurrent_linear_attention(16, n_heads=4).double()
    recurrent.load_state_dict(parallel.state_dict())
    x = torch.randn(3, 11, 16, dtype=torch.float64)
    torch.testing.assert_close(parallel(x), recurrent(x), rtol=1e-12, atol=1e-12)
    # and both equal the quadratic form: normalised phi(Q) phi(K)^T, causally masked, times V
    q, k, v = (torch.randn(2, 3, 7, 4, dtype=torch.float64) for _ in range(3))
    q, k = la.feature_map(q), la.feature_map(k)
    w = (q @ k.transpose(-1, -2)).tril()
    quadratic = (w @ v) / (w.sum(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(la.parallel(q, k, v, True, 1e-6), quadratic)
    torch.testing.assert_close(la.recurrent(q, k, v, 1e-6), quadratic)
    full = (q @ k.transpose(-1, -2))
    torch.testing.assert_close(la.parallel(q, k, v, False, 1e-6),
                               (full @ v) / (full.sum(-1, keepdim=True) + 1e-6))


def test_bad_knobs_name_the_valid_values(linear_attention):
    la = linear_attention
    for knobs, valid in (({"n_heads": 3}, "valid: 1, 2, 4, 8, 16"),
                         ({"form": "sideways"}, "valid: parallel, recurrent"),
                         ({"form": "recurrent"}, "valid: 'parallel'")):
        with pytest.raises(ValueError, match=valid):
            la.LinearAttention(16, **knobs)
