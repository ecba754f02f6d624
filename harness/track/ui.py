"""`tvr ui`: the MLflow UI on 127.0.0.1 over the store the runs were tracked in."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from harness.errors import BadInput
from harness.signals import handled
from harness.track.client import quiet_mlflow
from harness.track.store import is_remote, mask, sqlite_path

DEFAULT_PORT = 5000
STOP_GRACE_S = 4.0  # the UI server needs ~1 s to shut down after SIGTERM; then SIGKILL
_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when its parent dies


def _free(port: int) -> bool:
    """Whether 127.0.0.1:port can be bound right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ui_command(uri: str, out_dir: Path, port: int) -> tuple[list[str], dict[str, str]]:
    """argv and full environment for an MLflow server on 127.0.0.1 over the same store."""
    if is_remote(uri):
        raise BadInput(f"tracking URI {mask(uri)} is a server already: open it in a browser")
    # The store URI goes through the environment: on argv any local user could read a
    # database password with `ps`.
    argv = [sys.executable, "-m", "mlflow", "server",
            "--default-artifact-root", (Path(out_dir) / "mlartifacts").resolve().as_uri(),
            # Experiments keep file:// artifact locations; the proxy would only add an
            # ./mlartifacts folder in the cwd.
            "--no-serve-artifacts",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    # Job execution starts extra worker processes: the UI answers in ~4 s instead of 8-11 s
    # without it, and Ctrl-C stops everything.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "MLFLOW_BACKEND_STORE_URI": uri}
    return argv, env


def runs_links(uri: str, port: int = DEFAULT_PORT, base: str | None = None
               ) -> list[tuple[str, str]]:
    """(experiment, link to its runs table) for every experiment with runs, on a UI at
    `base` (default http://127.0.0.1:PORT). MLflow 3's UI opens an experiment on its GenAI
    overview, which shows no training runs; the link opens the model-training view's runs
    table instead."""
    from mlflow import MlflowClient

    quiet_mlflow()
    client = MlflowClient(tracking_uri=uri)
    base = base or f"http://127.0.0.1:{port}"
    links = []
    for exp in client.search_experiments():
        if client.search_runs([exp.experiment_id], max_results=1):
            links.append((exp.name, f"{base}/#/experiments/{exp.experiment_id}/runs"
                                    "?workflowType=machine_learning"))
    return links


def serve_ui(uri: str | None, out_dir: Path, port: int) -> int:
    """Run the MLflow UI in the foreground until a signal; return its exit code (0 when
    stopped by SIGINT, SIGTERM or SIGHUP)."""
    if uri is None:
        raise BadInput("tracking is off (--tracking-uri none): there is no store to browse")
    if is_remote(uri):
        print(f"MLflow tracking server: {mask(uri)}", flush=True)
        return 0
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        raise BadInput(f"no MLflow store at {db}: run `tvr run SUITE` first")
    if not 1 <= port <= 65535:
        raise BadInput(f"port {port} is not in 1..65535")
    if not _free(port):
        raise BadInput(f"port {port} on 127.0.0.1 is in use: pick another with --port")
    argv, env = ui_command(uri, out_dir, port)
    print(f"MLflow UI: http://127.0.0.1:{port}  (store {mask(uri)}; Ctrl-C stops it)",
          flush=True)
    for name, link in runs_links(uri, port):
        print(f"  runs of {name}: {link}", flush=True)
    return _supervise(argv, env)


def _die_with_parent() -> None:
    """In the server's process, before it starts: SIGTERM when `tvr ui` dies, even by
    SIGKILL, which no handler sees (Linux; elsewhere the server outlives a SIGKILL)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # no prctl on this platform: SIGTERM and SIGINT are still forwarded


def _supervise(argv: list[str], env: dict[str, str]) -> int:
    """Run the server as a child in its own session and stop it with us. Its own session,
    so a terminal's Ctrl-C reaches only this process, which sends one SIGTERM to the
    server's session (MLflow's CLI and its uvicorn worker), then SIGKILL after a grace
    period; SIGKILL of this process reaches the server as SIGTERM through the parent-death
    signal."""
    proc = subprocess.Popen(argv, env=env, start_new_session=True,
                            preexec_fn=_die_with_parent)  # noqa: PLW1509 -- no threads yet
    stopped_at: float | None = None

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopped_at
        if stopped_at is None:  # the handler only signals: waiting is the loop's job
            stopped_at = time.monotonic()
            _signal_session(proc, signal.SIGTERM)

    # not a signal `tvr ui` was started ignoring (`nohup tvr ui &` keeps serving at logout)
    old = {s: signal.signal(s, stop)
           for s in handled((signal.SIGINT, signal.SIGTERM, signal.SIGHUP))}
    try:
        while True:
            try:
                code = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if stopped_at is not None and time.monotonic() - stopped_at > STOP_GRACE_S:
                    _signal_session(proc, signal.SIGKILL)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if proc.poll() is None:  # an exception here: never leave the server behind
            _signal_session(proc, signal.SIGKILL)
            proc.wait()
    return 0 if stopped_at is not None else code


def _signal_session(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal every process of the server's session (it leads its own group)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass  # already gone
