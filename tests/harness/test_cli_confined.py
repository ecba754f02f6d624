"""Every file a command writes lies under --out: a suite named as a path (a plugin's
"../../escaped", an absolute one, `--suite /some/other/folder`) is one line and exit 2,
and nothing is written where it points."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import experiments
from harness.cli import cli


def _one_error(result) -> str:  # noqa: ANN001 -- click's Result
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [x for x in result.output.splitlines() if x.startswith("Error")]
    assert len(errors) == 1, result.output
    return errors[0]


@pytest.mark.parametrize("name", ["../../escaped", "ABSOLUTE", "sub/dir", ".."])
def test_a_plugin_suite_named_as_a_path_writes_nothing_outside_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    out = tmp_path / "a" / "b" / "out"
    name = str(tmp_path / "abs") if name == "ABSOLUTE" else name
    one = [p for p in experiments.points("smoke") if p.subject == "lstm"][:1]
    monkeypatch.setitem(experiments.SUITES, name, lambda: one)
    for dry in ([], ["--dry-run"]):
        result = CliRunner().invoke(cli, ["run", name, "--out", str(out), "--tracking-uri",
                                          "none", "--min-run-time", "0.01", *dry])
        assert "not a folder name under --out" in _one_error(result)
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "abs").exists()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("command", [["report"], ["table"], ["plot", "all"], ["sync"],
                                     ["compare"]])
def test_suite_option_pointing_elsewhere_is_refused(tmp_path: Path, command: list[str]) -> None:
    """`tvr report --suite /some/other/identities` wrote its tables into that folder."""
    elsewhere = tmp_path / "other" / "identities"
    elsewhere.mkdir(parents=True)
    (elsewhere / "results.csv").write_text("suite,point_id,status\nidentities,p,ok\n")
    before = sorted(elsewhere.iterdir())
    target = ["../other/identities", str(elsewhere)]
    for suite in target:
        args = [*command, suite] if command == ["sync"] else [*command, "--suite", suite]
        result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
        assert "not a folder name under --out" in _one_error(result)
    assert sorted(elsewhere.iterdir()) == before
