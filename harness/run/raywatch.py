"""A watchdog for the Ray instance a sweep starts on this machine: when the driver ends in any
way (kill -9 included), every process the instance started that is still there is stopped.

Ray ties its raylet and GCS to the driver, but the agents the raylet starts (DashboardAgent,
RuntimeEnvAgent) outlive a driver killed with SIGKILL. The watchdog runs beside the driver
in its own session (a terminal's Ctrl-C is not for it), keeps a list of the driver's
descendants (pid and start time, so a reused pid is never hit), and stops those that
remain once the driver's pipe closes, which the kernel does whatever killed it.

    python -m harness.run.raywatch DRIVER_PID     # stdin: the driver's end of a pipe
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 3.0  # Ray's own shutdown goes first; what is left after this is stopped


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) of every process, from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # ended meanwhile
        table[int(entry.name)] = (int(fields[1]), fields[19])
    return table


def descendants(pid: int) -> dict[int, str]:
    """The processes below `pid` (children, theirs, ...) with their start times."""
    table = _table()
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, started) in table.items():
            if ppid == parent and child not in found and child != os.getpid():
                found[child] = started
                frontier.append(child)
    return found


def stop(processes: dict[int, str]) -> int:
    """SIGTERM, then SIGKILL, to those of `processes` still running as the same process;
    returns how many were still there."""
    table = _table()
    left = [pid for pid, started in processes.items() if table.get(pid, (0, ""))[1] == started]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(1.0)
    return len(left)


def marked(token: str) -> dict[int, str]:
    """The processes whose environment holds OWNER=token: what the driver started after it
    set the mark, wherever they were reparented (a worker the raylet spawned just before it
    died is no one's descendant any more)."""
    needle = f"{OWNER}={token}".encode()
    found = {}
    for pid, (_, started) in _table().items():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue  # ended, or another user's
        if needle in environ.split(b"\0") and pid != os.getpid():
            found[pid] = started
    return found


def watch(driver: int, token: str, session: str | None = None) -> None:
    """Note the driver's descendants every second until stdin closes, then stop the rest
    and remove the instance's session folder (`session`), which no one writes any more."""
    seen: dict[int, str] = {}
    while True:
        seen |= descendants(driver)
        ready, _, _ = select.select([sys.stdin], [], [], 1.0)
        if ready and not os.read(sys.stdin.fileno(), 1024):
            break  # EOF: the driver ended (or closed the executor)
    time.sleep(GRACE_S)
    stop(seen | marked(token))
    if session is not None and Path(session).name.startswith(SESSION_PREFIX):
        # this process has no output to say a failure on: a folder it cannot remove stays
        shutil.rmtree(session, ignore_errors=True)


OWNER = "TVR_RAY_OWNER"  # the mark in the environment of every process the instance starts


SESSION_PREFIX = "tvr-ray-"  # the session folders of the instances the harness starts


def start(session: str | None = None) -> subprocess.Popen:
    """The watchdog of this process, started before ray.init (which inherits the mark set
    here); the returned process's stdin is the pipe whose closing (by close(), or by the
    kernel at any death) sets it off. `session`: the instance's folder, removed at the end."""
    token = f"{os.getpid()}-{time.time_ns()}"
    os.environ[OWNER] = token
    return subprocess.Popen([sys.executable, "-m", "harness.run.raywatch", str(os.getpid()),
                             token, *([session] if session else [])], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
