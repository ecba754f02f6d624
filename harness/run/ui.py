"""`tvr ui`: the MLflow UI on 127.0.0.1 over the store the runs were tracked in."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from harness.errors import BadInput
from harness.run.store import is_remote, mask, sqlite_path

CTRL_C_GRACE_S = 5.0  # the UI server needs ~1 s to shut down after SIGINT


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


def runs_links(uri: str, port: int) -> list[tuple[str, str]]:
    """(experiment, link to its runs table) for every experiment with runs. MLflow 3's UI
    opens an experiment on its GenAI overview, which shows no training runs; the link opens
    the model-training view's runs table instead."""
    from mlflow import MlflowClient

    from harness.run.tracking import quiet_mlflow

    quiet_mlflow()
    client = MlflowClient(tracking_uri=uri)
    links = []
    for exp in client.search_experiments():
        if client.search_runs([exp.experiment_id], max_results=1):
            links.append((exp.name, f"http://127.0.0.1:{port}/#/experiments/"
                                    f"{exp.experiment_id}/runs?workflowType=machine_learning"))
    return links


def serve_ui(uri: str | None, out_dir: Path, port: int) -> int:
    """Run the MLflow UI in the foreground until Ctrl-C; return its exit code (0 on Ctrl-C)."""
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
    proc = subprocess.Popen(argv, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        return 0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server after Ctrl-C: a terminal sent it the SIGINT too, so give it a moment to
    exit on its own (a second signal would cut its shutdown short); then SIGTERM, then SIGKILL."""
    for signal_it, wait_s in ((None, CTRL_C_GRACE_S), (proc.terminate, 10.0), (proc.kill, None)):
        if signal_it is not None:
            signal_it()
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
