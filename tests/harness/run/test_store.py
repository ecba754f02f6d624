"""Tracking-URI checks: precedence, schemes, servers, databases, sqlite paths."""

from __future__ import annotations

import http.server
import importlib.util
import socket
import threading
import time
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.run import store
from harness.run.store import resolve_tracking_uri
from harness.run.ui import ui_command


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    assert time.monotonic() - t0 < store.PROBE_TIMEOUT_S + 1
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
