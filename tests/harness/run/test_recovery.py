"""What a killed writer leaves is recovered, not removed; sweeps sharing a folder share its
points. Real processes on a real MLflow SQLite store."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from harness.track import store
from harness.track.client import build_schema
from harness.track.sqlitefile import create_sqlite, leftovers
from tests import prestart
from tests.prestart import Process

pytestmark = pytest.mark.slow  # real processes on a real store

SIX = """name = "six"
[[grid]]
measure = "path"
mixers = ["lstm", "gru", "self-attention"]
seq_len = [4, 8]
d_model = [8]
batch_size = 1
"""


def tvr(out: Path, *args: str) -> Process:
    """A real `tvr` process (forked from a pre-imported one: tests/prestart.py)."""
    return prestart.tvr(out, *args, machine="recovery")


# A writer inside a transaction bigger than its page cache: SQLite writes pages into the
# database file before the commit, so a kill leaves a hot journal and a half-written file.
WRITER = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA cache_size=2")
con.execute("BEGIN IMMEDIATE")
for i in range(500):
    con.execute("INSERT INTO experiment_tags VALUES ('k' || ?, ?, '1')", (i, "x" * 4000))
print("inside", flush=True)
time.sleep(60)
"""


def test_a_writer_killed_inside_a_transaction_is_rolled_back_in_place(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    create_sqlite(db, build_schema)
    uri = store.sqlite_uri(db)
    client = MlflowClient(uri)
    experiment = client.create_experiment("history")
    run = client.create_run(experiment).info.run_id
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE,
                              text=True)
    assert writer.stdout.readline().strip() == "inside"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    assert leftovers(db) and "hot journal" in leftovers(db)[0]
    t0 = time.monotonic()
    done = tvr(tmp_path, "doctor")
    text, _ = done.communicate(timeout=60)
    assert done.returncode == 0, text
    lines = text.strip().splitlines()
    assert lines[0].startswith("found mlflow.db-journal: a hot journal"), text
    assert lines[-1].endswith("ok; recovered in place, no run lost"), text
    assert time.monotonic() - t0 < 30
    assert not leftovers(db) and store.problem(uri) is None
    assert not list(tmp_path.glob("mlflow.db.broken-*"))  # nothing moved aside
    assert client.get_run(run).info.run_id == run  # the history is all there
    con = sqlite3.connect(db)
    try:  # and the killed transaction is not
        assert con.execute("SELECT count(*) FROM experiment_tags WHERE key LIKE 'k%'"
                           ).fetchone() == (0,)
    finally:
        con.close()


def test_three_sweeps_on_one_folder_measure_and_log_each_point_once(tmp_path: Path) -> None:
    suite = tmp_path / "six.toml"
    suite.write_text(SIX)
    out = tmp_path / "out"
    sweeps = [tvr(out, "run", "--suite-file", str(suite), "--device", "cpu") for _ in range(3)]
    texts = [p.communicate(timeout=240)[0] for p in sweeps]
    said = "\n".join(f"--- sweep {i}, exit {p.returncode}:\n{t}" for i, (p, t)
                     in enumerate(zip(sweeps, texts, strict=True)))  # whole, not cut short
    assert [p.returncode for p in sweeps] == [0, 0, 0], said
    assert not any("Traceback" in t or "warning" in t for t in texts), said
    # "six: 2 ok; 4 measured by another sweep on this folder in ..." or "six: nothing run"
    measured = sum(int(n) for t in texts for n in re.findall(r"^six: (\d+) ok", t, re.M))
    assert measured == 6, said
    client = MlflowClient(store.sqlite_uri(out / "mlflow.db"))
    experiment = client.get_experiment_by_name("six").experiment_id
    runs = client.search_runs([experiment], max_results=1000)
    points = Counter(r.data.tags["point_id"] for r in runs if "point_id" in r.data.tags)
    assert len(points) == 6 and set(points.values()) == {1}, points
    parents = [r.info.status for r in runs if "mlflow.parentRunId" not in r.data.tags]
    # a sweep that found every point measured and logged by the others leaves no parent run
    # (harness.run.sweep._finish); each that measured or logged one has its own, finished
    working = sum(bool(re.search(r"^six: \d+ ok|logged to MLflow", t, re.M)) for t in texts)
    assert working >= 1 and parents == ["FINISHED"] * working, said
    assert not (out / "six" / ".claims").exists()  # every claim released, the folder gone


def test_a_claim_holds_while_its_owner_lives_and_expires_with_it(tmp_path: Path) -> None:
    """Another live sweep's claim keeps this one off the point (and off logging its row); a
    killed owner's claim is taken over."""
    import pandas as pd

    from harness.run.point_locks import Claims, claim_or_skip

    results = tmp_path / "s" / "results.csv"
    owner = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from harness.run.point_locks import Claims, claim_or_skip
c = Claims({str(results)!r}, "cpu", "m")
print(claim_or_skip(c, "p", True), flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "None"  # claimed by the owner
        mine = Claims(results, "cpu", "m")
        assert claim_or_skip(mine, "p", True) == "elsewhere"
        rows = pd.DataFrame({"point_id": ["p", "q"]})
        assert list(mine.unclaimed(rows)["point_id"]) == ["q"]  # p is the owner's to log
    finally:
        owner.kill()
        owner.wait(timeout=10)
    assert claim_or_skip(mine, "p", True) is None  # expired with its owner: taken over
    assert mine.holder("p")["pid"] == os.getpid()
    mine.release_all()
    assert mine.holder("p") is None


# A first run killed while it builds its store: MLflow's migrations for the template, the copy
# of the template for a later store (a kill -9 runs no `finally`, so nothing cleans up).
BUILDER = """
import os, sys
from pathlib import Path
from harness.track.client import build_schema
from harness.track.sqlitefile import create_sqlite

def build(tmp):
    if sys.argv[2] == "copy":
        build_schema(tmp)  # the template's copy, then killed before it replaces the store
    else:
        tmp.write_bytes(b"SQLite format 3\\x00" + b"\\x00" * 4000)  # migrations cut short
    os.kill(os.getpid(), 9)

create_sqlite(Path(sys.argv[1]), build)
"""


@pytest.mark.parametrize("stage", ["migrations", "copy"])
def test_a_first_run_killed_while_building_its_store_leaves_none(tmp_path: Path,
                                                                  stage: str) -> None:
    db = tmp_path / "out" / "mlflow.db"
    create_sqlite(tmp_path / "template-maker" / "mlflow.db", build_schema)  # the template
    killed = subprocess.run([sys.executable, "-c", BUILDER, str(db), stage])
    assert killed.returncode == -signal.SIGKILL
    assert not db.exists() and list(db.parent.glob(".mlflow.db.*.building"))
    create_sqlite(db, build_schema)  # the next run: the leftover removed, the store built
    assert not list(db.parent.glob(".mlflow.db.*.building"))
    client = MlflowClient(store.sqlite_uri(db))
    assert client.search_experiments() == []
    client.create_experiment("after")
