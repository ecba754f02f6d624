"""Suite names: an old name still runs, under today's name, with one line saying so."""

from click.testing import CliRunner

import experiments
from harness.cli import cli


def test_an_old_suite_name_is_todays_with_one_line_on_stderr(capsys):
    assert experiments.current_name("threads") == "threads"
    assert capsys.readouterr().err == ""
    assert experiments.current_name("parallel") == "threads"
    assert capsys.readouterr().err == "tvr: warning: suite 'parallel' is now 'threads'\n"


def test_every_old_name_points_at_a_suite():
    assert set(experiments.RENAMED.values()) <= set(experiments.suite_names())
    assert not set(experiments.RENAMED) & set(experiments.suite_names())


def test_tvr_run_takes_the_old_name(tmp_path):
    result = CliRunner().invoke(cli, ["run", "parallel", "--dry-run", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("\n") == 1 and "is now 'threads'" in result.stderr
    lines = result.stdout.splitlines()
    assert {p.point_id for p in experiments.points("threads")} <= set(lines)
