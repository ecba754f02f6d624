"""Fault injection on real processes: kill -9 at random moments (store creation included),
SIGTERM, a locked, a corrupt and a half-built store, a full disk, two writers at once.
Whatever happens, rows already written stay, no row is half-written or doubled, the store
keeps working (or says in one line how to repair it), and a rerun completes the suite."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import time
from multiprocessing import get_context
from pathlib import Path

import pytest
from mlflow import MlflowClient

import experiments
from harness.results import read_results, results_path
from harness.track.store import sqlite_uri
from tests import prestart
from tests.harness.run.appender import append_many
from tests.prestart import Process

pytestmark = pytest.mark.slow  # real processes, each a smoke run or more

SUITE = "smoke"
POINTS = {p.point_id for p in experiments.points(SUITE)}
FAST = ["--min-run-time", "0.01", "--device", "cpu"]


def tvr(out: Path, *args: str) -> Process:
    """A real `tvr` process (forked from a pre-imported one: tests/prestart.py)."""
    return prestart.tvr(out, *args, machine="faults")


def finish(proc: Process, timeout: float = 240) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def assert_intact(out: Path) -> set[str]:
    """The CSV parses, every row is whole and appears once; returns the point ids."""
    path = results_path(out, SUITE)
    if not path.exists():
        return set()
    rows = read_results(path)
    assert not rows.duplicated(["point_id", "device", "machine"]).any()
    assert rows["status"].isin(["ok"]).all(), rows["message"].tolist()
    assert set(rows["point_id"]) <= POINTS
    return set(rows["point_id"])


def children(out: Path) -> list:
    client = MlflowClient(sqlite_uri(out / "mlflow.db"))
    exp = client.get_experiment_by_name(SUITE)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


@pytest.mark.parametrize("seed", range(3))
def test_kill_9_at_a_random_moment_loses_nothing_written(tmp_path: Path, seed: int) -> None:
    """The first run is killed at a random moment (starting, measuring, logging); the rerun
    measures exactly the missing points, logs the ones written but not yet logged, and marks
    the killed parent run KILLED. (A kill while the store is built, now a copy of a few
    milliseconds, has its own test in test_recovery.py.)"""
    rng = random.Random(seed)
    proc = tvr(tmp_path, "run", SUITE, *FAST)
    time.sleep(rng.uniform(0.1, 5.0))  # a smoke run takes about 4-6 s from its fork
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = assert_intact(tmp_path)
    # on a fast machine the kill may come after the sweep ended its parent run (then that
    # run is FINISHED), or after it logged every point: then the rerun, with nothing to
    # measure or log, leaves no parent run of its own
    runs = children(tmp_path) if (tmp_path / "mlflow.db").exists() else []
    ended = any(r.info.status == "FINISHED" for r in runs
                if "mlflow.parentRunId" not in r.data.tags)
    logged = {r.data.tags.get("point_id") for r in runs if r.info.status == "FINISHED"}
    idle = before == POINTS and POINTS <= logged
    code, text = finish(tvr(tmp_path, "run", SUITE, *FAST))
    assert code == 0 and "Traceback" not in text, text
    # no warning but the busy machine's (a shared CI machine may be busy; that is no fault)
    assert not [x for x in text.splitlines() if "warning" in x and "busy machine" not in x], text
    assert f"{len(before)} already done" in text or not before
    assert assert_intact(tmp_path) == POINTS
    runs = children(tmp_path)
    kids = [r for r in runs if "point_id" in r.data.tags]
    assert sorted(r.data.tags["point_id"] for r in kids) == sorted(POINTS)
    # a child the kill cut before its point_id tag (its point logged again) is closed too
    assert all(r.info.status != "RUNNING" for r in runs)
    parents = [r.info.status for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert "RUNNING" not in parents and parents.count("FINISHED") == int(ended or not idle)
    assert not list(tmp_path.glob(".mlflow.db.*building*"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stop_signal_drops_the_point_in_flight_and_marks_the_run_killed(
        tmp_path: Path, signum: int) -> None:
    proc = tvr(tmp_path, "run", SUITE, *FAST)
    deadline = time.monotonic() + 60
    while not results_path(tmp_path, SUITE).exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # stop it mid-sweep: after the first row
    proc.send_signal(signum)
    code, text = finish(proc)
    assert code == 128 + signum, text
    stopped = [line for line in text.splitlines() if line.startswith("stopped by")]
    assert len(stopped) == 1 and "Traceback" not in text, text
    written = assert_intact(tmp_path)
    assert 1 <= len(written) < len(POINTS)
    parents = [r for r in children(tmp_path) if "mlflow.parentRunId" not in r.data.tags]
    assert [r.info.status for r in parents] == ["KILLED"]


def test_locked_store_costs_one_warning_and_sync_logs_the_rows_later(tmp_path: Path) -> None:
    code, _ = finish(tvr(tmp_path, "run", SUITE, "--only", "lstm", *FAST))
    assert code == 0
    holder = sqlite3.connect(tmp_path / "mlflow.db")
    holder.execute("BEGIN EXCLUSIVE")  # another writer holds the store
    try:
        t0 = time.monotonic()
        code, text = finish(tvr(tmp_path, "run", SUITE, "--only", "gru", *FAST))
        assert time.monotonic() - t0 < 60
    finally:
        holder.rollback()
        holder.close()
    assert code == 0 and "Traceback" not in text, text
    warnings = [line for line in text.splitlines() if "tracking off" in line]
    assert len(warnings) == 1 and "locked" in warnings[0] and "tvr sync smoke" in warnings[0]
    assert "tvr ui" not in text
    assert len(assert_intact(tmp_path)) == 4
    code, text = finish(tvr(tmp_path, "sync", SUITE))
    assert code == 0 and "2 rows logged" in text, text
    kids = [r for r in children(tmp_path) if "mlflow.parentRunId" in r.data.tags]
    assert len(kids) == 4


@pytest.mark.parametrize("damage", ["garbage", "half-built", "folder"])
def test_broken_store_is_one_line_and_doctor_repairs_it(tmp_path: Path, damage: str) -> None:
    code, _ = finish(tvr(tmp_path, "run", SUITE, "--only", "lstm", *FAST))
    assert code == 0
    db = tmp_path / "mlflow.db"
    if damage == "garbage":
        db.write_bytes(b"not a database at all" * 100)
    elif damage == "half-built":
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE _alembic_tmp_runs (x)")
        con.commit()
        con.close()
    else:
        db.unlink()
        db.mkdir()
    t0 = time.monotonic()
    code, text = finish(tvr(tmp_path, "run", SUITE, "--only", "gru", *FAST))
    assert time.monotonic() - t0 < 60
    assert code == 0 and "Traceback" not in text, text
    warnings = [line for line in text.splitlines() if "tracking off" in line]
    assert len(warnings) == 1, text
    assert len(assert_intact(tmp_path)) == 4
    assert "tvr doctor --repair" in warnings[0]  # a folder too: renaming it loses nothing
    code, text = finish(tvr(tmp_path, "doctor", "--repair"))
    assert code == 0 and "moved the broken store" in text and "smoke: 4 rows logged" in text
    assert list(tmp_path.glob("mlflow.db.broken-*"))
    kids = [r for r in children(tmp_path) if "mlflow.parentRunId" in r.data.tags]
    assert len(kids) == 4
    code, text = finish(tvr(tmp_path, "doctor"))
    assert code == 0 and text.strip().endswith(": ok"), text


def test_doctor_leaves_a_store_in_use_alone(tmp_path: Path) -> None:
    code, _ = finish(tvr(tmp_path, "run", SUITE, "--only", "lstm", *FAST))
    assert code == 0
    holder = sqlite3.connect(tmp_path / "mlflow.db")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, text = finish(tvr(tmp_path, "doctor", "--repair"))
    finally:
        holder.rollback()
        holder.close()
    assert code == 1 and "locked by another process" in text, text
    assert not list(tmp_path.glob("mlflow.db.broken-*"))


def test_full_disk_is_one_line_and_keeps_what_was_written(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        (disk / "ballast").write_bytes(b"\0" * 480_000)  # leaves room for a few rows only
        code, text = finish(tvr(disk, "run", SUITE, "--tracking-uri", "none", *FAST))
        assert code in (0, 1) and "Traceback" not in text, text
        if code == 1:
            errors = [line for line in text.splitlines() if "cannot write the results" in line]
            assert len(errors) == 1, text
        written = assert_intact(disk)
        (disk / "ballast").unlink()  # room again: the rerun completes the suite
        code, text = finish(tvr(disk, "run", SUITE, "--tracking-uri", "none", *FAST))
        assert code == 0, text
        assert assert_intact(disk) == POINTS and written <= POINTS
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_two_processes_appending_lose_no_row(tmp_path: Path) -> None:
    path = results_path(tmp_path, SUITE)
    ctx = get_context("spawn")
    procs = [ctx.Process(target=append_many, args=(str(path), SUITE, who, 150)) for who in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    rows = read_results(path)
    assert len(rows) == 300 and rows["point_id"].is_unique


def test_two_sweeps_on_one_folder_share_the_work(tmp_path: Path) -> None:
    """Two runs of the same suite at once: every point ends with one row, none twice."""
    first = tvr(tmp_path, "run", SUITE, *FAST)
    time.sleep(2.0)
    second = tvr(tmp_path, "run", SUITE, *FAST)
    for proc in (first, second):
        code, text = finish(proc)
        assert code == 0 and "Traceback" not in text, text
    assert assert_intact(tmp_path) == POINTS
    assert len(read_results(results_path(tmp_path, SUITE))) == len(POINTS)
