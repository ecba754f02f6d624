"""A real `mlflow server` on a real, throwaway PostgreSQL cluster, on loopback: a suite's
parent and nested runs, metrics and artifacts arrive; the server killed mid-suite, the sweep
finishes into results.csv and `tvr sync` then completes the store, once."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.results import read_results, results_path
from tests.prestart import Process

pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'tvr-bench[dev]')")


def _pg_bin() -> Path | None:
    """The newest installed PostgreSQL server binaries (Debian keeps them off PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    initdb = found[-1] if found else shutil.which("initdb")
    return Path(initdb).parent if initdb else None


PG_BIN = _pg_bin()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PG_BIN is None, reason="PostgreSQL server binaries are absent "
                                 "(Debian: apt-get install postgresql; .ci/run does)")]
FAST = ["--min-run-time", "0.01"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres_user(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root (CI), run it as the unprivileged `nobody`."""
    return ["runuser", "-u", "nobody", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free loopback port; its SQLAlchemy URI.
    Hand-written rather than pytest-postgresql's fixture: that one runs pg_ctl as the
    current user, which PostgreSQL refuses when the tests run as root (CI)."""
    assert PG_BIN is not None
    home = Path(tempfile.mkdtemp(prefix="tvr-pg-"))
    data, port = home / "data", _free_port()
    if os.geteuid() == 0:
        home.chmod(0o755)
        shutil.chown(home, "nobody")
    subprocess.run(_as_postgres_user([str(PG_BIN / "initdb"), "-D", str(data), "-U", "tvr",
                                      "--auth=trust", "-E", "UTF8"]),
                   check=True, capture_output=True)
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(_as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options,
                                      "-l", str(home / "log"), "-w", "-t", "60", "start"]),
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://tvr@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m",
                                          "immediate", "stop"]), capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


class Server:
    """`mlflow server` on PostgreSQL with proxied artifacts, in its own process group."""

    def __init__(self, backend: str, artifacts: Path) -> None:
        self.backend, self.artifacts, self.port = backend, artifacts, _free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return  # running already
        log = open(self.artifacts.parent / f"server-{self.port}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", self.backend,
             "--artifacts-destination", str(self.artifacts), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1"],
            # no MLflow job runner: tvr uses no jobs, and its half-dozen worker processes
            # would import MLflow at every start
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
            stdout=log, stderr=log, start_new_session=True)
        log.close()  # the server holds its own copy
        deadline = time.time() + 180  # the first start migrates the database schema
        while time.time() < deadline:
            assert self.proc.poll() is None, "mlflow server exited at start"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError("mlflow server did not answer within 180 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def uri(self, secret: str = "s3cret") -> str:
        return f"http://alice:{secret}@127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def server(postgres: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(postgres, tmp_path_factory.mktemp("server") / "artifacts")
    s.start()
    yield s
    s.kill()


def _client(server: Server):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"http://127.0.0.1:{server.port}")


def _nested(client, suite: str) -> list:
    experiment = client.get_experiment_by_name(suite)
    runs = client.search_runs([experiment.experiment_id], "tags.point_id != ''",
                              max_results=1000)
    return runs


def test_runs_metrics_and_artifacts_arrive_and_no_password_anywhere(server, tmp_path):
    result = CliRunner().invoke(cli, ["run", "smoke", "--only", "lstm", "--out",
                                      str(tmp_path), "--tracking-uri", server.uri(), *FAST])
    assert result.exit_code == 0, result.output
    client = _client(server)
    experiment = client.get_experiment_by_name("smoke")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    nested = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    rows = read_results(results_path(tmp_path, "smoke"))
    assert len(parents) == 1 and len(nested) == len(rows) == 2
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in nested)
    assert all(r.data.metrics.get("flops_fwd", 0) > 0 for r in nested)
    artifacts = [a.path for a in client.list_artifacts(parents[0].info.run_id)]
    assert "results.csv" in artifacts  # through the server's artifact proxy
    assert any(server.artifacts.rglob("results.csv"))
    # the password of the URI: in no message, param, tag or file
    assert "s3cret" not in result.output
    for run in runs:
        assert "s3cret" not in repr(run.data.params) + repr(run.data.tags)
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or b"s3cret" not in path.read_bytes(), path


def test_server_killed_mid_suite_then_sync_completes_the_store_once(server, tmp_path):
    killed = server  # started by the fixture; killed, then started again on the same database
    out = tmp_path / "out"
    suite = "convergence-smoke"
    env = {**os.environ, "MLFLOW_TRACKING_URI": "", "TVR_MACHINE": "server-test"}
    sweep = Process(
        ["run", suite, "--only", "gru-lm", "--out", str(out), "--tracking-uri", killed.uri()],
        env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    path = results_path(out, suite)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and not (path.exists() and len(read_results(path))):
            assert sweep.poll() is None, sweep.communicate()[0]
            time.sleep(0.1)
        killed.kill()
        output, _ = sweep.communicate(timeout=600)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, output
    assert "tracking off" in output and "s3cret" not in output
    rows = read_results(path)
    import experiments

    expected = [p.point_id for p in experiments.points(suite) if p.subject == "gru-lm"]
    assert sorted(rows["point_id"]) == sorted(expected)  # results.csv complete

    killed.start()  # the same database, back
    try:
        client = _client(killed)
        before = {r.data.tags["point_id"] for r in _nested(client, suite)}
        assert before < set(expected)  # the kill cost the store some points
        first = CliRunner().invoke(cli, ["sync", suite, "--out", str(out), "--tracking-uri",
                                         killed.uri()], env={"TVR_MACHINE": "server-test"})
        assert first.exit_code == 0, first.output
        assert f"{len(expected) - len(before)} rows logged" in first.output
        again = CliRunner().invoke(cli, ["sync", suite, "--out", str(out), "--tracking-uri",
                                         killed.uri()], env={"TVR_MACHINE": "server-test"})
        assert again.exit_code == 0 and "0 rows logged" in again.output
        runs = _nested(client, suite)
        assert sorted(r.data.tags["point_id"] for r in runs) == sorted(expected)  # once each
        assert "s3cret" not in first.output + again.output
    finally:
        killed.start()  # as the fixture hands it to the next test: running
