"""A tracking URI whose server cannot serve as a store is one line and exit 2 before any
work, for `tvr run`, `bench`, `tune` and `sync` alike and whatever the scheme: a service
that answers in another protocol (an SSH banner, garbage) where MLflow's HTTP server should
be, and a database nothing listens for."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli

BANNERS = {"ssh": b"SSH-2.0-OpenSSH_9.6\r\n", "garbage": b"\x00\xff\x13garbage\x07\r\n\r\n"}


@pytest.fixture(scope="module")
def foreign() -> Iterator[dict[str, int]]:
    """A TCP server per banner: it accepts, sends its banner, and closes."""
    servers, ports, done = [], {}, threading.Event()
    for name, banner in BANNERS.items():
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.settimeout(0.2)
        servers.append(server)
        ports[name] = server.getsockname()[1]

        def serve(server: socket.socket = server, banner: bytes = banner) -> None:
            while not done.is_set():
                try:
                    conn, _ = server.accept()
                except OSError:  # the timeout: look at `done` again
                    continue
                with conn:
                    conn.sendall(banner)
                    time.sleep(0.05)

        threading.Thread(target=serve, daemon=True).start()
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        ports["closed"] = closed.getsockname()[1]
    yield ports
    done.set()
    for server in servers:
        server.close()


def _commands(out: Path) -> dict[str, list[str]]:
    (out / "smoke").mkdir(parents=True, exist_ok=True)
    (out / "smoke" / "results.csv").write_text("suite,point_id,status\nsmoke,p,ok\n")
    return {"run": ["run", "smoke", "--only", "lstm", "--min-run-time", "0.01"],
            "bench": ["bench", "--tiny"], "tune": ["tune", "translation-cpu-tune"],
            "sync": ["sync", "smoke"]}


@pytest.mark.parametrize("command", ["run", "bench", "tune", "sync"])
@pytest.mark.parametrize("service", ["ssh", "garbage"])
def test_a_server_that_does_not_speak_http_is_one_line(tmp_path: Path, foreign: dict[str, int],
                                                      command: str, service: str) -> None:
    """It once crashed each command with http.client.BadStatusLine's traceback."""
    out = tmp_path / "out"
    args = _commands(out)[command]
    uri = f"http://alice:s3cret@127.0.0.1:{foreign[service]}"
    t0 = time.monotonic()
    result = CliRunner().invoke(cli, [*args, "--out", str(out), "--tracking-uri", uri])
    assert time.monotonic() - t0 < 20
    assert result.exit_code == 2, (result.output, result.exception)
    (line,) = result.output.strip().splitlines()
    assert "answers, but not as an HTTP server" in line and "s3cret" not in line, line
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["results.csv"]


@pytest.mark.parametrize("command", ["run", "bench", "tune", "sync"])
def test_an_unreachable_database_is_refused_as_a_server_is(tmp_path: Path,
                                                          foreign: dict[str, int],
                                                          command: str) -> None:
    """postgresql:// that nothing answers warned and measured on (exit 0) where http://
    exited 2: one rule now, exit 2 with one line, whatever the scheme."""
    out = tmp_path / "out"
    args = _commands(out)[command]
    uri = f"postgresql://alice:s3cret@127.0.0.1:{foreign['closed']}/mlflow"
    result = CliRunner().invoke(cli, [*args, "--out", str(out), "--tracking-uri", uri])
    assert result.exit_code == 2, (result.output, result.exception)
    (line,) = result.output.strip().splitlines()
    assert "is unreachable" in line and "s3cret" not in line, line
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["results.csv"]
