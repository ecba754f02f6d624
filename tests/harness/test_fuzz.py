"""A hypothesis-driven fuzz of the command line: whatever the arguments, `tvr` exits 0 or 2
with no traceback within a bound, and a run that measures leaves one row per point."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import experiments
from harness.cli import cli
from harness.results import read_results, results_path

pytestmark = pytest.mark.slow  # a fuzzer, real processes among its cases

ESCAPED = "../../escaped"  # a plugin's suite named as a path (the playground registers it)
NUMBERS = ["0.01", "0.05", "nan", "inf", "-inf", "1e308", "-1", "0", "abc", "", "1e-9",
           "60", "61", "0x10", "1_000"]
BYTES = ["1", "8GiB", "512MB", "0", "-5", "1" * 400, "nan", "1.5G", "GiB", "1e9", "9" * 20]
OUTS = ["", "a%20b", "q?x=1", "with space", "hash#1", "../escape", "deep/er/dir", "-", "."]
URIS = ["none", "sqlite://", "sqlite:///:memory:", "http://127.0.0.1:abc", "ftp://x",
        "postgresql+nosuch://h/db", "file:///tmp/x", "http://[::1:5000", "garbage", "NONE"]
WORDS = ["smoke", "quick", "table1", "bench", "convergence-smoke", "nosuch", "", "lstm",
         "gru", "self-attention", "--help", "-1", "all", ESCAPED, "/tmp/elsewhere/identities",
         "..", "a/b"]
# --set values past their meaning, and a few within it (dry runs only: nothing measured)
SETS = ["steps=0", "steps=99999999999999999999", "lr=nan", "lr=0", "lr=inf", "lr=3e-4",
        "budget_flops=nan", "budget_flops=0", "budget_flops=1e14", "seed=99999999999999999999",
        "seed=4294967295", "d_model=999999999", "d_model=65536", "seq_len=0", "warmup=2",
        "dropout=nan", "batch_size=1", "nosuch=1", "steps"]
THREADS = ["1", "2", "0", "10000", "-3", "abc", "99999999999999999999"]


def _corpus(tmp: Path, kind: str) -> str:
    path = tmp / f"corpus-{kind}"
    if kind == "fifo" and not path.exists():
        os.mkfifo(path)
    elif kind == "empty":
        path.write_text("")
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00" * 10)
    elif kind == "dir":
        path.mkdir(exist_ok=True)
    elif kind == "text":
        path.write_text("in the beginning was the word\n" * 50)
    return str(path)


@st.composite
def invocations(draw: st.DrawFn, tmp: Path) -> list[str]:
    command = draw(st.sampled_from(["run", "run", "run", "table", "plot", "report", "compare",
                                    "suites", "models", "sync", "doctor", "tune"]))
    args = [command]
    if command == "tune":  # what it refuses, or its summary: it never trains here
        args += [draw(st.sampled_from(["translation-cpu-tune", "nosuch", ESCAPED])),
                 "--summary"]
        if draw(st.booleans()):
            args += ["--threads", draw(st.sampled_from(THREADS))]
    if command == "run":
        measure = draw(st.integers(0, 3)) == 0  # a quarter measure the one-point smoke suite
        args.append("smoke" if measure else draw(st.sampled_from(WORDS)))
        if measure:
            args += ["--min-run-time", draw(st.sampled_from(["0.01", *NUMBERS[2:6], "abc"]))]
        else:
            args.append("--dry-run")
        if not measure and draw(st.booleans()):
            args += ["--min-run-time", draw(st.sampled_from(NUMBERS))]
        if draw(st.booleans()):
            args += ["--max-memory", draw(st.sampled_from(BYTES))]
        if draw(st.booleans()):
            args += ["--only", draw(st.sampled_from(WORDS))]
        if not measure and draw(st.booleans()):
            args += ["--set", draw(st.sampled_from(SETS))]
        if draw(st.integers(0, 3)) == 0:
            args += ["--threads", draw(st.sampled_from(THREADS))]
        if draw(st.booleans()):
            args += ["--dtype", draw(st.sampled_from(["float32", "bfloat16", "int8", ""]))]
        if draw(st.booleans()):
            kind = draw(st.sampled_from(["fifo", "empty", "binary", "dir", "text", "none"]))
            args += ["--corpus", _corpus(tmp, kind)]
    elif command in ("table", "plot", "report", "compare", "sync"):
        if command in ("plot", "sync", "compare") and draw(st.booleans()):
            args.append(draw(st.sampled_from(WORDS)))
        if draw(st.booleans()):
            args += ["--suite", draw(st.sampled_from(WORDS))]
        if command == "table" and draw(st.booleans()):
            args.append("--wide")
    elif command == "models" and draw(st.booleans()):
        args += ["--preset", draw(st.sampled_from(["tiny", "base", "huge", ""]))]
    if command not in ("suites", "models") and draw(st.booleans()):
        args += ["--out", str(tmp / draw(st.sampled_from(OUTS)))]
    if command in ("run", "sync") and draw(st.booleans()):
        args += ["--tracking-uri", draw(st.sampled_from(URIS))]
    return args


@pytest.fixture(scope="module")
def playground(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder for every invocation, with `smoke` cut to one small point while it lasts."""
    one = [p for p in experiments.points("smoke") if p.subject == "lstm"][:1]
    real, cwd = experiments.SUITES["smoke"], Path.cwd()
    experiments.SUITES["smoke"] = lambda: one
    experiments.SUITES[ESCAPED] = lambda: one  # a suite whose folder would leave --out
    folder = tmp_path_factory.mktemp("fuzz")
    os.chdir(folder)  # the default --out (results) must not be the repository's
    # once, before the clock runs: the kernels this machine runs fastest are measured on
    # first use, and the session's first MLflow store builds the template the others copy
    # (each up to a minute on a busy machine), which no invocation's bound is about
    warm = CliRunner().invoke(cli, ["run", "smoke", "--out", str(folder / "warm"),
                                    "--min-run-time", "0.01"])
    assert warm.exit_code == 0, warm.output
    yield folder
    os.chdir(cwd)
    experiments.SUITES["smoke"] = real
    del experiments.SUITES[ESCAPED]
    # nothing written outside --out: no "escaped" beside or above any --out drawn
    outs = [folder / o for o in OUTS] + [folder]
    assert not [o for o in outs if (o / ESCAPED).resolve().exists()]
    assert not Path("/tmp/elsewhere").exists()


@settings(max_examples=220, deadline=timedelta(seconds=30), derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(data=st.data())
def test_any_invocation_exits_0_or_2_without_traceback(data: st.DataObject,
                                                        playground: Path) -> None:
    args = data.draw(invocations(playground))
    t0 = time.monotonic()
    result = CliRunner().invoke(cli, args)
    assert time.monotonic() - t0 < 30, args
    assert result.exit_code in (0, 2), (args, result.output, result.exception)
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), (args, result.exception)
    assert "Traceback" not in result.output, (args, result.output)
    for csv in playground.glob("**/smoke/results.csv"):  # one row per finished point
        rows = read_results(csv)
        assert not rows.duplicated(["point_id", "device", "machine"]).any(), csv


def test_a_measured_run_leaves_one_row_per_point(tmp_path: Path, monkeypatch) -> None:
    points = experiments.points("smoke")[:2]
    monkeypatch.setitem(experiments.SUITES, "smoke", lambda: points)
    for _ in range(2):
        result = CliRunner().invoke(cli, ["run", "smoke", "--out", str(tmp_path),
                                          "--tracking-uri", "none", "--min-run-time", "0.01"])
        assert result.exit_code == 0, result.output
    rows = read_results(results_path(tmp_path, "smoke"))
    assert sorted(rows["point_id"]) == sorted(p.point_id for p in points)


# ---------------------------------------------------------------- hostile inputs
# What an independent probe found hanging, printing tracebacks or passwords: FIFOs,
# devices and /proc files as inputs, deep nesting, huge numbers, NUL and undecodable bytes,
# malformed URIs with passwords, foreign services where Ray or a database should be.

SECRET = "Q7pa/ss@w0:rd"  # found in no output, raw or percent-encoded


def _hostile_files(tmp: Path) -> dict[str, str]:
    """Input files of every hostile kind, made once per folder."""
    files = {"fifo": tmp / "h-fifo", "deep": tmp / "h-deep.toml", "huge": tmp / "h-huge.toml",
             "long-name": tmp / "h-long.toml", "window": tmp / "h-window.toml",
             "repeats": tmp / "h-repeats.tsv", "inf": tmp / "h-inf.toml",
             "grid": tmp / "h-grid.toml", "escape": tmp / "h-escape.toml"}
    if not files["fifo"].exists():
        os.mkfifo(files["fifo"])
        files["deep"].write_text("a = " + "[" * 3000 + "]" * 3000)
        grid = '[[grid]]\nmeasure = "path"\nmixers = ["lstm"]\nn = {n}\nd = 8\nbatch = 1\n'
        files["huge"].write_text('name = "h"\n' + grid.format(n=2**62))
        files["long-name"].write_text(f'name = "{"n" * 300}"\n' + grid.format(n=8))
        files["window"].write_text('name = "w"\n' + grid.format(n=8).replace(
            '"lstm"', '"restricted-attention"') + "config = { window = 99999999999 }\n")
        files["inf"].write_text('name = "i"\n' + grid.format(n=8) + "config = { dropout = nan }\n")
        axis = list(range(1, 3001))  # a 3,000 x 3,000 grid: 9 million points if expanded
        files["grid"].write_text('name = "g"\n' + grid.format(n=axis).replace(
            "d = 8", f"d = {axis}"))
        files["escape"].write_text('name = "../../escaped"\n' + grid.format(n=8))
        pairs = [f"mawu {i}\tword {i}" for i in range(12)]
        files["repeats"].write_text("\n".join(pairs + pairs[:4]) + "\n")
    return {k: str(v) for k, v in files.items()}


@st.composite
def hostile(draw: st.DrawFn, tmp: Path, ports: dict[str, int]) -> tuple[list[str], dict]:
    """(arguments, environment) of one hostile invocation."""
    files = _hostile_files(tmp)
    out = ["--out", str(tmp / "h-out")]
    kind = draw(st.sampled_from(["suite-file", "bitext", "uri", "ray", "results", "sync",
                                 "server", "elsewhere"]))
    env: dict[str, str] = {}
    if kind == "suite-file":
        path = draw(st.sampled_from([files["fifo"], "/dev/zero", "/dev/urandom",
                                     "/proc/self/status", files["deep"], files["huge"],
                                     files["long-name"], files["window"], files["inf"],
                                     f"{tmp}/a\0b.toml", "/proc/kmsg", "/dev/stdin",
                                     files["grid"], files["escape"]]))
        dry = draw(st.booleans())
        args = ["run", "--suite-file", path, *(["--dry-run"] if dry else
                                                ["--tracking-uri", "none"]), *out]
    elif kind == "bitext":
        path = draw(st.sampled_from([files["fifo"], "/dev/zero", "/proc/self/maps",
                                     files["repeats"], "a\0b", "\udcff.tsv", "x" * 5000]))
        args = ["run", "translation-tiny", "--bitext", path, "--dry-run"]
    elif kind in ("uri", "sync"):
        uri = draw(st.sampled_from([
            f"http://u:{SECRET}@127.0.0.1:abc", f"http://u:{SECRET}@127.0.0.1:{ports['http']}x",
            f"http://alice:{SECRET}@[::1:5000", f"postgresql+psycopg://a:{SECRET}@/db",
            f"sqlite:///{tmp}/a\0b.db", "sqlite:///" + "d/" * 2600 + "x.db",
            f"sqlite:///{tmp}/\udcff.db", "sqlite:relative.db", "sqlite:///x.db?mode=ro",
            "sqlite:////proc/mlflow.db", f"ftp://u:{SECRET}@host/x", f"u:{SECRET}@host"]))
        if kind == "sync":  # a database that does not answer: refused, as any unreachable store
            uri = draw(st.sampled_from([uri, f"mysql+pymysql://a:{SECRET}@127.0.0.1:"
                                        f"{ports['silent']}/db", "postgresql+psycopg://a:"
                                        f"{urllib.parse.quote(SECRET, safe='')}@127.0.0.1:"
                                        f"{ports['silent']}/db"]))
        args = ["sync", "smoke", "--tracking-uri", uri, *out] if kind == "sync" else \
            ["run", "smoke", "--tracking-uri", uri, *out]
        if kind == "uri" and draw(st.booleans()):
            args.insert(2, "--dry-run")
    elif kind == "server":  # a store that cannot serve: every command that tracks refuses
        uri = draw(st.sampled_from([f"http://u:{SECRET}@127.0.0.1:{ports['ssh']}",
                                    f"http://u:{SECRET}@127.0.0.1:{ports['garbage']}",
                                    f"postgresql://u:{SECRET}@127.0.0.1:{ports['closed']}/db"]))
        command = draw(st.sampled_from([["run", "smoke"], ["bench", "--tiny"],
                                        ["tune", "translation-cpu-tune"], ["sync", "smoke"]]))
        args = [*command, "--tracking-uri", uri, *out]
    elif kind == "elsewhere":  # paths out of --out, threads the machine lacks
        args = draw(st.sampled_from([
            ["report", "--suite", f"{tmp}/elsewhere/identities"], ["table", "--suite", "../x"],
            ["plot", "all", "--suite", "/"], ["sync", ".."], ["run", ESCAPED, "--dry-run"],
            ["run", "smoke", "--threads", "10000", "--dry-run"],
            ["tune", "translation-cpu-tune", "--summary", "--threads", "10000"],
            ["run", "smoke", "--set", "steps=0", "--dry-run"],
            ["run", "translation-quick", "--set", "budget_flops=nan", "--dry-run"]])) + out
    elif kind == "ray":
        address = draw(st.sampled_from([f"127.0.0.1:{ports['http']}",
                                        f"127.0.0.1:{ports['silent']}", "127.0.0.1:99999999",
                                        f"ray://127.0.0.1:{ports['http']}", "h\0st:1", ":1"]))
        if "\0" not in address and draw(st.booleans()):  # no NUL in an environment
            args, env = ["run", "smoke", "--executor", "ray", "--tracking-uri", "none",
                         *out], {"RAY_ADDRESS": address}
        else:
            args = ["run", "smoke", "--executor", "ray", "--ray-address", address,
                    "--tracking-uri", "none", *out]
    else:
        damage = draw(st.sampled_from(["1e309", "extra", "status", "cut", "-inf", "2**62"]))
        folder = tmp / f"h-res-{damage}"
        path = folder / "smoke" / "results.csv"
        if not path.exists():
            path.parent.mkdir(parents=True)
            head = "suite,point_id,runner,model,mixer,seq_len,d_model,batch_size,device," \
                   "dtype,seed,status,machine,message,torch_version,host\n"
            row = {"1e309": "smoke,p,layer,,lstm,1e309,8,1,cpu,float32,0,ok,m,,,\n",
                   "extra": "smoke,p,layer,,lstm,8,8,1,cpu,float32,0,ok,m,,,,x,y,z\n",
                   "status": "smoke,p,layer,,lstm,8,8,1,cpu,float32,0,maybe,m,,,\n",
                   "cut": "smoke,p,layer,,lstm,8,8,1,cpu,float32,0,ok,m,,,\nsmoke,q,lay",
                   "-inf": "smoke,p,layer,,lstm,-inf,8,1,cpu,float32,0,ok,m,,,\n",
                   "2**62": f"smoke,p,layer,,lstm,{2**62},8,1,cpu,float32,0,ok,m,,,\n"}
            path.write_text(head + row[damage])
        command = draw(st.sampled_from([["table"], ["report"], ["claims"],
                                        ["run", "smoke", "--tracking-uri", "none"],
                                        ["sync", "smoke"], ["plot", "all"]]))
        args = [*command, "--out", str(folder)]
    return args, env


@pytest.fixture(scope="module")
def services() -> Iterator[dict[str, int]]:
    """Something listening that is not Ray nor a database: an HTTP server, a silent one."""
    import http.server
    import socket
    import socketserver
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            """Not on the test's output."""

    class Banner(socketserver.BaseRequestHandler):
        """Answers in another protocol than HTTP: what `self.server.banner` holds."""

        def handle(self) -> None:
            self.request.sendall(self.server.banner)  # type: ignore[attr-defined]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    foreign = {}
    for name, banner in (("ssh", b"SSH-2.0-OpenSSH_9.6\r\n"), ("garbage", b"\x00\xffjunk\r\n")):
        foreign[name] = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Banner)
        foreign[name].banner = banner  # type: ignore[attr-defined]
        foreign[name].daemon_threads = True
        threading.Thread(target=foreign[name].serve_forever, daemon=True).start()
    with socket.socket() as silent, socket.socket() as closed:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        yield {"http": server.server_address[1], "silent": silent.getsockname()[1],
               "closed": closed.getsockname()[1],
               **{name: f.server_address[1] for name, f in foreign.items()}}
    for s in (server, *foreign.values()):
        s.shutdown()
        s.server_close()


def _check(args: list[str], code: int, output: str, seconds: float) -> None:
    """Exit 0 or 2 within 30 s; an exit 2 says what is wrong in one line; no traceback, no
    password."""
    assert seconds < 30, (args, seconds)
    assert code in (0, 2), (args, code, output)
    assert "Traceback" not in output and "Aborted" not in output, (args, output)
    forms = (SECRET, urllib.parse.quote(SECRET, safe=""), "pa/ss@w0")
    assert not any(f in output for f in forms), (args, output)
    if code == 2:
        errors = [x for x in output.strip().splitlines()
                  if x.strip() and not x.startswith(("Usage: ", "Try '"))]
        assert len(errors) == 1, (args, output)


@settings(max_examples=100, deadline=timedelta(seconds=30), derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_inputs_exit_0_or_2_in_one_line(data: st.DataObject, playground: Path,
                                                services: dict[str, int],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    args, env = data.draw(hostile(playground, services))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    t0 = time.monotonic()
    result = CliRunner().invoke(cli, args)
    _check(args, result.exit_code, result.output, time.monotonic() - t0)
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), (args, result.exception)


def test_hostile_inputs_as_real_processes(playground: Path, services: dict[str, int]) -> None:
    """A sample of the above as `tvr` processes (each costs the interpreter's start)."""
    pytest.importorskip("ray")
    files = _hostile_files(playground)
    chosen = [
        (["run", "--suite-file", files["fifo"], "--dry-run"], {}),
        (["run", "translation-tiny", "--bitext", "/dev/zero", "--dry-run"], {}),
        (["run", "smoke", "--tracking-uri", f"http://u:{SECRET}@127.0.0.1:abc"], {}),
        (["run", "smoke", "--executor", "ray", "--tracking-uri", "none"],
         {"RAY_ADDRESS": f"127.0.0.1:{services['http']}"}),
        (["run", "--suite-file", files["grid"], "--dry-run"], {}),  # 9 million points: no
        (["run", "smoke", "--tracking-uri", f"http://u:{SECRET}@127.0.0.1:{services['ssh']}"],
         {}),
    ]
    for args, env in chosen:
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "harness.cli", *args, "--out",
                               str(playground / "h-proc")], capture_output=True, text=True,
                              timeout=60, env={**os.environ, **env})
        _check(args, done.returncode, done.stdout + done.stderr, time.monotonic() - t0)
