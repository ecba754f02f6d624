"""One line means one line: libraries' own log lines go to the suite's errors.log, a warning
is its own line above the progress bar, a damaged store is one line, and a run whose store
failed keeps its own status in MLflow once `tvr sync` catches up."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from mlflow import MlflowClient

import experiments
from harness.run import point, sweep
from harness.runner import Result
from harness.track import store

SUITE = "oneline"


def _uri(out: Path) -> str:
    return store.sqlite_uri(out / "mlflow.db")


def _chatty_point(point, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
    """A point during which MLflow, SQLAlchemy and Python all speak up, several lines each."""
    logging.getLogger("mlflow.store.db.utils").error("connection lost\nline 2\nline 3\nline 4")
    logging.getLogger("sqlalchemy.pool").error("pool error\nwith a second line")
    warnings.warn("a library's note\nspanning two lines", UserWarning, stacklevel=1)
    return Result({"fwd_ms": 1.0}), None


def test_library_lines_go_to_errors_log_and_warnings_above_the_bar(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    tmp_path = out_dir  # the module's store: building one costs seconds
    points = experiments.points("smoke")[:3]
    monkeypatch.setattr(point, "run_point", _chatty_point)
    with warnings.catch_warnings():  # as outside pytest: warnings are shown, not recorded
        warnings.simplefilter("always")
        summary = sweep.run_suite(SUITE, points, torch.device("cpu"), tmp_path,
                                  _uri(tmp_path), resume=False, progress=True)
    assert summary.statuses["ok"] == 3
    err = capsys.readouterr().err
    for text in ("line 2", "pool error", "spanning two lines", "connection lost"):
        assert text not in err, err
    shown = [line.split("\r")[-1] for line in err.split("\n") if "a library's note" in line]
    assert len(shown) == 3, err  # one per point, each on its own line (after the bar's \r)
    assert all(s.startswith("warning: UserWarning: a library's note") for s in shown), shown
    log = (tmp_path / SUITE / "errors.log").read_text()
    for text in ("connection lost", "line 4", "pool error", "spanning two lines"):
        assert text in log
    for name in ("mlflow", "sqlalchemy"):  # the sweep gave the loggers back
        assert not any(str(getattr(h, "baseFilename", "")).endswith("errors.log")
                       for h in logging.getLogger(name).handlers)


def test_a_corrupt_store_is_one_line_naming_the_first_damage(out_dir: Path,
                                                            tmp_path: Path) -> None:
    from harness.track.client import build_schema
    from harness.track.sqlitefile import create_sqlite

    create_sqlite(out_dir / "mlflow.db", build_schema)
    db = tmp_path / "mlflow.db"
    shutil.copy(out_dir / "mlflow.db", db)
    size = db.stat().st_size
    with open(db, "r+b") as f:  # a corrupt tail: the last pages overwritten
        f.seek(size // 2)
        f.write(b"\x5a" * (size - size // 2))
    reason = store.problem(_uri(tmp_path))
    assert reason is not None and len(reason.splitlines()) == 1
    assert "is corrupt (" in reason and "*** in database" not in reason, reason


# A run whose store goes away for good mid-run: it ends normally, tracking off, its parent
# still RUNNING in the store (it could not be told).
OUTAGE = """
import sys
from pathlib import Path
from mlflow.exceptions import MlflowException
from harness.results import append_row
from harness.track.tracker import Tracker

out, uri = Path(sys.argv[1]), sys.argv[2]
row = {"suite": "outage", "point_id": "a", "status": "ok", "device": "cpu",
       "machine": "outage"}
with Tracker(uri, "outage", out) as tracker:
    append_row(out / "outage" / "results.csv", row)
    def down(*args, **kwargs):
        raise MlflowException("the store went away")
    tracker._client.log_batch = down
    tracker._client.set_terminated = down
    tracker.log_point("a", {}, {"m": 1.0}, "ok", machine="outage", device="cpu")
print("ended", tracker.error is not None)
"""


@pytest.mark.slow
def test_after_an_outage_sync_gives_the_parent_the_runs_own_status(out_dir: Path,
                                                                    tmp_path: Path) -> None:
    from harness.track.client import build_schema
    from harness.track.sqlitefile import create_sqlite

    create_sqlite(out_dir / "mlflow.db", build_schema)
    shutil.copy(out_dir / "mlflow.db", tmp_path / "mlflow.db")  # a store of its own, fast
    uri = _uri(tmp_path)
    done = subprocess.run([sys.executable, "-c", OUTAGE, str(tmp_path), uri],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TVR_MACHINE": "outage"})
    assert done.returncode == 0 and "ended True" in done.stdout, done.stderr
    assert done.stderr.count("tracking off for this run") == 1, done.stderr
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("outage").experiment_id
    (parent,) = client.search_runs([experiment])
    assert parent.info.status == "RUNNING"  # the store never heard the end
    from harness.track.sync import sync_suite

    os.environ["TVR_MACHINE"] = "outage"
    try:
        assert sync_suite(tmp_path, "outage", uri) == (1, 1)
    finally:
        del os.environ["TVR_MACHINE"]
    # not KILLED: the run ended by itself, with tracking off (FAILED: it missed points then)
    assert client.get_run(parent.info.run_id).info.status == "FAILED"
