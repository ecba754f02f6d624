"""Point overrides: each a Point -> Point change naming its folder suffix, composed in order;
`tvr run --set KEY=VALUE` and a suite file's `[set]` use the same ones. All in-process, on
declared points (nothing is measured)."""

from pathlib import Path

import pytest
from click.testing import CliRunner

import experiments
from experiments import overrides as o
from experiments.spec import TrainOptions, TranslateOptions
from experiments.suitefile import SuiteFileError, load
from harness.cli import cli


def test_variant_names_compose_as_before():
    """The variant names the CLI always made (their folders now under the suite's): corpus,
    corpus choice, dtype, compiled; no override, no variant."""
    points = experiments.points("quick")
    chosen, name = o.apply(points, [o.DType("bfloat16"), o.Compiled()], "quick")
    assert name == "bfloat16-compiled"
    assert {p.dtype for p in chosen} == {"bfloat16"} and all(p.compile for p in chosen)
    assert [p.point_id for p in chosen] != [p.point_id for p in points]
    assert o.apply(points, [], "quick") == (points, "")
    translation = experiments.points("translation-quick")
    assert o.apply(translation, [o.Bitext((), True)], "t")[1] == "reverse"
    assert o.apply(translation, [o.Bitext(("/a.tsv",), False, "mine")], "t")[1] \
        == "bitext-mine"


def test_only_filters_without_a_suffix_and_names_the_valid_subjects():
    points = experiments.points("smoke")
    chosen, name = o.apply(points, [o.Only(("lstm",))], "smoke")
    assert name == "" and chosen and {p.subject for p in chosen} == {"lstm"}
    with pytest.raises(ValueError, match="--only mamba: suite 'smoke' has no such mixer"):
        o.apply(points, [o.Only(("mamba",))], "smoke")


def test_corpus_sets_the_path_of_corpus_task_points_only():
    points = experiments.points("convergence-smoke")
    chosen, name = o.apply(points, [o.Corpus("/x/tiny.txt", "tiny")], "c")
    assert name == "corpus-tiny"
    for before, after in zip(points, chosen, strict=True):
        task = before.options.task if isinstance(before.options, TrainOptions) else None
        if task is not None and task.name == "corpus":
            assert dict(after.options.task.keywords)["path"] == "/x/tiny.txt"
        else:
            assert after == before


def test_set_changes_an_option_a_size_or_a_config_key_where_the_point_has_it():
    points = experiments.points("translation-quick")
    chosen, name = o.apply(points, [o.Set.parse("steps=7"), o.Set.parse("seed=3")], "t")
    assert name == "steps-7-seed-3"
    assert all(p.seed == 3 for p in chosen)
    assert all(p.options.steps == 7 for p in chosen if isinstance(p.options, TranslateOptions))
    heads = [p for p in experiments.points("identities") if "n_heads" in dict(p.config)]
    assert heads, "identities has a point with n_heads"
    changed, _ = o.apply(heads, [o.Set.parse("n_heads=1")], "s")
    assert all(dict(p.config)["n_heads"] == 1 for p in changed)


@pytest.mark.parametrize("texts, name", [
    (("dropout=0", "dropout=0.0", "dropout=0e0"), "dropout-0"),
    (("budget_flops=1.2e14", "budget_flops=120000000000000", "budget_flops=1.20E+14"),
     "budget_flops-1.2e14"),
    (("attn_dropout=0.05914", "attn_dropout=5.914e-2"), "attn_dropout-0.05914"),
    (("peak_lr=0.001", "peak_lr=1e-3", "peak_lr=0.0010"), "peak_lr-1e-3"),
    (("source_eos=true", "source_eos=True", "source_eos=1"), "source_eos-true"),
    (("seed=1", "seed=01"), "seed-1"),
])
def test_one_value_written_several_ways_names_one_variant(texts, name):
    """A setting's value names its folder as its type reads it: `--set dropout=0` and
    `dropout=0.0` are one measurement, so one variant (resume finds the other's rows);
    the names already stored (1.2e14, 0.05914, true) keep theirs."""
    points = experiments.points("translation-quick")
    for text in texts:
        chosen, got = o.apply(points, [o.Set.parse(text)], "t")
        assert got == name, text
        assert chosen == o.apply(points, [o.Set.parse(texts[0])], "t")[0]


def test_set_reaches_a_model_config_key_the_suite_leaves_at_its_default():
    """attn_dropout is a Transformer config key no translation-quick point names: --set
    changes it on the Transformer's points, typed as the config types it, and on no other."""
    points = experiments.points("translation-quick")
    assert not any("attn_dropout" in dict(p.config) for p in points)
    chosen, name = o.apply(points, [o.Set.parse("attn_dropout=0.05")], "t")
    assert name == "attn_dropout-0.05"
    for before, after in zip(points, chosen, strict=True):
        if before.runner == "translate" and before.subject == "transformer":
            assert dict(after.config)["attn_dropout"] == 0.05
        else:
            assert after == before
    with pytest.raises(ValueError, match="vocab_size: no point"):
        o.apply(points, [o.Set.parse("vocab_size=9")], "t")
    with pytest.raises(ValueError, match="--set init=kaiming: invalid init"):
        o.apply(points, [o.Set.parse("init=kaiming")], "t")  # refused before any point runs
    with pytest.raises(ValueError, match="--set attn_dropout=1.5"):
        o.apply(points, [o.Set.parse("attn_dropout=1.5")], "t")


@pytest.mark.parametrize("text,needle", [
    ("steps", "write KEY=VALUE"),
    ("steps=a/b", "letters, digits"),
    ("nosuch=1", "no point of suite"),
    ("seq_len=abc", "not an integer"),
    ("seq_len=0", r"an integer in \[1, 1,048,576\]"),
])
def test_set_refuses_a_bad_key_or_value_in_one_line(text, needle):
    with pytest.raises(ValueError, match=needle):
        o.apply(experiments.points("smoke"), [o.Set.parse(text)], "smoke")


def test_cli_set_is_bad_input_exit_2():
    result = CliRunner().invoke(cli, ["run", "smoke", "--set", "nosuch=1", "--dry-run"])
    assert result.exit_code == 2 and "--set nosuch" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_suite_file_set_table(tmp_path: Path):
    path = tmp_path / "s.toml"
    grid = ('name = "mine"\n[[grid]]\nmixers = ["lstm"]\nn = 8\nd = 4\nbatch = 1\n'
            "[set]\n")
    path.write_text(grid + "seed = 2\n")
    name, _, points = load(path)
    assert name == "mine" and [p.seed for p in points] == [2]
    path.write_text(grid + "nosuch = 2\n")
    with pytest.raises(SuiteFileError, match=r"set\.nosuch: no point"):
        load(path)


def test_parallel_is_read_as_bitext_with_one_line_saying_so(tmp_path: Path):
    """The old name of --bitext still works; stderr says it is now --bitext."""
    (tmp_path / "c.tsv").write_text("a\tb\n")  # too small: both names fail on it alike
    for flag in ("--bitext", "--parallel"):
        result = CliRunner().invoke(
            cli, ["run", "translation-tiny", flag, str(tmp_path / "c.tsv"), "--dry-run"])
        assert result.exit_code == 2 and "--bitext" in result.stderr
        said = "--parallel is now --bitext" in result.stderr
        assert said == (flag == "--parallel"), result.stderr


def test_points_an_override_makes_equal_are_kept_once():
    """A size set on a grid over that size: one point per remaining combination."""
    points, name = o.apply(experiments.points("quick"), [o.Set.parse("seq_len=64")], "quick")
    ids = [p.point_id for p in points]
    assert len(ids) == len(set(ids)) and name == "seq_len-64"
    assert {p.seq_len for p in points} == {64}
    assert len(ids) < len(experiments.points("quick"))


@pytest.mark.parametrize("suite,text,allowed", [
    ("translation-quick", "steps=0", "an integer in [1, 10,000,000]"),
    ("translation-quick", "steps=99999999999999999999", "an integer in [1, 10,000,000]"),
    ("translation-quick", "budget_flops=nan", "a finite number in (0, 1e+24]"),
    ("translation-quick", "budget_flops=0", "a finite number in (0, 1e+24]"),
    ("translation-quick", "peak_lr=inf", "a finite number in (0, 10]"),
    ("translation-quick", "warmup=2", "a finite number in [0, 1]"),
    ("convergence-smoke", "lr=nan", "a finite number in (0, 10]"),
    ("convergence-smoke", "lr=0", "a finite number in (0, 10]"),
    ("convergence-smoke", "lr=inf", "a finite number in (0, 10]"),
    ("smoke", "seed=99999999999999999999", "an integer in [0, 4,294,967,295]"),
    ("smoke", "d_model=999999999", "an integer in [1, 65,536]"),
    ("smoke", "dropout=nan", "a finite number in [0, 1)"),
])
def test_set_refuses_a_value_outside_its_meaning_at_the_command_line(suite, text, allowed):
    """A value the setting cannot mean (no steps, no budget, a learning rate of nan, a seed
    past int64, a width no machine holds) is one line naming it and exit 2, before any point
    runs: it once trained 1,000 steps for steps=0, ignored a nan budget, or trained on."""
    result = CliRunner().invoke(cli, ["run", suite, "--set", text, "--dry-run"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines == [f"Error: --set {text}: must be {allowed}"], result.output


@pytest.mark.parametrize("text,valid", [
    ("stop_on=dev_loss", "dev_bleu_greedy, dev_ppl"),
    ("target_from=oracle", "retrieval"),
])
def test_set_refuses_a_string_outside_its_choices_at_the_command_line(text, valid):
    """A string setting with named values (what patience watches, where the target comes
    from) refuses any other in one line and exit 2: target_from=oracle once ran the sweep
    with no target, and stop_on=dev_loss would stop every run on a metric never logged."""
    result = CliRunner().invoke(cli, ["run", "translation-quick", "--set", text, "--dry-run"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines == [f"Error: --set {text}: unknown value; valid: {valid}"], result.output
    o.apply(experiments.points("translation-quick"), [o.Set.parse("stop_on=dev_ppl")], "t")


def test_set_keeps_values_within_their_meaning():
    """The bounds refuse nothing a suite means: a fraction of warm-up, an integer one of a
    training loop, a budget, a small learning rate."""
    for suite, text in [("translation-quick", "warmup=0.1"), ("convergence-smoke", "warmup=100"),
                        ("translation-quick", "budget_flops=1.2e14"),
                        ("convergence-smoke", "lr=3e-4"), ("smoke", "seed=4294967295")]:
        o.apply(experiments.points(suite), [o.Set.parse(text)], suite)



def test_the_folder_name_is_canonical_and_each_point_reads_the_value_as_written():
    """One point types a config key as float (a suite file wrote 2048.0), another as int:
    `--set d_ff=4000` names one folder as the first reads it and sets 4000 in both, each
    in its own type (the canonical name `4e3` is for the folder, never re-read)."""
    import dataclasses

    base = next(p for p in experiments.points("translation-quick")
                if p.runner == "translate" and p.subject == "transformer")
    config = dict(base.config)
    floated = dataclasses.replace(base, config=tuple((config | {"d_ff": 2048.0}).items()))
    inted = dataclasses.replace(base, config=tuple((config | {"d_ff": 2048}).items()), seed=9)
    chosen, name = o.apply([floated, inted], [o.Set.parse("d_ff=4000")], "t")
    assert name == "d_ff-4e3"
    got = [dict(p.config)["d_ff"] for p in chosen]
    assert got == [4000.0, 4000] and [type(v) for v in got] == [float, int]
