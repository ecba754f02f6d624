"""Suite files: a good one gives its grid's points; each malformed one is one line naming the
file and the key, exit code 2, before anything runs."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from experiments.suitefile import SuiteFileError, load
from harness.cli import cli

GOOD = """
name = "mine"
[config.self-attention]
n_heads = 2
[[grid]]
mixers = ["self-attention", "lstm"]
seq_len = [8, 16]
d_model = 8
batch_size = 1
seeds = [0, 1]
[[grid]]
measure = "path"
fit = "path"
mixers = ["convolutional"]
n = 8  # the older spellings of seq_len, d_model and batch_size
d = 4
batch = 1
dilation_growth = true
config = { kernel_size = [3, 5], padding = "causal" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(text)
    return path


def test_grid_is_the_product_of_its_axes(tmp_path):
    name, _, points = load(write(tmp_path, GOOD))
    assert name == "mine"
    layer = [p for p in points if p.runner == "layer"]
    assert len(layer) == 2 * 2 * 2  # mixers x n x seeds
    assert {dict(p.config).get("n_heads") for p in layer if p.subject == "self-attention"} == {2}
    assert all(p.config == () for p in layer if p.subject == "lstm")
    path = [p for p in points if p.runner == "path"]
    assert sorted(dict(p.config)["kernel_size"] for p in path) == [3, 5]
    assert all(p.options.dilation_growth and p.fit == "path" for p in path)
    assert {(p.seq_len, p.d_model, p.batch_size) for p in layer} == {(8, 8, 1), (16, 8, 1)}
    assert {(p.seq_len, p.d_model, p.batch_size) for p in path} == {(8, 4, 1)}


BAD = {  # what to change in GOOD -> the key the message must name
    "unknown top key": (("name = \"mine\"", "name = \"mine\"\nmixer = 1"), "mixer"),
    "unknown grid key": (("seeds = [0, 1]", "seed = [0, 1]"), "grid[0].seed"),
    "wrong type": (("seq_len = [8, 16]", "seq_len = [8, \"16\"]"), "grid[0].seq_len"),
    "wrong type of batch": (("batch_size = 1\nseeds", "batch_size = true\nseeds"),
                            "grid[0].batch_size"),
    "empty axis": (("seq_len = [8, 16]", "seq_len = []"), "grid[0].seq_len"),
    "old and new spelling": (("d_model = 8", "d_model = 8\nd = 8"), "grid[0].d"),
    "missing size": (("d_model = 8\n", ""), "grid[0].d_model"),
    "old spelling, wrong type": (("d = 4", "d = \"4\""), "grid[1].d"),
    "unknown mixer": (("\"self-attention\", \"lstm\"]", "\"self-attention\", \"mamba\"]"),
                      "grid[0].mixers"),
    "unknown config subject": (("[config.self-attention]", "[config.self-atention]"),
                               "config.self-atention"),
    "unknown knob": (("n_heads = 2", "n_heads = 2\nheads = 2"), "config.self-attention"),
    "bad knob value": (("padding = \"causal\"", "padding = \"both\""), "grid[1].config"),
    "bad dtype": (("seeds = [0, 1]", "dtype = \"float64\""), "grid[0].dtype"),
    "built-in name": (("name = \"mine\"", "name = \"quick\""), "name"),
    "key of another measure": (("measure = \"path\"", "measure = \"seq-ops\""),
                               "grid[1].dilation_growth"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_file_is_one_line_naming_file_and_key(tmp_path, case):
    (old, new), key = BAD[case]
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(SuiteFileError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message and f": {key}:" in message and "\n" not in message


def test_empty_grid_exits_2_with_one_line(tmp_path):
    path = write(tmp_path, 'name = "mine"\n')
    result = CliRunner().invoke(cli, ["run", "--suite-file", str(path), "--dry-run"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert str(path) in line and ": grid:" in line and "Traceback" not in result.output


@pytest.mark.parametrize("case", ["unknown grid key", "wrong type", "unknown mixer"])
def test_cli_exits_2_before_measuring(tmp_path, case):
    (old, new), key = BAD[case]
    path = write(tmp_path, GOOD.replace(old, new, 1))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--suite-file", str(path), "--out", str(out),
                                      "--tracking-uri", "none"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert str(path) in line and key in line
    assert not out.exists()  # nothing ran, nothing was written


def test_not_toml_and_missing_file_are_bad_input(tmp_path):
    path = write(tmp_path, "name = \n")
    for arg in (str(path), str(tmp_path / "absent.toml")):
        result = CliRunner().invoke(cli, ["run", "--suite-file", arg, "--dry-run"])
        assert result.exit_code == 2 and arg in result.output, result.output


def test_train_grid_with_unknown_task_is_caught_before_running(tmp_path):
    path = write(tmp_path, """
name = "mine"
[[grid]]
measure = "train"
models = ["lstm-lm"]
n = 8
d = 16
batch = 4
[grid.train]
task = "juggle"
steps = 5
""")
    result = CliRunner().invoke(cli, ["run", "--suite-file", str(path), "--dry-run"])
    assert result.exit_code == 2 and "juggle" in result.output and str(path) in result.output


def test_suite_and_suite_file_together_or_neither_is_bad_input(tmp_path):
    path = write(tmp_path, GOOD)
    for args in (["run"], ["run", "smoke", "--suite-file", str(path)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2 and "--suite-file" in result.output, result.output


def test_compare_against_torch_needs_a_reference_layer(tmp_path):
    text = 'name = "mine"\n[[grid]]\nmeasure = "compare"\nmixers = ["%s"]\nn = 8\nd = 8\n' \
           'batch = 1\nversus = "%s"\n'
    with pytest.raises(SuiteFileError, match=r"grid\[0\]\.mixers: 'convolutional' has no PyTorch"):
        load(write(tmp_path, text % ("convolutional", "torch")))
    assert len(load(write(tmp_path, text % ("convolutional", "timer")))[2]) == 1


@pytest.mark.parametrize("sizes", [(120, 120), (3000, 3000), (1, 9000, 2)])
def test_a_grid_past_the_point_bound_is_refused_before_it_is_made(tmp_path, sizes):
    """A 3,000 x 3,000 grid made `--dry-run` grow to gigabytes with no output: the product of
    the lists' lengths (here with a second grid sharing the bound) is counted first."""
    import time

    from experiments.suitefile import MAX_POINTS

    lists = [list(range(1, n + 1)) for n in sizes]
    text = ('name = "big"\n[[grid]]\nmixers = ["lstm"]\n'
            f"seq_len = {lists[0]}\nd_model = {lists[1]}\nbatch_size = 1\n")
    if len(lists) > 2:  # 9,000 points, then 2 x 1,000 more: past the bound together
        text += ('[[grid]]\nmixers = ["gru"]\n'
                 f"seq_len = {lists[2]}\nd_model = {list(range(1, 1001))}\nbatch_size = 1\n")
    path = write(tmp_path, text)
    t0 = time.monotonic()
    result = CliRunner().invoke(cli, ["run", "--suite-file", str(path), "--dry-run"])
    assert time.monotonic() - t0 < 20
    assert result.exit_code == 2, result.output[-300:]
    (line,) = result.output.strip().splitlines()
    grid = "grid[1]" if len(lists) > 2 else "grid[0]"
    assert f"{path}: {grid}: " in line and f"at most {MAX_POINTS:,}" in line, line


def test_a_grid_at_the_bound_is_made(tmp_path):
    from experiments.suitefile import MAX_POINTS

    side = int(MAX_POINTS ** 0.5)
    path = write(tmp_path, 'name = "edge"\n[[grid]]\nmixers = ["lstm"]\n'
                           f"seq_len = {list(range(1, side + 1))}\nd_model = "
                           f"{list(range(1, side + 1))}\nbatch_size = 1\n")
    assert len(load(path)[2]) == side * side <= MAX_POINTS
