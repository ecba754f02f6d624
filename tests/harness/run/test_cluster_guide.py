"""The cluster guide (docs/cluster.md), on loopback: a driver joins a Ray head through Ray Client
(`ray://127.0.0.1:PORT`, what `pip install '.[cluster]'` installs for), and an MLflow server
with the basic-auth app takes a suite from a user with credentials, refuses one without,
and the password appears in no output. Each server starts once per module."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.results import read_results, results_path
from tests import prestart

# The tests that start Ray run on one test worker, one after another, as in a serial run:
# two Ray instances on one machine share the client server's port range (the Ray Client
# test took 224 s, its retry path, in a parallel run that had them side by side). The
# MLflow server's tests need no Ray, and run beside them.
pytestmark = [pytest.mark.loopback, pytest.mark.slow]
RAY = pytest.mark.xdist_group("ray")
FAST = ["--min-run-time", "0.01"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tvr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`tvr` in its own process: the credentials it is given stay out of this one."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    return prestart.run(list(args), capture_output=True, text=True, timeout=600,
                        env={**clean, **(env or {})})


# ---------------------------------------------------------------- Ray Client


CHANNEL_TIMEOUT = "RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S"


@pytest.fixture(scope="module")
def ray_client_port() -> Iterator[tuple[int, Path]]:
    """A one-node Ray head with a client server on a free loopback port; the port and the
    head's log folder."""
    pytest.importorskip("ray.util.client", reason="ray is not installed (pip install "
                        "'.[cluster]')")
    pytest.importorskip("grpc", reason="ray[client] is not installed (pip install '.[cluster]')")
    from ray.cluster_utils import Cluster

    port = _free_port()
    # The client server gives a driver's own server process 30 s to answer: too short on a
    # shared, loaded machine (the processes Cluster starts read it from the environment).
    # Not much longer either: a server process that died at start (Ray's proxier forks it
    # while gRPC threads run, and now and then the child dies) is only noticed when this
    # runs out, and the test then starts a second driver.
    before = os.environ.get(CHANNEL_TIMEOUT)
    os.environ[CHANNEL_TIMEOUT] = "90"
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "ray_client_server_port": port, "include_dashboard": False})
    try:
        deadline = time.monotonic() + 120  # the client server starts after the head answers
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "Ray's client server did not listen"
                time.sleep(0.5)
        yield port, Path(cluster.head_node.get_logs_dir_path())
    finally:
        cluster.shutdown()
        if before is None:
            del os.environ[CHANNEL_TIMEOUT]
        else:
            os.environ[CHANNEL_TIMEOUT] = before


def _startup_failures(logs: Path) -> int:
    """How many drivers' server processes Ray's client proxier saw die at start."""
    return sum(f.read_text(errors="replace").count("SpecificServer startup failed")
               for f in logs.glob("ray_client_server*"))


def _driver(args: list[str], logs: Path, out: Path) -> tuple[int, str] | None:
    """`tvr` as a Ray Client driver: its exit code and stderr, or None when the proxier said
    the driver's server process died at start (Ray forks it while gRPC threads run, and now
    and then the child dies): the driver would only learn of it when the channel timeout
    runs out, 90 s later, so it is stopped at once."""
    before = _startup_failures(logs)
    err = out / "stderr.txt"
    with open(err, "w") as stderr:
        proc = prestart.Process(args, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if _startup_failures(logs) > before:
                proc.kill()
                proc.wait()
                return None
            time.sleep(0.5)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return proc.returncode, err.read_text()


@RAY
def test_a_driver_runs_smoke_through_ray_client(ray_client_port: tuple[int, Path],
                                                tmp_path: Path) -> None:
    port, logs = ray_client_port
    args = ["run", "smoke", "--executor", "ray", "--ray-address", f"ray://127.0.0.1:{port}",
            "--tracking-uri", "none", "--out", str(tmp_path), *FAST]
    done = _driver(args, logs, tmp_path)
    if done is None or "Initialization failure from server" in done[1]:
        # The client server's process for this driver died at start; a second driver gets a
        # new one. Twice is a failure.
        done = _driver(args, logs, tmp_path)
    assert done is not None, "Ray's client server failed to start a driver's server twice"
    code, stderr = done
    assert code == 0, stderr[-2000:]
    rows = read_results(results_path(tmp_path, "smoke"))
    assert len(rows) == 6 and (rows["status"] == "ok").all()
    assert set(rows["executor"]) == {"ray"} and rows["node"].notna().all()


# ---------------------------------------------------------------- MLflow basic auth

PASSWORD = "tvr-Secr3t-pw"  # the one user's (and the admin's) password: must show nowhere


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mlflow server --app-name basic-auth` on SQLite, its user store in a file of its own;
    its URL."""
    pytest.importorskip("flask_wtf", reason="mlflow[auth] is not installed (pip install "
                        "'.[cluster]')")
    home, port = tmp_path_factory.mktemp("auth-server"), _free_port()
    config = home / "basic_auth.ini"
    config.write_text("[mlflow]\ndefault_permission = READ\n"
                      f"database_uri = sqlite:///{home / 'users.db'}\n"
                      "admin_username = alice\n"
                      "authorization_function = "
                      "mlflow.server.auth:authenticate_request_basic_auth\n")
    env = {**os.environ, "MLFLOW_FLASK_SERVER_SECRET_KEY": "a-test-secret-key",
           "MLFLOW_AUTH_CONFIG_PATH": str(config), "MLFLOW_AUTH_ADMIN_PASSWORD": PASSWORD,
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--app-name", "basic-auth",
         "--backend-store-uri", f"sqlite:///{home / 'runs.db'}",
         "--artifacts-destination", str(home / "artifacts"), "--serve-artifacts",
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, "mlflow server exited at start"
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "mlflow server did not answer in 180 s"
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def test_basic_auth_takes_a_suite_with_credentials_and_refuses_one_without(
        auth_server: str, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    with_them = _tvr("run", "smoke", "--only", "lstm", "--tracking-uri", auth_server,
                     "--out", str(tmp_path / "a"), *FAST,
                     env={"MLFLOW_TRACKING_USERNAME": "alice",
                          "MLFLOW_TRACKING_PASSWORD": PASSWORD})
    assert with_them.returncode == 0, with_them.stderr[-2000:]
    assert "tracking off" not in with_them.stderr
    without = _tvr("run", "smoke", "--only", "gru", "--tracking-uri", auth_server,
                   "--out", str(tmp_path / "b"), *FAST)
    assert without.returncode == 0  # the rows are the record: the sweep measures on
    (line,) = [x for x in without.stderr.splitlines() if "tracking off" in x]
    assert "401" in line or "nauthorized" in line or "credentials" in line.lower(), line
    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = \
        "alice", PASSWORD
    try:
        client = MlflowClient(auth_server)
        runs = client.search_runs([client.get_experiment_by_name("smoke").experiment_id])
    finally:
        del os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.data.params["mixer"] for r in children) == ["lstm", "lstm"]  # no gru
    for done in (with_them, without):
        assert PASSWORD not in done.stdout + done.stderr
    for csv in tmp_path.rglob("*.csv"):
        assert PASSWORD not in csv.read_text()
