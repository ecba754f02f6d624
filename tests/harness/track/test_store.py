"""Tracking-URI checks: precedence, schemes, servers, databases, sqlite paths."""

from __future__ import annotations

import http.server
import importlib.util
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.track import sqlitefile, store
from harness.track.store import resolve_tracking_uri
from harness.track.ui import ui_command


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_resolve_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = store.sqlite_uri(tmp_path / "mlflow.db")
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
        store.sqlite_uri(tmp_path / "rel.db")


@pytest.mark.parametrize("name", ["a%20b", "q?x=1", "with space", "hash#1"])
def test_default_store_stays_inside_any_out_folder(tmp_path: Path, name: str) -> None:
    """SQLAlchemy decodes %XX and splits at "?": the default URI is encoded so that the
    store is <out>/mlflow.db whatever the folder is called."""
    out = tmp_path / name
    uri = resolve_tracking_uri(out, None)
    assert store.sqlite_path(uri) == (out / "mlflow.db").resolve()
    from sqlalchemy.engine import make_url
    assert make_url(uri).database == str((out / "mlflow.db").resolve())


@pytest.mark.parametrize("uri", ["sqlite://", "sqlite:///:memory:"])
def test_in_memory_store_is_refused(tmp_path: Path, uri: str) -> None:
    with pytest.raises(BadInput, match="in-memory store"):
        resolve_tracking_uri(tmp_path, uri)


@pytest.mark.parametrize(("uri", "match"), [
    ("ftp://example.org/store", "unknown tracking URI scheme 'ftp'"),
    ("./mlruns", "file store"),
    ("file:///tmp/mlruns", "file store"),
    ("http://[::1:5000", "malformed"),
    ("http://127.0.0.1:abc", "malformed"),
    ("postgresql+nosuch://127.0.0.1/db", "unknown database driver 'postgresql.nosuch'"),
])
def test_resolve_rejects_bad_schemes(tmp_path: Path, uri: str, match: str) -> None:
    with pytest.raises(BadInput, match=match):
        resolve_tracking_uri(tmp_path, uri)


def test_unreachable_server_is_a_problem_not_bad_input(tmp_path: Path) -> None:
    """A server that does not answer turns tracking off (the CSV needs no MLflow); with
    credentials in the URI, the probe still goes to the right host and the password never
    shows."""
    port = _closed_port()
    uri = f"http://127.0.0.1:{port}"
    assert resolve_tracking_uri(tmp_path, uri) == uri
    assert f"{uri} is unreachable" in store.problem(uri)
    secret = f"http://alice:s3cret@127.0.0.1:{port}"
    reason = store.problem(secret)
    assert f"http://alice:***@127.0.0.1:{port} is unreachable" in reason
    assert "s3cret" not in reason and "Connection refused" in reason


def test_resolve_accepts_answering_server(tmp_path: Path) -> None:
    """Any HTTP answer (here a 404) means the server is up."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    uri = f"http://127.0.0.1:{server.server_port}"
    try:
        assert resolve_tracking_uri(tmp_path, uri) == uri and store.problem(uri) is None
    finally:
        thread.join(timeout=5)
        server.server_close()


@pytest.mark.parametrize("scheme", ["postgresql", "mysql+pymysql", "mssql"])
def test_unreachable_database_is_a_problem(tmp_path: Path, scheme: str) -> None:
    port = _closed_port()
    t0 = time.monotonic()
    reason = store.problem(f"{scheme}://user:secret@127.0.0.1:{port}/db")
    assert f"127.0.0.1:{port}/db is unreachable" in reason
    assert time.monotonic() - t0 < store.PROBE_TIMEOUT_S + 1
    assert "secret" not in reason


@pytest.mark.skipif(importlib.util.find_spec("psycopg") is not None,
                    reason="the PostgreSQL driver is installed here")
def test_database_without_driver_is_a_problem(tmp_path: Path, busy_port: int) -> None:
    """The host answers (a listening socket) but the driver MLflow needs is missing."""
    uri = f"postgresql://user:secret@127.0.0.1:{busy_port}/db"
    reason = store.problem(uri)
    assert "driver psycopg is not installed; pip install 'psycopg[binary]'" in reason
    assert f"postgresql://user:***@127.0.0.1:{busy_port}/db" in reason


@pytest.mark.parametrize("uri", ["databricks", "Databricks", "databricks://my-profile"])
def test_resolve_accepts_databricks(tmp_path: Path, uri: str) -> None:
    assert resolve_tracking_uri(tmp_path, uri) == uri
    with pytest.raises(BadInput, match="server already"):
        ui_command(uri, tmp_path, 5123)


def test_resolve_rejects_unwritable_sqlite(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    with pytest.raises(BadInput, match="is not a directory"):
        resolve_tracking_uri(tmp_path, f"sqlite:///{tmp_path}/a_file/sub/mlflow.db")


def _sqlite_with(path: Path, *tables: str) -> None:
    con = sqlite3.connect(path)
    for table in tables:
        con.execute(f"CREATE TABLE {table} (x)")
    con.commit()
    con.close()


@pytest.mark.slow
def test_sqlite_problems_are_named_in_one_line(tmp_path: Path) -> None:
    """A folder, a foreign file, a half-built store (an interrupted first run's leftover
    Alembic tables), a corrupt one and a locked one each get their own reason, quickly."""
    assert sqlitefile.sqlite_problem(tmp_path / "missing.db") is None
    (tmp_path / "dir.db").mkdir()
    assert "is a folder" in sqlitefile.sqlite_problem(tmp_path / "dir.db")
    (tmp_path / "text.db").write_text("hello")
    assert "not an SQLite database" in sqlitefile.sqlite_problem(tmp_path / "text.db")
    _sqlite_with(tmp_path / "half.db", "experiments", "_alembic_tmp_runs")
    reason = sqlitefile.sqlite_problem(tmp_path / "half.db")
    assert "half-built" in reason and "tvr doctor --repair" in reason
    _sqlite_with(tmp_path / "nover.db", "experiments")
    assert "half-built" in sqlitefile.sqlite_problem(tmp_path / "nover.db")
    _sqlite_with(tmp_path / "ok.db", "alembic_version", "experiments")
    assert sqlitefile.sqlite_problem(tmp_path / "ok.db") is None
    data = (tmp_path / "ok.db").read_bytes()
    (tmp_path / "bad.db").write_bytes(data[:100] + b"\xff" * (len(data) - 100))
    assert "corrupt" in sqlitefile.sqlite_problem(tmp_path / "bad.db") or \
        "cannot be read" in sqlitefile.sqlite_problem(tmp_path / "bad.db")
    holder = sqlite3.connect(tmp_path / "ok.db")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        assert "locked by another process" in sqlitefile.sqlite_problem(tmp_path / "ok.db")
        assert time.monotonic() - t0 < sqlitefile.LOCKED_WAIT_S + 2
    finally:
        holder.rollback()
        holder.close()


@pytest.mark.parametrize("uri, plain, user, password", [
    ("http://alice:s3cret@127.0.0.1:5000", "http://127.0.0.1:5000", "alice", "s3cret"),
    ("https://bob:p%40ss@host/mlflow", "https://host/mlflow", "bob", "p@ss"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000", None, None),
    ("sqlite:///tmp/x.db", "sqlite:///tmp/x.db", None, None),
])
def test_server_credentials_leave_the_uri(uri: str, plain: str, user: str | None,
                                          password: str | None) -> None:
    """MLflow reads a server's credentials from its environment; the URI it gets (and may
    print) has none."""
    assert store.without_credentials(uri) == (plain, user, password)


def _schema(db: Path) -> tuple[list, str]:
    with sqlite3.connect(db) as con:
        tables = con.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        head = con.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    con.close()
    return tables, head


@pytest.mark.slow
def test_new_stores_start_as_a_copy_of_the_first_one_built(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The first store per MLflow version is built by MLflow's migrations and kept as the
    template; later stores copy it, and MLflow opens and writes them as its own."""
    from mlflow import MlflowClient

    from harness.track.client import build_schema
    from harness.track.sqlitefile import create_sqlite

    template = tmp_path / "cache" / "empty.db"
    monkeypatch.setenv("TVR_STORE_TEMPLATE", str(template))
    create_sqlite(tmp_path / "a" / "mlflow.db", build_schema)
    assert template.is_file() and _schema(template) == _schema(tmp_path / "a" / "mlflow.db")
    copied = tmp_path / "b" / "mlflow.db"
    create_sqlite(copied, build_schema)
    assert copied.read_bytes() == template.read_bytes()
    client = MlflowClient(store.sqlite_uri(copied))
    assert client.get_experiment("0").lifecycle_stage == "deleted"  # Default stays hidden
    run = client.create_run(client.create_experiment("smoke")).info.run_id
    client.log_metric(run, "ms", 1.5)
    assert client.get_run(run).data.metrics == {"ms": 1.5}
    assert template.read_bytes() != copied.read_bytes()  # the template stays empty


@pytest.mark.parametrize(("uri", "whole"), [("sqlite:///x.db", True),
                                            ("postgresql://u@127.0.0.1/db", True),
                                            ("http://127.0.0.1:5000", False)])
def test_a_stop_waits_for_a_database_write_and_not_for_a_server(uri: str, whole: bool) -> None:
    """A database this process writes itself is not left mid-transaction; a server's writes
    are its own, and the stop is raised at once rather than after its timeouts."""
    import signal

    from harness import signals

    class Writer:
        def __init__(self) -> None:
            self.uri, self.done = uri, False

        @store.store_write
        def write(self) -> None:
            signal.raise_signal(signal.SIGTERM)
            self.done = True

    writer = Writer()
    with signals.stop_on_signals(), pytest.raises(signals.Stopped):
        writer.write()
    assert writer.done is whole
