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


# --------------------------------------------------- every runner, as a Python suite declares it

# (suite, what picks its point there, the TOML grid declaring it): one case per runner at
# least. The file's name cannot be a built-in suite's, so the loaded point is compared with
# the Python one but for `suite` (a point_id leaves the suite out: the ids are equal).
TRANSFORMER = ('config = { n_layers = 2, n_heads = 4, d_ff = 512, dropout = 0.1, norm = "post", '
               'pos_encoding = "sinusoidal" }')
CONVERGED = """
[grid.translate]
steps = 100000
max_tokens = 80
eval_sentences = 200
final_sentences = 0
speed_sentences = 16
target_from = "retrieval"
budget_flops = 4.8e14
eval_flops = 3333333333333.3335
patience = 6
recipe = "translation-cpu-tune"
alphas = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
"""
TRANSFORMER_LM = ('{ n_layers = 2, n_heads = 4, d_ff = 256, dropout = 0.0, norm = "pre", '
                  'pos_encoding = "sinusoidal" }')
EQUIVALENT = [
    ("smoke", dict(runner="layer", subject="self-attention"),
     'mixers = ["self-attention"]\nseq_len = 16\nd_model = 32\nbatch_size = 16\n'),
    ("table1", dict(runner="seq-ops", subject="self-attention"),
     'fit = "seq-ops"\nmixers = ["self-attention"]\nseq_len = 16\nd_model = 16\n'
     'batch_size = 1\nconfig = { n_heads = 4 }\n'),
    ("table1", dict(runner="path", subject="convolutional"),
     'fit = "path"\nmixers = ["convolutional"]\nseq_len = 8\nd_model = 8\nbatch_size = 1\n'
     'dilation_growth = false\nconfig = { kernel_size = 3, padding = "causal" }\n'),
    ("bench", dict(runner="compare", subject="transformer-layer"),
     'mixers = ["transformer-layer"]\nseq_len = 512\nd_model = 512\nbatch_size = 8\n'
     'versus = "torch"\nreps = 7\nconfig = { attn_backend = "sdpa", n_heads = 8 }\n'),
    ("rematch-quick", dict(runner="fwdbwd", subject="lstm"),
     'mixers = ["lstm"]\nseq_len = 64\nd_model = 64\nbatch_size = 4\n'
     'config = { rnn_impl = "fused" }\n'),
    ("scan-error", dict(runner="scan-error", subject="min-gru"),
     'mixers = ["min-gru"]\nseq_len = 256\nd_model = 64\nbatch_size = 4\n'
     'config = { scan = "sequential" }\n'),
    ("threads", dict(runner="threads", subject="self-attention"),
     'mixers = ["self-attention"]\nseq_len = 64\nd_model = 128\nbatch_size = 64\nthreads = 1\n'
     'config = { n_heads = 4 }\n'),
    ("identities", dict(runner="identities", subject="lstm", seed=2),
     'mixers = ["lstm"]\nseq_len = 64\nd_model = 64\nbatch_size = 1\nseeds = [2]\n'),
    ("convergence", dict(runner="train", subject="lstm-lm", task="distance-k", k=1),
     'study = "convergence"\nmodels = ["lstm-lm"]\nseq_len = 64\nd_model = 64\n'
     'batch_size = 32\nconfig = { n_layers = 2, dropout = 0.0 }\n'
     '[grid.train]\ntask = "distance-k"\nalphabet_size = 16\nkeywords = { k = 1 }\n'
     'steps = 5000\nlr = 1e-3\neval_every = 50\ntarget = 0.99\nlength_gen = true\n'
     f'[grid.match]\nmodel = "transformer-lm"\nconfig = {TRANSFORMER_LM}\n'),
    ("mqar-cpu", dict(runner="train", subject="mixer-lm"),
     'study = "mqar-state"\nmodels = ["mixer-lm"]\nseq_len = 8\nd_model = 32\nbatch_size = 64\n'
     'config = { d_ff = 128, dropout = 0.0, mixer_kind = "self-attention", n_heads = 4, '
     'n_layers = 2, pos_encoding = "learned" }\n'
     '[grid.train]\ntask = "mqar"\nalphabet_size = 64\nsteps = 10000\nlr = 0.001\n'
     'eval_every = 100\ntarget = 0.99\n'),
    ("scaling-factor", dict(runner="attn-init", d_model=64),
     'study = "scaling-factor"\nmodels = ["transformer-lm"]\nseq_len = 32\nd_model = 64\n'
     'batch_size = 32\nconfig = { attn_scale = true, d_ff = 256, dropout = 0.0, n_heads = 1, '
     'n_layers = 1, norm = "pre", pos_encoding = "sinusoidal" }\n'
     '[grid.train]\ntask = "copy"\nalphabet_size = 16\n'),
    ("norm-warmup", dict(runner="layer-grads", n_layers=6, norm="post"),
     'study = "norm-warmup"\nmodels = ["transformer-lm"]\nseq_len = 64\nd_model = 64\n'
     'batch_size = 32\nconfig = { d_ff = 256, dropout = 0.0, n_heads = 4, n_layers = 6, '
     'norm = "post", pos_encoding = "sinusoidal" }\n[grid.train]\ntask = "corpus"\n'),
    ("gradient-distance", dict(runner="grad-distance", subject="gru-lm"),
     'study = "gradient-distance"\nmodels = ["gru-lm"]\nseq_len = 128\nd_model = 64\n'
     'batch_size = 32\nconfig = { n_layers = 2, dropout = 0.0 }\n'
     '[grid.train]\ntask = "corpus"\nsteps = 3000\nlr = 1e-3\neval_every = 50\n'
     f'[grid.match]\nmodel = "transformer-lm"\nconfig = {TRANSFORMER_LM}\n'),
    ("translation-cpu-converged", dict(runner="translate", subject="transformer", seed=0),
     f'study = "table2"\nmodels = ["transformer"]\nd_model = 128\nbatch_size = 64\n'
     f'{TRANSFORMER}\n{CONVERGED}'),
    ("translation-cpu-converged", dict(runner="translate", subject="lstm-attention", seed=1),
     f'study = "table2"\nmodels = ["lstm-attention"]\nd_model = 128\nbatch_size = 64\n'
     f'seeds = 1\nconfig = {{ n_layers = 2, dropout = 0.1 }}\n{CONVERGED}'
     f'[grid.match]\nmodel = "transformer"\n{TRANSFORMER[:-2]}, max_len = 1024 }}\n'),
    ("translation-table3-tuned", dict(runner="translate", study="table3-D",
                                      subject="transformer"),
     f'study = "table3-D"\nmodels = ["transformer"]\nd_model = 128\nbatch_size = 64\n'
     f'config = {{ attn_dropout = 0.0, d_ff = 512, dropout = 0.0, n_heads = 4, n_layers = 2, '
     f'norm = "post", pos_encoding = "sinusoidal" }}\n{CONVERGED}'
     f'score_test = false\nrecipe_keeps = ["dropout", "attn_dropout"]\n'),
    ("translation-cpu-converged", dict(runner="retrieval"),
     'study = "table2"\n[grid.translate]\nfinal_sentences = 0\n'),
    ("translation-quick", dict(runner="source-copy"),
     'study = "table2"\n[grid.translate]\nfinal_sentences = 100\neval_max_words = 16\n'),
    ("translation-quick", dict(runner="constant"),
     'study = "table2"\n[grid.translate]\nfinal_sentences = 100\neval_max_words = 16\n'),
]


def python_point(suite: str, pick: dict):
    """The first point of `suite` whose fields and columns (config, options) hold `pick`."""
    import dataclasses

    import experiments

    for p in experiments.points(suite):
        view = {f.name: getattr(p, f.name) for f in dataclasses.fields(p)} | p.columns()
        if all(view.get(k) == v for k, v in pick.items()):
            return p
    raise AssertionError(f"suite {suite!r} has no point with {pick}")


def test_every_runner_can_be_declared_in_a_suite_file():
    """Generic over the runner table: a runner added later without a measure here, or
    without a case in EQUIVALENT, fails."""
    from experiments.suitefile import MEASURES
    from harness.run.runner_table import RUNNERS

    assert set(MEASURES) == set(RUNNERS)
    assert set(RUNNERS) <= {pick["runner"] for _, pick, _ in EQUIVALENT}


@pytest.mark.parametrize("case", EQUIVALENT, ids=lambda c: f"{c[1]['runner']}-{c[0]}")
def test_a_suite_file_point_equals_the_python_suites(tmp_path, case):
    from dataclasses import replace

    suite, pick, grid = case
    expected = python_point(suite, pick)
    path = write(tmp_path, f'name = "same"\n[[grid]]\nmeasure = "{pick["runner"]}"\n{grid}')
    _, _, (loaded,) = load(path)
    assert loaded.suite == "same"
    assert loaded.point_id == expected.point_id
    assert loaded.columns() == expected.columns()
    assert replace(loaded, suite=expected.suite) == expected


TRANSLATION = """
name = "tr"
[[grid]]
measure = "translate"
models = ["lstm-attention"]
d_model = 32
batch_size = 16
config = { n_layers = 1 }
[grid.translate]
steps = 12
peak_lr = [1e-3, 3e-3]
alphas = [0.6, 1]
[grid.match]
model = "transformer"
config = { n_layers = 1, d_ff = 64 }
[[grid]]
measure = "retrieval"
study = "table2"
[[grid]]
measure = "threads"
mixers = ["lstm"]
seq_len = 8
d_model = 8
batch_size = 2
threads = [1, 2]
[[grid]]
measure = "attn-init"
models = ["transformer-lm"]
seq_len = 8
d_model = 16
batch_size = 2
[grid.train]
task = "copy"
match = "transformer-lm"
"""


def test_options_of_every_kind_read_as_their_fields(tmp_path):
    """A list is one more axis for a scalar option and the value of a tuple option (an
    integer where a float goes is that float); Match from [grid.match] or its short form."""
    from experiments.spec import Match, ThreadOptions

    _, _, points = load(write(tmp_path, TRANSLATION))
    by = {r: [p for p in points if p.runner == r] for r in ("translate", "retrieval",
                                                            "threads", "attn-init")}
    assert sorted(p.options.peak_lr for p in by["translate"]) == [1e-3, 3e-3]
    assert {p.options.alphas for p in by["translate"]} == {(0.6, 1.0)}
    assert {p.options.match for p in by["translate"]} == {
        Match("transformer", (("d_ff", 64), ("n_layers", 1)))}
    assert {(p.seq_len, p.d_model, p.batch_size) for p in by["translate"]} == {(0, 32, 16)}
    (retrieval,) = by["retrieval"]
    assert (retrieval.subject, retrieval.d_model, retrieval.study) == ("retrieval", 0, "table2")
    assert [p.options for p in by["threads"]] == [ThreadOptions(1), ThreadOptions(2)]
    (probe,) = by["attn-init"]
    assert probe.options.match == Match("transformer-lm") and probe.options.steps == 0


BAD_OPTIONS = {  # what to change in TRANSLATION -> the key the message must name
    "seq_len of a translation": (("d_model = 32\n", "d_model = 32\nseq_len = 8\n"),
                                 "grid[0].seq_len"),
    "unknown option": (("steps = 12", "steps = 12\nbeams = 4"), "grid[0].translate.beams"),
    "integer option as a float": (("steps = 12", "steps = 1.5"), "grid[0].translate.steps"),
    "option out of its range": (("peak_lr = [1e-3, 3e-3]", "peak_lr = [0, 3e-3]"),
                                "grid[0].translate.peak_lr"),
    "tuple option not a list": (("alphas = [0.6, 1]", "alphas = 0.6"),
                                "grid[0].translate.alphas"),
    "tuple option's item": (("alphas = [0.6, 1]", "alphas = [0.6, \"1\"]"),
                            "grid[0].translate.alphas"),
    "unknown recipe": (("steps = 12", "steps = 12\nrecipe = \"mine\""),
                       "grid[0].translate.recipe"),
    "unknown stopping metric": (("steps = 12", "steps = 12\nstop_on = \"dev_loss\""),
                                "grid[0].translate.stop_on"),
    "unknown match model": (("model = \"transformer\"", "model = \"transformr\""),
                            "grid[0].match.model"),
    "unknown match knob": (("n_layers = 1, d_ff = 64", "n_layer = 1"), "grid[0].match.config"),
    "match twice": (("steps = 12", "steps = 12\nmatch = \"transformer\""), "grid[0].match"),
    "short match, unknown model": (("match = \"transformer-lm\"", "match = \"gpt\""),
                                   "grid[3].train.match"),
    "dtype of a model measure": (("batch_size = 16\n", "batch_size = 16\ndtype = \"float16\"\n"),
                                 "grid[0].dtype"),
    "models of a baseline": (("study = \"table2\"", "study = \"table2\"\nmodels = [\"lstm\"]"),
                             "grid[1].models"),
    "seeds of a baseline": (("study = \"table2\"", "study = \"table2\"\nseeds = [1]"),
                            "grid[1].seeds"),
    "no threads": (("threads = [1, 2]", "threads = [0, 2]"), "grid[2].threads"),
    "train options of a translation": (("steps = 12", "steps = 12\n[grid.train]\ntask = \"copy\""),
                                       "grid[0].train"),
}


@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_a_bad_option_is_one_line_naming_file_and_key(tmp_path, case):
    (old, new), key = BAD_OPTIONS[case]
    assert old in TRANSLATION
    path = write(tmp_path, TRANSLATION.replace(old, new, 1))
    with pytest.raises(SuiteFileError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message and f": {key}:" in message and "\n" not in message, message


def test_scan_error_takes_the_scanned_mixers_only(tmp_path):
    text = ('name = "s"\n[[grid]]\nmeasure = "scan-error"\nmixers = ["%s"]\nseq_len = 8\n'
            'd_model = 8\nbatch_size = 1\n')
    with pytest.raises(SuiteFileError, match=r"grid\[0\]\.mixers: measure 'scan-error' does "
                                             r"not take 'lstm'; valid: min-gru, min-lstm"):
        load(write(tmp_path, text % "lstm"))
    assert len(load(write(tmp_path, text % "min-lstm"))[2]) == 1


def test_the_translation_example_is_translation_quick_but_its_plain_lstm():
    """examples/translation/translation-small.toml: the Transformer, the attentional LSTM
    matched to it and the three baselines, the very points of translation-quick."""
    import experiments

    root = Path(__file__).resolve().parents[2]
    name, _, points = load(root / "examples/translation/translation-small.toml")
    assert name == "translation-small"
    quick = {p.point_id: p for p in experiments.points("translation-quick")
             if p.subject != "lstm"}
    assert sorted(p.point_id for p in points) == sorted(quick)
