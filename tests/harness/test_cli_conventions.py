"""The CLI's manners: help that names things once and loads nothing heavy, environment
variables, completion, machine-readable output, exit codes a CI job can act on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import experiments
import models
from harness.cli import cli
from harness.cli.run import STATUSES
from harness.results import STATUSES as RESULT_STATUSES


def tvr(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env, prog_name="tvr")


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})}, check=False)


def test_help_loads_nothing_heavy() -> None:
    """`tvr --help` and `tvr run --help` answer without torch, pandas or MLflow: the
    suites and models load only inside the commands that use them."""
    done = _python(
        "import sys\n"
        "from harness.cli import cli\n"
        "for args in (['--help'], ['run', '--help'], ['table', '--help'], ['ui', '--help']):\n"
        "    try:\n"
        "        cli.main(args, prog_name='tvr')\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, (args, e.code)\n"
        "heavy = {'torch', 'pandas', 'mlflow', 'matplotlib'} & set(sys.modules)\n"
        "print('HEAVY', sorted(heavy))\n")
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr


def test_run_help_names_the_suite_once() -> None:
    result = tvr("run", "--help")
    assert result.exit_code == 0
    assert "Usage: tvr run [OPTIONS] SUITE" in result.output
    assert "convergence-quick|" not in result.output and "Examples:" in result.output
    bad = tvr("run", "nope")
    assert bad.exit_code == 2
    lines = [line for line in bad.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].count("convergence-quick") == 1, bad.output


def test_options_read_environment_variables(tmp_path: Path) -> None:
    assert "TVR_RUN_OUT" in tvr("run", "--help").output
    assert "TVR_RUN_COMPILE]" in tvr("run", "--help").output  # named after the flag
    result = tvr("run", "smoke", env={"TVR_RUN_DRY_RUN": "1", "TVR_RUN_ONLY": "gru"})
    assert result.exit_code == 0, result.output
    assert "dry run" in result.output and "lstm" not in result.output


@pytest.mark.slow
def test_completion_offers_figures_statuses_and_suites(tmp_path: Path) -> None:
    def complete(words: str) -> list[str]:
        done = _python("from harness.cli import main; main()",
                       {"_TVR_COMPLETE": "bash_complete", "COMP_WORDS": words,
                        "COMP_CWORD": str(len(words.split(" ")) - 1)})
        return [line.split(",", 1)[1] for line in done.stdout.splitlines()]

    assert "crossover" in complete("tvr plot cross")
    assert complete("tvr run smoke --fail-on error,oo") == ["error,oom"]
    assert "convergence-quick" in complete("tvr run conv")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "results.csv").write_text("suite\n")
    assert complete(f"tvr table --out {tmp_path} --suite m") == ["mine"]


def test_suites_and_models_as_json() -> None:
    suites = json.loads(tvr("suites", "--format", "json").output)
    assert [s["name"] for s in suites] == experiments.suite_names()
    assert all(s["points"] == len(experiments.points(s["name"])) for s in suites)
    listing = json.loads(tvr("models", "--format", "json").output)
    names = {e["name"] for e in listing["entries"]}
    assert set(models.names()) | set(models.mixer_kinds()) == names
    assert all(e["parameters"] > 0 for e in listing["entries"] if e["kind"] == "model")


def test_choices_mirror_their_source() -> None:
    preset = next(p for p in cli.commands["models"].params if p.name == "preset")
    assert list(preset.type.choices) == list(models.PRESETS)
    assert STATUSES == RESULT_STATUSES


def test_fail_on_turns_statuses_into_exit_1(tmp_path: Path) -> None:
    args = ["run", "smoke", "--only", "gru", "--max-memory", "1", "--tracking-uri", "none",
            "--out", str(tmp_path)]
    assert tvr(*args).exit_code == 0  # every point skipped: a finished sweep
    failing = tvr(*args, "--no-resume", "--fail-on", "error,skipped")
    assert failing.exit_code == 1
    assert "failing: 2 skipped (--fail-on error,skipped)" in failing.output
    bad = tvr(*args, "--fail-on", "nope")
    assert bad.exit_code == 2 and "'nope' is not a status" in bad.output


def test_ui_refuses_a_missing_store_without_creating_folders(tmp_path: Path) -> None:
    result = tvr("ui", "--out", str(tmp_path / "new" / "dir"))
    assert result.exit_code == 2 and "no MLflow store" in result.output
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("command", ["run", "bench", "table", "plot", "compare", "sync", "ui"])
def test_main_commands_show_examples(command: str) -> None:
    assert "Example" in tvr(command, "--help").output
