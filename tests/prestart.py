"""`tvr` processes forked from one that has already imported the harness and its libraries,
for the tests whose subject is what a real process does after its start: killed with -9 or
stopped by a signal mid-sweep, two sweeps on one folder, a store locked or broken under it.

Each is a process of its own (its own pid, signals, stdout, exit code, files, session if
asked), like one of `subprocess.Popen([sys.executable, "-m", "harness.cli", ...])`, but it
skips the imports every cold start pays (torch, MLflow, pandas, matplotlib, scipy: about 5 to
8 s of CPU, most of a smoke run's). The start itself stays tested by cold processes wherever it
is the subject: a stop in the first seconds (test_signals), the fuzzed real processes,
plugins, `scripts/gpu-check --dry-run`.

Not multiprocessing's forkserver: its children end through os._exit without running atexit
handlers or joining threads, and cannot take the caller's pipes; a `tvr` process here ends as
the interpreter ends one, so MLflow's and Ray's exit hooks run as they would in a cold one."""

from __future__ import annotations

import atexit
import importlib
import io
import json
import os
import pkgutil
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Imported by the harness inside functions (the CLI keeps `tvr --help` fast): preloaded too.
LIBRARIES = ("torch", "torch._dynamo", "mlflow", "mlflow.store.tracking.sqlalchemy_store",
             "pandas", "scipy.stats", "matplotlib.pyplot", "seaborn", "sacrebleu", "ray")


# --- the template process ------------------------------------------------------------------

def _preload() -> None:
    for name in LIBRARIES:
        importlib.import_module(name)
    for package in ("models", "experiments", "harness"):
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            if not info.name.endswith(".__main__"):  # that one runs the CLI
                importlib.import_module(info.name)


def serve(path: str) -> None:
    """Preload, then fork one `tvr` per request on the socket at `path`; the requester gets
    the child's pid, then its exit code (Popen's: -N for signal N). Ends when the test
    process that started it closes its stdin."""
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".tmp")
    listener.listen(16)
    os.rename(path + ".tmp", path)  # the requester waits for this name: the template is ready
    waiting: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [], 0.05)
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return  # the test process is gone
        if listener in ready:
            conn, _ = listener.accept()
            waiting[_fork(listener, conn)] = conn
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if not pid:
                break
            conn = waiting.pop(pid)
            try:
                conn.send(str(os.waitstatus_to_exitcode(status)).encode())
            except (BrokenPipeError, ConnectionResetError):  # the test stopped waiting for
                # this process (closed its end): there is nobody to tell
                pass
            conn.close()


def _fork(listener: socket.socket, conn: socket.socket) -> int:
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        _run_tvr(request, fds)
    for fd in fds:
        os.close(fd)
    conn.send(str(pid).encode())
    return pid


def _run_tvr(request: dict, fds: list[int]) -> None:
    """In the child: become `python -m harness.cli ARGS` in the request's folder and
    environment, and end as the interpreter would end it. Never returns."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        os.close(fd)
    if request["new_session"]:
        os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False))
    sys.stdout, sys.stderr = (  # as the interpreter makes them (stderr: line-buffered)
        io.TextIOWrapper(open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False),
                         errors="backslashreplace" if fd == 2 else None,
                         line_buffering=os.isatty(fd) or fd == 2, write_through=unbuffered)
        for fd in (1, 2))
    sys.argv = ["", *request["args"]]
    sys.path[0] = os.getcwd()
    code = 0
    try:
        runpy.run_module("harness.cli", run_name="__main__", alter_sys=True)
    except SystemExit as stop:  # as the interpreter reads sys.exit's argument
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # as the interpreter does: die of SIGINT
        _end()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - an uncaught error ends a real process with exit 1
        traceback.print_exc()
        code = 1
    _end()
    os._exit(code & 0xFF)


def _end() -> None:
    """What the interpreter does at exit: join non-daemon threads, run atexit, flush."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


# --- the test side ---------------------------------------------------------------------------

_template: dict[str, object] = {}


def _socket_path() -> str:
    """The template's socket, started on first use (one per test process, ~10 s of imports)."""
    if "path" not in _template:
        folder = tempfile.mkdtemp(prefix="tvr-prestart-")
        path = os.path.join(folder, "socket")
        proc = subprocess.Popen([sys.executable, "-c",
                                 "import sys; from tests.prestart import serve; serve(sys.argv[1])",
                                 path], stdin=subprocess.PIPE, cwd=ROOT)
        atexit.register(proc.stdin.close)  # the template ends with this process
        atexit.register(shutil.rmtree, folder, True)  # and so does its socket's folder
        deadline = time.monotonic() + 300
        while not os.path.exists(path):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the tvr template process did not start (exit {proc.poll()})")
            time.sleep(0.05)
        _template.update(path=path, proc=proc)
    return str(_template["path"])


class Process:
    """The part of subprocess.Popen the tests use, for a `tvr ARGS` forked from the template:
    `args` are tvr's own (no interpreter, no `-m harness.cli`)."""

    def __init__(self, args: list[str], *, stdout=None, stderr=None, text: bool = False,  # noqa: ANN001
                 env: dict[str, str] | None = None, cwd: str | Path | None = None,
                 start_new_session: bool = False) -> None:
        self.args, self.returncode = list(args), None
        opened: list[int] = [os.open(os.devnull, os.O_RDONLY)]  # the child's stdin
        self.stdout, out = _stream(stdout, 1, text, opened)
        self.stderr, err = ((None, out) if stderr == subprocess.STDOUT
                            else _stream(stderr, 2, text, opened))
        request = {"args": self.args, "env": dict(os.environ if env is None else env),
                   "cwd": str(cwd or os.getcwd()), "new_session": start_new_session}
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._conn.connect(_socket_path())
        socket.send_fds(self._conn, [json.dumps(request).encode()], [opened[0], out, err])
        for fd in opened:  # the child has its copies: only it may hold a pipe's writing end
            os.close(fd)
        self.pid = int(self._conn.recv(64))
        self._readers: dict[str, threading.Thread] = {}
        self._text: dict[str, str | bytes] = {}

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self.returncode = int(self._conn.recv(64))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = int(self._conn.recv(64))
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple:
        """Popen's: both pipes read to their end, then the exit code; a TimeoutExpired leaves
        the readers running for the next call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for name in ("stdout", "stderr"):
            stream = getattr(self, name)
            if stream is not None and name not in self._readers:
                self._readers[name] = threading.Thread(
                    target=lambda n=name, s=stream: self._text.__setitem__(n, s.read()),
                    daemon=True)
                self._readers[name].start()
        for reader in self._readers.values():
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self._text.get("stdout"), self._text.get("stderr")

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _stream(target, default: int, text: bool, opened: list[int]) -> tuple:  # noqa: ANN001
    """(our reading end or None, the fd the child writes to) for Popen's stdout/stderr:
    a new pipe for PIPE, /dev/null for DEVNULL, ours when not redirected, else the given
    file or fd. The fds opened here go into `opened`, to be closed once sent."""
    if target == subprocess.PIPE:
        read, write = os.pipe()
        opened.append(write)
        return open(read, "r" if text else "rb"), write  # noqa: SIM115 - read to its end
    if target == subprocess.DEVNULL:
        opened.append(os.open(os.devnull, os.O_WRONLY))
        return None, opened[-1]
    if target is None:
        return None, default
    return None, target if isinstance(target, int) else target.fileno()


def tvr(out: Path, *args: str, machine: str) -> Process:
    """`tvr ARGS --out OUT` as the fault tests start it: rows of machine `machine`, tracked in
    the folder's own store (MLFLOW_TRACKING_URI unset), stderr within stdout on a pipe."""
    env = {**os.environ, "TVR_MACHINE": machine, "PYTHONUNBUFFERED": "1",
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return Process([*args, "--out", str(out)], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True, env=env)


def run(args: list[str], *, timeout: float | None = None, capture_output: bool = False,
        text: bool = False, env: dict[str, str] | None = None,
        cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """subprocess.run's part the tests use."""
    pipe = subprocess.PIPE if capture_output else None
    proc = Process(args, stdout=pipe, stderr=pipe, text=text, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
