"""A stop signal is the same at every moment of a run: from the first instant (Python still
importing) to the sweep's end, Ctrl-C exits 130 and SIGTERM 143 with one line, never click's
"Aborted!" nor a traceback."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results import read_results
from tests import prestart
from tests.prestart import Process

# The tests that start Ray run on one test worker, one after another, as in a serial run:
# two Ray instances on one machine share the client server's port range (the Ray Client
# test took 224 s, its retry path, in a parallel run that had them side by side). The
# others here start no Ray, and run beside them.
RAY = pytest.mark.xdist_group("ray")


# `python -m harness.cli ARGS` in a process whose SIGINT starts as asked (exec keeps it)
_LAUNCH = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.Handlers("
           "int(sys.argv[1]))); os.execv(sys.executable, "
           "[sys.executable, '-m', 'harness.cli', *sys.argv[2:]])")


def tvr(out: Path, *args: str, sigint: signal.Handlers = signal.SIG_DFL) -> subprocess.Popen:
    """A cold `tvr` started as at a terminal (SIGINT not ignored, whatever this test process
    inherited: a shell starts a background job ignoring it), or as `tvr ... &` in a script
    (sigint=SIG_IGN)."""
    env = {**os.environ, "TVR_MACHINE": "signals", "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen([sys.executable, "-c", _LAUNCH, str(int(sigint)), *args,
                             "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)


def forked(out: Path, *args: str) -> Process:
    """`tvr` forked from a pre-imported process (tests/prestart.py), for a stop later than its
    start."""
    return prestart.tvr(out, *args, machine="signals")


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler: Python sets none of its own, so this is
    the first line of `tvr` having run (the interpreter's start before it is not ours)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("after_s", [0.0, 0.4, 1.2, 2.5])
def test_a_stop_in_the_first_seconds_exits_with_the_signals_code(
        tmp_path: Path, signum: int, after_s: float) -> None:
    proc = tvr(tmp_path, "run", "smoke", "--min-run-time", "0.01", "--device", "cpu")
    deadline = time.monotonic() + 20
    while not catches_sigterm(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(after_s)
    proc.send_signal(signum)
    text, _ = proc.communicate(timeout=60)
    if proc.returncode == 0:  # cannot be: smoke takes far longer than 2.5 s
        pytest.fail(text)
    assert proc.returncode == 128 + signum, text
    assert "Aborted!" not in text and "Traceback" not in text, text
    said = [x for x in text.replace("\r", "\n").splitlines() if x.startswith("stopped by")]
    assert len(said) == 1 and signal.Signals(signum).name in said[0], text


@pytest.mark.slow
def test_a_sweep_started_ignoring_sigint_keeps_ignoring_it(tmp_path: Path) -> None:
    """`tvr run ... &` in a script: a Ctrl-C at the terminal reaches the background job, which
    the shell started ignoring SIGINT. It runs on, mid-sweep as before it, and ends 0."""
    proc = tvr(tmp_path, "run", "smoke", "--min-run-time", "0.01", "--device", "cpu",
               "--tracking-uri", "none", sigint=signal.SIG_IGN)
    csv = tmp_path / "smoke" / "results.csv"
    deadline = time.monotonic() + 60
    while not csv.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[0]  # five points of about 0.4 s to go
    proc.send_signal(signal.SIGINT)  # mid-sweep: after the first row
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "stopped by" not in text, text
    assert len(read_results(csv)) == 6, text  # every point measured


@pytest.mark.slow
@RAY
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_ray_sweep_leaves_no_ray_process_of_its_own(tmp_path: Path,
                                                              signum: int) -> None:
    """With the Ray instance the sweep started itself: SIGTERM exits 143 with the parent run
    KILLED, as the local executor does; after either signal (kill -9 included) no process
    the sweep started is left (Ray's agents outlived a killed driver)."""
    pytest.importorskip("ray")
    from mlflow import MlflowClient

    from harness.run.raywatch import descendants
    from harness.track.store import sqlite_uri

    env_address = os.environ.pop("RAY_ADDRESS", None)
    try:
        proc = forked(tmp_path, "run", "convergence-smoke", "--only", "gru-lm", "--executor",
                      "ray")
    finally:
        if env_address is not None:
            os.environ["RAY_ADDRESS"] = env_address
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not _running(tmp_path / "mlflow.db"):
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.2)  # stop it once Ray runs and the sweep's parent run is open
    started = descendants(proc.pid)
    assert any("raylet" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
               for pid in started if Path(f"/proc/{pid}").exists()), started
    proc.send_signal(signum)
    text, _ = proc.communicate(timeout=60)
    deadline = time.monotonic() + 20
    left = started
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = {pid: t for pid, t in started.items() if _same(pid, t)}
    assert not left, [Path(f"/proc/{p}/cmdline").read_text(errors="replace") for p in left]
    if signum == signal.SIGKILL:
        return
    assert proc.returncode == 143 and "Aborted!" not in text and "Traceback" not in text, text
    client = MlflowClient(sqlite_uri(tmp_path / "mlflow.db"))
    experiment = client.get_experiment_by_name("convergence-smoke").experiment_id
    parents = [r.info.status for r in client.search_runs([experiment])
               if "mlflow.parentRunId" not in r.data.tags]
    assert parents == ["KILLED"]


def _same(pid: int, started: str) -> bool:
    """Whether `pid` still runs as the process that started at `started` (a live one: a
    zombie is gone, waiting only for its parent to read its status)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] != "Z"


def _running(db: Path) -> bool:
    """Whether the store holds a RUNNING run (the sweep's parent, opened after ray.init)."""
    if not db.exists():
        return False
    try:
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            return bool(con.execute("SELECT 1 FROM runs WHERE status = 'RUNNING'").fetchall())
        finally:
            con.close()
    except sqlite3.Error:
        return False  # not built yet


def test_a_stop_a_cleanup_callback_swallowed_still_stops_the_sweep(monkeypatch) -> None:
    """A signal handled inside a weakref callback (as SQLAlchemy's session cleanup runs):
    Python swallows its Stopped and goes on, printing nothing (no traceback for a stop); the
    sweep's check between points raises it again, and leaving the block forgets it."""
    import weakref

    from harness import signals

    class Held:
        pass

    reported: list = []  # what reaches the process's unraisable hook (Python prints it)
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    with signals.stop_on_signals():
        held = Held()
        ref = weakref.ref(held, lambda _: signal.raise_signal(signal.SIGINT))
        del held  # the callback runs here; its Stopped is swallowed
        assert ref() is None
        with pytest.raises(signals.Stopped) as stopped:
            signals.check()
        assert stopped.value.exit_code == 130
        other = Held()
        kept = weakref.ref(other, lambda _: 1 / 0)  # not a stop: still reported
        del other
        assert kept() is None
    signals.check()  # outside the block: nothing pending
    assert [type(r.exc_value) for r in reported] == [ZeroDivisionError]


def test_a_stop_inside_an_uncut_block_is_raised_where_the_outermost_block_ends() -> None:
    """The block runs to its end (a store write is not cut halfway), then the stop is raised;
    a block that fails on its own leaves the stop pending for the sweep's check."""
    from harness import signals

    done: list[str] = []
    with signals.stop_on_signals():
        with pytest.raises(signals.Stopped) as stopped:
            with signals.uncut():
                with signals.uncut():
                    signal.raise_signal(signal.SIGTERM)
                    done.append("inner")
                done.append("outer")
        assert done == ["inner", "outer"] and stopped.value.exit_code == 143
    with signals.stop_on_signals():
        with pytest.raises(OSError), signals.uncut():
            signal.raise_signal(signal.SIGINT)
            raise OSError("the block's own failure")
        with pytest.raises(signals.Stopped):
            signals.check()
