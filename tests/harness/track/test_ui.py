"""`tvr ui`: the command line it runs and a real server on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness import signals
from harness.errors import BadInput
from harness.track import ui
from harness.track.tracker import Tracker
from harness.track.ui import runs_links, serve_ui, ui_command
from tests.prestart import Process


def _uri(out_dir: Path) -> str:
    return f"sqlite:///{out_dir.resolve()}/mlflow.db"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ui_command_is_loopback_and_lean(tmp_path: Path) -> None:
    uri = _uri(tmp_path)
    argv, env = ui_command(uri, tmp_path, 5123)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--port") + 1] == "5123"
    assert argv[argv.index("--workers") + 1] == "1"
    assert env["MLFLOW_BACKEND_STORE_URI"] == uri and uri not in argv  # never on argv (ps)
    assert argv[argv.index("--default-artifact-root") + 1] == \
        (tmp_path / "mlartifacts").resolve().as_uri()
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    with pytest.raises(BadInput, match="server already"):
        ui_command("http://127.0.0.1:5000", tmp_path, 5123)


def test_serve_ui_bad_input(tmp_path: Path, out_dir: Path, busy_port: int) -> None:
    with pytest.raises(BadInput, match="tracking is off"):
        serve_ui(None, tmp_path, 5000)
    with pytest.raises(BadInput, match="tvr run SUITE"):
        serve_ui(_uri(tmp_path), tmp_path, 5000)
    with Tracker(_uri(out_dir), "ui-bad", out_dir, {}):
        pass  # makes sure the store exists whatever the test order
    with pytest.raises(BadInput, match=f"port {busy_port} .* in use"):
        serve_ui(_uri(out_dir), out_dir, busy_port)


@pytest.mark.slow
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
    # the printed link opens the runs table of the model-training view, not GenAI's overview
    links = dict(runs_links(_uri(out_dir), port))
    assert links["ui"] == (f"{base}/#/experiments/{tracker.experiment_id}/runs"
                           "?workflowType=machine_learning")


def _fake_server(monkeypatch: pytest.MonkeyPatch, script: str) -> list[subprocess.Popen]:
    """Make serve_ui start `python -c script` instead of MLflow; return the started processes."""
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def spy(*args: object, **kwargs: object) -> subprocess.Popen:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(ui, "ui_command",
                        lambda uri, out, port: ([sys.executable, "-c", script], dict(os.environ)))
    monkeypatch.setattr(ui.subprocess, "Popen", spy)
    return started


def test_serve_ui_returns_server_exit_code(out_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with Tracker(_uri(out_dir), "ui-code", out_dir, {}):
        pass
    _fake_server(monkeypatch, "raise SystemExit(3)")
    port = _closed_port()
    assert serve_ui(_uri(out_dir), out_dir, port) == 3
    assert f"http://127.0.0.1:{port}" in capsys.readouterr().out


def test_a_signal_ignored_at_start_does_not_stop_the_ui(out_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`nohup tvr ui &`: started ignoring SIGHUP, the UI keeps serving through one (here the
    server sends it, then ends by itself with exit code 5)."""
    with Tracker(_uri(out_dir), "ui-nohup", out_dir, {}):
        pass
    _fake_server(monkeypatch, "import os, signal, time; os.kill(os.getppid(), signal.SIGHUP);"
                              " time.sleep(1); raise SystemExit(5)")
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts `tvr`
    monkeypatch.setattr(signals, "_ignored", {signal.SIGHUP})  # what `tvr` notes first
    try:
        assert serve_ui(_uri(out_dir), out_dir, _closed_port()) == 5
    finally:
        signal.signal(signal.SIGHUP, before)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_no_signal_leaves_the_server_behind(out_dir: Path, tmp_path: Path, sig: int) -> None:
    """`tvr ui` stopped by any signal, SIGKILL included: nothing listens on its port soon
    after (the real MLflow server and its uvicorn worker both gone). The bounds are generous
    (an idle machine takes about a second): on a loaded 2-core machine shutting the server
    down took over 10 s."""
    with Tracker(_uri(out_dir), "ui-signal", out_dir, {}):
        pass
    port = _closed_port()
    log = (tmp_path / "ui.log").open("wb")
    proc = Process(["ui", "--port", str(port), "--out", str(out_dir)], stdout=log,
                   stderr=subprocess.STDOUT)  # a real process, forked pre-imported
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the UI did not listen within 60 s"
            time.sleep(0.2)
        proc.send_signal(sig)
        stopped = time.monotonic()
        while _listening(port) and time.monotonic() - stopped < 30:
            time.sleep(0.1)
        assert not _listening(port), f"port {port} still served 30 s after {sig.name}"
        assert proc.wait(timeout=60) == (-sig if sig == signal.SIGKILL else 0)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
