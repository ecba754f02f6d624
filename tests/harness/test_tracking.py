"""tracking.py against a real MLflow SQLite store, read back with MlflowClient."""

from __future__ import annotations

import http.server
import importlib.util
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

import experiments
from harness.errors import BadInput
from harness.run import sweep, tracking
from harness.run.tracking import Tracker, resolve_tracking_uri, serve_ui, ui_command


@pytest.fixture(autouse=True)
def _no_env_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for the module: creating a SQLite store costs ~1.5 s of migrations."""
    return tmp_path_factory.mktemp("out")


def _uri(out_dir: Path) -> str:
    return f"sqlite:///{out_dir.resolve()}/mlflow.db"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(client: MlflowClient, tracker: Tracker) -> dict[str, object]:
    runs = client.search_runs(
        [tracker.experiment_id], f"tags.`mlflow.parentRunId` = '{tracker.parent_run_id}'")
    return {r.data.tags["point_id"]: r for r in runs}


def test_parent_and_nested_runs(out_dir: Path) -> None:
    uri = _uri(out_dir)
    csv = out_dir / "smoke" / "results.csv"
    csv.parent.mkdir(parents=True, exist_ok=True)
    csv.write_text("suite,point_id\nsmoke,a\n")
    with Tracker(uri, "smoke", out_dir, {"device": "cpu", "resume": True}) as tracker:
        tracker.log_point("a", {"mixer": "lstm", "cfg": {"d_model": 32, "n": {"x": 1}}},
                          {"fwd_ms": 1.25, "flops": 4e9, "bad": float("nan"), "none": None,
                           "inf": math.inf},
                          "ok", series={"loss": [(0, 2.0), (1, 1.5), (2, math.nan), (3, 1.0)]})
        tracker.log_point("b", {"mixer": "gru"}, {}, "error", message="RuntimeError: boom")
        tracker.log_artifact(csv)

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    assert exp is not None and exp.experiment_id == tracker.experiment_id
    assert exp.artifact_location == (out_dir / "mlartifacts" / "smoke").resolve().as_uri()
    parent = client.get_run(tracker.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.info.run_name.startswith("smoke-")
    assert {"suite", "host", "torch_version"} <= set(parent.data.tags)
    assert parent.data.params == {"device": "cpu", "resume": "True"}
    assert [a.path for a in client.list_artifacts(tracker.parent_run_id)] == ["results.csv"]

    kids = _children(client, tracker)
    assert set(kids) == {"a", "b"}
    ok, bad = kids["a"], kids["b"]
    assert ok.info.status == "FINISHED" and ok.data.tags["status"] == "ok"
    assert "message" not in ok.data.tags
    assert ok.data.params == {"mixer": "lstm", "cfg.d_model": "32", "cfg.n.x": "1"}
    assert ok.data.metrics == {"fwd_ms": 1.25, "flops": 4e9, "loss": 1.0}
    history = client.get_metric_history(ok.info.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(0, 2.0), (1, 1.5), (3, 1.0)]
    assert bad.info.status == "FAILED" and bad.data.tags["status"] == "error"
    assert bad.data.tags["message"] == "RuntimeError: boom"


def test_second_invocation_reuses_experiment(out_dir: Path) -> None:
    uri = _uri(out_dir)
    ids = set()
    for _ in range(2):
        with Tracker(uri, "again", out_dir, {}) as tracker:
            ids.add(tracker.experiment_id)
    client = MlflowClient(tracking_uri=uri)
    assert len(ids) == 1
    assert len(client.search_runs(list(ids))) == 2


@pytest.mark.parametrize(("error", "status"), [(RuntimeError, "FAILED"),
                                               (KeyboardInterrupt, "KILLED")])
def test_parent_status_on_exception(out_dir: Path, error: type[BaseException],
                                    status: str) -> None:
    with pytest.raises(error), Tracker(_uri(out_dir), "crash", out_dir, {}) as tracker:
        raise error()
    run = MlflowClient(tracking_uri=_uri(out_dir)).get_run(tracker.parent_run_id)
    assert run.info.status == status


def test_large_point_is_split_within_mlflow_limits(out_dir: Path) -> None:
    params = {f"p{i}": i for i in range(150)}  # > 100 params per request
    series = {"loss": [(s, 1.0 / (s + 1)) for s in range(1500)]}  # > 1000 metrics per request
    with Tracker(_uri(out_dir), "big", out_dir, {}) as tracker:
        tracker.log_point("big", params, {"m": 1.0}, "ok", series=series)
    client = MlflowClient(tracking_uri=_uri(out_dir))
    (child,) = _children(client, tracker).values()
    assert len(child.data.params) == 150
    assert len(client.get_metric_history(child.info.run_id, "loss")) == 1500


def test_non_numeric_metric_is_a_bug(out_dir: Path) -> None:
    with Tracker(_uri(out_dir), "typo", out_dir, {}) as tracker, \
            pytest.raises(TypeError, match="'fwd_ms'"):
        tracker.log_point("a", {}, {"fwd_ms": "fast"}, "ok")


def test_non_numeric_metric_leaves_no_run_and_tracking_on(out_dir: Path) -> None:
    with Tracker(_uri(out_dir), "typo-series", out_dir, {}) as tracker:
        with pytest.raises(TypeError, match="'loss'"):
            tracker.log_point("a", {}, {}, "ok", series={"loss": [(0, "x")]})
        assert tracker.error is None
        tracker.log_point("b", {}, {"m": 1.0}, "ok")
    client = MlflowClient(tracking_uri=_uri(out_dir))
    assert set(_children(client, tracker)) == {"b"}
    assert client.get_run(tracker.parent_run_id).info.status == "FINISHED"


def _locked(calls: list[str], fail_from: int):
    """A MlflowClient.log_batch that fails like a locked SQLite store from call `fail_from` on
    (call 1 is the parent's params)."""
    real = MlflowClient.log_batch

    def log_batch(self: MlflowClient, run_id: str, *args: object, **kwargs: object) -> None:
        calls.append(run_id)
        if len(calls) >= fail_from:
            raise MlflowException("(sqlite3.OperationalError) database is locked\n"
                                  "[SQL: INSERT INTO metrics ...]")
        real(self, run_id, *args, **kwargs)

    return log_batch


def test_store_failure_turns_tracking_off(out_dir: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(MlflowClient, "log_batch", _locked(calls, fail_from=3))
    csv = tmp_path / "results.csv"
    csv.write_text("x\n")
    with Tracker(_uri(out_dir), "locked", out_dir, {}) as tracker:
        tracker.log_point("a", {"p": 1}, {"m": 1.0}, "ok")
        tracker.log_point("b", {"p": 2}, {"m": 2.0}, "ok")  # the store fails here
        assert tracker.error is not None
        tracker.log_point("c", {"p": 3}, {"m": 3.0}, "ok")  # no-ops from here on
        tracker.log_artifact(csv)
        # Bugs in the caller stay loud after the store failed.
        with pytest.raises(TypeError, match="'m'"):
            tracker.log_point("d", {}, {"m": "fast"}, "ok")
        with pytest.raises(FileNotFoundError):
            tracker.log_artifact(tmp_path / "missing.csv")
    assert len(calls) == 3
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "tracking is off" in line]
    assert len(warnings) == 1, err
    assert "MlflowException" in warnings[0] and "database is locked" in warnings[0]
    assert "results CSV is unaffected" in warnings[0]
    client = MlflowClient(tracking_uri=_uri(out_dir))
    kids = _children(client, tracker)
    assert set(kids) == {"a", "b"}
    assert kids["a"].info.status == "FINISHED"
    assert kids["b"].info.status == "FAILED"  # the store still let us close it
    assert client.get_run(tracker.parent_run_id).info.status == "FAILED"
    assert client.list_artifacts(tracker.parent_run_id) == []


def test_store_failure_mid_sweep_keeps_the_sweep(out_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep logs outside its per-point try: the Tracker must absorb the failure."""
    points = experiments.points("smoke")
    assert len(points) >= 3
    monkeypatch.setattr(sweep, "run_point",
                        lambda point, *args, **kwargs: ("ok", "", {"fwd_ms": 1.0}))
    calls: list[str] = []
    monkeypatch.setattr(MlflowClient, "log_batch", _locked(calls, fail_from=3))
    summary = sweep.run_suite("sweep-locked", points, torch.device("cpu"), out_dir,
                              _uri(out_dir), resume=False, progress=False)
    assert summary.statuses["ok"] == len(points)
    assert len(calls) == 3
    rows = (out_dir / "sweep-locked" / "results.csv").read_text().splitlines()
    assert len(rows) == len(points) + 1
    err = capsys.readouterr().err
    assert err.count("tracking is off") == 1, err
    client = MlflowClient(tracking_uri=_uri(out_dir))
    (parent,) = client.search_runs(
        [client.get_experiment_by_name("sweep-locked").experiment_id],
        "attributes.run_name LIKE 'sweep-locked-%'")
    assert parent.info.status == "FAILED"


def test_null_tracker_does_nothing(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("x\n")
    with Tracker(None, "smoke", tmp_path, {"a": 1}) as tracker:
        assert not tracker.enabled
        tracker.log_point("a", {"p": 1}, {"m": 1.0}, "ok", series={"s": [(0, 1.0)]})
        tracker.log_artifact(tmp_path / "r.csv")
    assert tracker.parent_run_id is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


def test_resolve_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert resolve_tracking_uri(tmp_path, None) == default
    env_db = tmp_path / "env" / "e.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{env_db}")
    assert resolve_tracking_uri(tmp_path, None) == f"sqlite:///{env_db}"
    assert resolve_tracking_uri(tmp_path, f"sqlite:///{tmp_path}/x.db") == \
        f"sqlite:///{tmp_path}/x.db"
    assert resolve_tracking_uri(tmp_path, "None") is None
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "NONE")
    assert resolve_tracking_uri(tmp_path, None) is None
    monkeypatch.chdir(tmp_path)  # a relative sqlite path becomes absolute
    assert resolve_tracking_uri(tmp_path, "sqlite:///rel.db") == \
        f"sqlite:///{tmp_path.resolve()}/rel.db"


@pytest.mark.parametrize(("uri", "match"), [
    ("ftp://example.org/store", "unknown tracking URI scheme 'ftp'"),
    ("./mlruns", "file store"),
    ("file:///tmp/mlruns", "file store"),
    ("http://[::1:5000", "malformed"),
])
def test_resolve_rejects_bad_schemes(tmp_path: Path, uri: str, match: str) -> None:
    with pytest.raises(BadInput, match=match):
        resolve_tracking_uri(tmp_path, uri)


def test_resolve_rejects_unreachable_server(tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(BadInput, match=f"{uri} is unreachable"):
        resolve_tracking_uri(tmp_path, uri)


def test_resolve_accepts_answering_server(tmp_path: Path) -> None:
    """Any HTTP answer (here a 404) means the server is up."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    uri = f"http://127.0.0.1:{server.server_port}"
    try:
        assert resolve_tracking_uri(tmp_path, uri) == uri
    finally:
        thread.join(timeout=5)
        server.server_close()


@pytest.mark.parametrize("scheme", ["postgresql", "mysql+pymysql", "mssql"])
def test_resolve_rejects_unreachable_database(tmp_path: Path, scheme: str) -> None:
    port = _closed_port()
    t0 = time.monotonic()
    with pytest.raises(BadInput, match=rf"127\.0\.0\.1:{port}/db is unreachable") as info:
        resolve_tracking_uri(tmp_path, f"{scheme}://user:secret@127.0.0.1:{port}/db")
    assert time.monotonic() - t0 < tracking.PROBE_TIMEOUT_S + 1
    assert "secret" not in str(info.value)


@pytest.mark.skipif(importlib.util.find_spec("psycopg") is not None,
                    reason="the PostgreSQL driver is installed here")
def test_resolve_rejects_database_without_driver(tmp_path: Path, busy_port: int) -> None:
    """The host answers (a listening socket) but the driver MLflow needs is missing."""
    uri = f"postgresql://user:secret@127.0.0.1:{busy_port}/db"
    with pytest.raises(BadInput, match=r"driver psycopg is not installed; "
                       r"pip install 'psycopg\[binary\]'") as info:
        resolve_tracking_uri(tmp_path, uri)
    assert f"postgresql://user:***@127.0.0.1:{busy_port}/db" in str(info.value)


def test_resolve_rejects_unknown_database_driver(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="unknown database driver 'postgresql.nosuch'"):
        resolve_tracking_uri(tmp_path, "postgresql+nosuch://127.0.0.1/db")


@pytest.mark.parametrize("uri", ["databricks", "Databricks", "databricks://my-profile"])
def test_resolve_accepts_databricks(tmp_path: Path, uri: str) -> None:
    assert resolve_tracking_uri(tmp_path, uri) == uri
    with pytest.raises(BadInput, match="server already"):
        ui_command(uri, tmp_path, 5123)


def test_resolve_rejects_unwritable_sqlite(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    with pytest.raises(BadInput, match="is not a directory"):
        resolve_tracking_uri(tmp_path, f"sqlite:///{tmp_path}/a_file/sub/mlflow.db")


def test_ui_command_is_loopback_and_lean(tmp_path: Path) -> None:
    uri = _uri(tmp_path)
    argv, env = ui_command(uri, tmp_path, 5123)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--port") + 1] == "5123"
    assert argv[argv.index("--workers") + 1] == "1"
    assert argv[argv.index("--backend-store-uri") + 1] == uri
    assert argv[argv.index("--default-artifact-root") + 1] == \
        (tmp_path / "mlartifacts").resolve().as_uri()
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    with pytest.raises(BadInput, match="server already"):
        ui_command("http://127.0.0.1:5000", tmp_path, 5123)


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_serve_ui_bad_input(tmp_path: Path, out_dir: Path, busy_port: int) -> None:
    with pytest.raises(BadInput, match="tracking is off"):
        serve_ui(None, tmp_path, 5000)
    with pytest.raises(BadInput, match="tvr run SUITE"):
        serve_ui(_uri(tmp_path), tmp_path, 5000)
    with Tracker(_uri(out_dir), "ui-bad", out_dir, {}):
        pass  # makes sure the store exists whatever the test order
    with pytest.raises(BadInput, match=f"port {busy_port} .* in use"):
        serve_ui(_uri(out_dir), out_dir, busy_port)


def test_ui_really_serves_the_store(out_dir: Path, tmp_path: Path) -> None:
    """Start the real server from ui_command, see our run through it, stop it cleanly."""
    csv = tmp_path / "results.csv"
    csv.write_text("suite,point_id\nui,a\n")
    with Tracker(_uri(out_dir), "ui", out_dir, {}) as tracker:
        tracker.log_artifact(csv)
    port = _closed_port()
    argv, env = ui_command(_uri(out_dir), out_dir, port)
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(base + "/", timeout=2) as page:
                    assert page.status == 200
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert time.monotonic() < deadline, "UI did not answer within 30 s"
                time.sleep(0.25)
        query = "/api/2.0/mlflow/experiments/get-by-name?experiment_name=ui"
        with urllib.request.urlopen(base + query, timeout=5) as reply:
            assert json.load(reply)["experiment"]["experiment_id"] == tracker.experiment_id
        query = f"/get-artifact?path=results.csv&run_uuid={tracker.parent_run_id}"
        with urllib.request.urlopen(base + query, timeout=5) as reply:
            assert reply.read() == csv.read_bytes()
    finally:
        proc.terminate()
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        log.close()
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "server.log"]


def _fake_server(monkeypatch: pytest.MonkeyPatch, script: str) -> list[subprocess.Popen]:
    """Make serve_ui start `python -c script` instead of MLflow; return the started processes."""
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def spy(*args: object, **kwargs: object) -> subprocess.Popen:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(tracking, "ui_command",
                        lambda uri, out, port: ([sys.executable, "-c", script], dict(os.environ)))
    monkeypatch.setattr(tracking.subprocess, "Popen", spy)
    return started


def test_serve_ui_returns_server_exit_code(out_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with Tracker(_uri(out_dir), "ui-code", out_dir, {}):
        pass
    _fake_server(monkeypatch, "raise SystemExit(3)")
    port = _closed_port()
    assert serve_ui(_uri(out_dir), out_dir, port) == 3
    assert f"http://127.0.0.1:{port}" in capsys.readouterr().out


def test_serve_ui_ctrl_c_stops_the_server(out_dir: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with Tracker(_uri(out_dir), "ui-stop", out_dir, {}):
        pass
    # The fake server ignores SIGINT, as if it had missed the terminal's Ctrl-C.
    started = _fake_server(monkeypatch, "import signal, time; "
                           "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)")
    monkeypatch.setattr(tracking, "CTRL_C_GRACE_S", 0.2)
    main = threading.main_thread().ident
    assert main is not None

    def ctrl_c() -> None:
        deadline = time.monotonic() + 20
        while not started and time.monotonic() < deadline:
            time.sleep(0.05)
        if started:  # a stray SIGINT after a failed serve_ui would stop the whole session
            time.sleep(0.5)  # let serve_ui reach proc.wait()
            signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=ctrl_c, daemon=True)
    thread.start()
    t0 = time.monotonic()
    assert serve_ui(_uri(out_dir), out_dir, _closed_port()) == 0
    thread.join(timeout=5)
    (proc,) = started
    assert proc.returncode == -signal.SIGTERM  # stopped by serve_ui, not by its own timer
    assert time.monotonic() - t0 < 15
