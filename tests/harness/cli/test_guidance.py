"""Every error and warning names a command that works: each case below makes the message,
then runs the command it suggests and sees it work."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import models.plugins
from harness.cli import cli

REFERENCE = Path(__file__).resolve().parents[3] / "results"
TINY = 'mixers = ["lstm"]\nseq_len = [8]\nd_model = 8\nbatch_size = 1\n'


def tvr(*args: str):  # noqa: ANN201
    return CliRunner().invoke(cli, list(args))


def suggested(text: str, before: str) -> list[str]:
    """The command in backticks after `before` in a message, as argv without `tvr`."""
    found = re.search(re.escape(before) + r"`([^`]+)`", text)
    assert found, text
    words = shlex.split(found.group(1))
    assert words[0] == "tvr", words
    return words[1:]


@pytest.mark.slow
def test_busy_warning_on_a_suite_file_reruns_that_file(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.measure.machine.is_busy", lambda *_: True)
    suite = tmp_path / "tiny.toml"
    suite.write_text(f'name = "tiny-busy"\n[[grid]]\n{TINY}')
    first = tvr("run", "--suite-file", str(suite), "--out", str(tmp_path / "out"),
                "--tracking-uri", "none", "--min-run-time", "0.01")
    assert first.exit_code == 0, first.output
    again = suggested(first.stderr, "rerun on an idle machine with ")
    assert "--suite-file" in again and "--no-resume" in again and "tiny-busy" not in again
    rerun = tvr(*again)
    assert rerun.exit_code == 0 and "tiny-busy: 1 ok" in rerun.output, rerun.output


def test_a_mistyped_suite_suggests_the_stored_one(tmp_path: Path) -> None:
    shutil.copytree(REFERENCE / "identities", tmp_path / "identities")
    wrong = tvr("table", "--suite", "identitis", "--out", str(tmp_path))
    assert wrong.exit_code == 2 and "tvr run identitis" not in wrong.output
    right = tvr(*suggested(wrong.output, "did you mean "))
    assert right.exit_code == 2 and "no layer measurements" in right.output  # read, not unknown
    missing = tvr("table", "--suite", "smoke", "--out", str(tmp_path))
    run = suggested(missing.output, "run ")
    assert run[:2] == ["run", "smoke"] and tvr(*run, "--dry-run").exit_code == 0


def test_a_plugin_mixer_without_its_module_says_how_to_load_it_by_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models.plugins, "_REGISTERED", {})  # this test's mixer stays here
    monkeypatch.setattr(sys, "path", list(sys.path))
    module = tmp_path / "plug" / "guidance_probe.py"
    module.parent.mkdir()
    module.write_text("import models\nfrom torch import nn\n\n"
                      "def probe(d_model):\n    return nn.Linear(d_model, d_model)\n\n"
                      "models.register_mixer('guidance-probe', probe)\n")
    suite = tmp_path / "probe.toml"
    suite.write_text(f'name = "probe"\n[[grid]]\n{TINY}'.replace('"lstm"', '"guidance-probe"'))
    unknown = tvr("run", "--suite-file", str(suite), "--dry-run")
    assert unknown.exit_code == 2 and "unknown mixer 'guidance-probe'" in unknown.output
    words = suggested(unknown.output, "load its module first: ")
    assert words[:2] == ["--plugin", "path/to/module.py"]
    done = tvr("--plugin", str(module), "run", "--suite-file", str(suite), "--dry-run")
    assert done.exit_code == 0 and "1 points in suite 'probe'" in done.output, done.output
    gone = tvr("--plugin", str(tmp_path / "nothing.py"), "models")
    assert gone.exit_code == 2 and "no such file" in gone.output


def test_a_negative_set_value_says_what_it_may_hold() -> None:
    wrong = tvr("run", "smoke", "--set", "d_model=-4", "--dry-run")
    assert wrong.exit_code == 2 and "must start with a letter or digit" in wrong.output
    fix = re.search(r"e\.g\. (--set \S+)", wrong.output)
    assert fix, wrong.output
    assert tvr("run", "smoke", *shlex.split(fix.group(1)), "--dry-run").exit_code == 0


@pytest.mark.slow
def test_crossover_on_a_suite_file_says_which_grid_it_needs(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    fitted = tmp_path / "fitted.toml"
    fitted.write_text(f'name = "fitted"\n[[grid]]\nfit = "n"\n{TINY}'
                      .replace("[8]", "[8, 16]"))
    args = ("--out", out, "--tracking-uri", "none", "--min-run-time", "0.01")
    assert tvr("run", "--suite-file", str(fitted), *args).exit_code == 0
    wrong = tvr("table", "--suite", "fitted", "--crossover", "--out", out)
    assert wrong.exit_code == 2 and "the crossover needs" in wrong.output, wrong.output
    grid = wrong.output[wrong.output.index("[[grid]]"):].strip()
    plain = tmp_path / "plain.toml"
    plain.write_text('name = "plain"\n' + re.sub(r" (?=\w+ = )", "\n", grid) + "\n")
    made = tvr("run", "--suite-file", str(plain), *args)
    assert made.exit_code == 0, (plain.read_text(), made.output)
    right = tvr("table", "--suite", "plain", "--crossover", "--out", out)
    assert right.exit_code == 0 and "lstm" in right.output, right.output
