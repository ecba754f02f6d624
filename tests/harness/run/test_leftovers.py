"""A clean end leaves no bookkeeping behind: no empty claims folder, no lock file no one
holds, no empty suite folder after an early error; and removing a lock file keeps the lock
a lock (only a holder removes one, and every taker checks it holds the file at the path)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import experiments
from harness.cli import cli
from harness.files import PathLock, lock_file, locked, remove_lock
from harness.run.point_locks import Claims, tidy

FAST = ["--min-run-time", "0.01", "--tracking-uri", "none"]


@pytest.fixture
def one_point(monkeypatch: pytest.MonkeyPatch) -> None:
    one = [p for p in experiments.points("smoke") if p.subject == "lstm"][:1]
    monkeypatch.setitem(experiments.SUITES, "smoke", lambda: one)


def test_a_clean_run_leaves_its_rows_and_nothing_of_its_bookkeeping(tmp_path: Path,
                                                                    one_point) -> None:
    for _ in range(2):  # measured, then resumed: neither leaves a lock file or claims
        result = CliRunner().invoke(cli, ["run", "smoke", "--out", str(tmp_path), *FAST])
        assert result.exit_code == 0, result.output
        left = sorted(p.name for p in (tmp_path / "smoke").iterdir())
        assert not [n for n in left if n.endswith(".lock") or n == ".claims"], left
        assert "results.csv" in left


def test_the_local_store_leaves_no_lock_file(tmp_path: Path, one_point) -> None:
    """The default store (<out>/mlflow.db) is created, checked and written under its lock;
    the run leaves the store and no `.mlflow.db.lock` beside it."""
    result = CliRunner().invoke(cli, ["run", "smoke", "--out", str(tmp_path),
                                      "--min-run-time", "0.01"])
    assert result.exit_code == 0, result.output
    top = sorted(p.name for p in tmp_path.iterdir())
    assert "mlflow.db" in top and not [n for n in top if n.endswith(".lock")], top


def test_an_early_error_leaves_no_empty_suite_folder(tmp_path: Path, one_point) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has the CUDA device the error needs to be missing")
    result = CliRunner().invoke(cli, ["run", "smoke", "--out", str(tmp_path), "--device",
                                      "cuda", *FAST])
    assert result.exit_code == 2 and "--device cuda" in result.output, result.output
    assert not (tmp_path / "smoke").exists()


def test_an_early_error_keeps_a_suite_folder_it_did_not_make(tmp_path: Path,
                                                            one_point) -> None:
    (tmp_path / "smoke").mkdir()
    CliRunner().invoke(cli, ["run", "smoke", "--out", str(tmp_path), "--device", "cuda",
                             "--executor", "ray", "--ray-address", "127.0.0.1:1", *FAST])
    assert (tmp_path / "smoke").is_dir()


def test_tidy_leaves_what_another_sweep_uses(tmp_path: Path) -> None:
    """A claim another live sweep holds, and a lock another process holds, stay."""
    results = tmp_path / "s" / "results.csv"
    results.parent.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claims = Claims(results, "cpu", "m")
        claims.me = {**claims.me, "pid": other.pid, "started": None}
        with locked(results):
            assert claims.take("p")
        holder = PathLock(lock_file(results.with_name("series.csv")))
        holder.acquire()
        tidy(results)
        assert (results.parent / ".claims").is_dir()  # the other sweep's claim
        assert lock_file(results.with_name("series.csv")).exists()  # held: stays
        assert not lock_file(results).exists()  # free: removed by its taker
        holder.release()
        claims.release("p")
        tidy(results)
        assert sorted(results.parent.iterdir()) == []
    finally:
        other.kill()
        other.wait()


def _count(path: str, rounds: int) -> None:
    """Read, add one, write back, under the lock; remove the lock file now and then."""
    target = Path(path)
    for i in range(rounds):
        with locked(target):
            n = int(target.read_text()) if target.exists() else 0
            target.write_text(str(n + 1))
        if i % 3 == 0:
            remove_lock(lock_file(target))


def test_removing_lock_files_keeps_mutual_exclusion(tmp_path: Path) -> None:
    """Three processes count to 3 x 150 under the lock while each removes the lock file
    whenever it can: a count lost to two holders at once would show."""
    target = tmp_path / "counter"
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    workers = [context.Process(target=_count, args=(str(target), 150)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    assert int(target.read_text()) == 450
