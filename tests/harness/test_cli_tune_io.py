"""`tvr tune` and the disk: a full disk is said as one, not as a damaged study (whose advice,
to move the study aside, would not help); `--summary` only reads."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli

SEARCH = "translation-cpu-tune"


def test_a_study_that_cannot_grow_on_a_full_disk_is_said_to_be_a_full_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite answers a write on a full disk with SQLITE_FULL; Optuna's storage passes it up
    through SQLAlchemy, and the study's opener made it "not a study Optuna can open"."""
    import optuna
    from sqlalchemy.exc import OperationalError

    def full(*args: object, **kwargs: object) -> None:
        raise OperationalError("INSERT INTO studies", {},
                               sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(optuna, "create_study", full)
    result = CliRunner().invoke(cli, ["tune", SEARCH, "--out", str(tmp_path), "--trials", "1",
                                      "--tracking-uri", "none", "--device", "cpu"])
    assert result.exit_code == 1, (result.output, result.exception)
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: the disk is full (database or disk is full)"), line
    assert "move it aside" not in line and "not a study" not in line


def test_a_write_on_a_full_disk_names_the_file(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.run import tune

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.csv"))

    monkeypatch.setattr(tune, "tune_model", full)
    result = CliRunner().invoke(cli, ["tune", SEARCH, "--out", str(tmp_path), "--trials", "1",
                                      "--tracking-uri", "none", "--device", "cpu"])
    assert result.exit_code == 1, (result.output, result.exception)
    (line,) = result.output.strip().splitlines()
    assert f"the disk is full at {tmp_path / 'x.csv'} (No space left on device)" in line


def test_summary_writes_nothing(tmp_path: Path) -> None:
    """It created --out, probed it with a file and wrote search.md: a folder it may only
    read (another user's, a read-only mount) refused a summary of rows it could read."""
    out = tmp_path / "results"
    (out / SEARCH).mkdir(parents=True)
    (out / SEARCH / "results.csv").write_text("suite,point_id,status\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for folder in (out, tmp_path / "missing"):
        result = CliRunner().invoke(cli, ["tune", SEARCH, "--summary", "--out", str(folder)])
        assert result.exit_code == 0, result.output
        assert "| transformer    |        0 |" in result.output  # its trials: none yet
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
