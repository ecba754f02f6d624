"""A hypothesis-driven fuzz of the paths and stored files `tvr` reads: every command that
reads (run --dry-run, table, claims, report, compare, sync, doctor, plot) given link loops,
names over 255 bytes, paths under a file, FIFOs, empty files, folders where files belong,
results with bad cells (text, non-ASCII digits, inf), URIs holding a password, exits 0, 1
or 2 within a bound, with no traceback, no password and, for exit 2, one line saying what
is wrong. In process (click's CliRunner) to stay fast; a sample as real `tvr` processes,
forked pre-imported (tests/prestart.py)."""

from __future__ import annotations

import csv
import io
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import cli
from tests import prestart

pytestmark = pytest.mark.slow  # a fuzzer

SECRET = "Zq8/pw@x:9"  # found in no output, raw or percent-encoded
BOUND_S = 60  # one invocation, however hostile its arguments, on a loaded machine

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "quick" / "results.csv"


def _row(**cells: str) -> str:
    """A row of suite quick, every column a figure or table reads, with `cells` changed."""
    with open(REFERENCE, newline="") as f:
        rows = csv.reader(f)
        head, row = next(rows), next(rows)
    values = dict(zip(head, row, strict=True)) | cells
    line = io.StringIO()
    csv.writer(line, lineterminator="\n").writerow(values[c] for c in head)
    return line.getvalue()


def _head() -> str:
    with open(REFERENCE) as f:
        return f.readline()


# A results folder per damage: rows of suite quick, each with these cells changed
DAMAGES = {
    "abc": [{"fwd_ms": "abc"}],  # the probe's TypeError in table, claims and report
    "arabic-digits": [{"fwd_ms": "١٫٥"}],
    "fullwidth-size": [{"seq_len": "３２"}],
    "1e309-size": [{"d_model": "1e309"}],
    "status": [{"status": "maybe"}],
    # rows that survive the reading, odd numbers drawn: inf, negative, beside text
    "odd": [{"fwd_ms": "inf", "fwdbwd_tokens_per_s": "-inf"},
            {"fwd_ms": "-1", "flops_fwd": "-5", "seq_len": "64"},
            {"fwd_ms": "abc", "seq_len": "128"}],
}
KINDS = ["loop-self", "loop-a", "long", "long-utf8", "under-file", "fifo", "empty", "dir",
         "binary", "missing", "text", "non-ascii"]  # of a path given where a file is read


def _arena(tmp: Path) -> dict[str, str]:
    """Hostile paths of every kind and results folders of every damage, made once."""
    (tmp / "loop-self").symlink_to("loop-self")
    (tmp / "loop-a").symlink_to("loop-b")
    (tmp / "loop-b").symlink_to("loop-a")
    (tmp / "a-file").write_text("a file, not a folder\n")
    os.mkfifo(tmp / "fifo")
    (tmp / "empty").write_text("")
    (tmp / "dir").mkdir()
    (tmp / "binary").write_bytes(b"\xff\xfe\x00" * 10)
    pairs = "".join(f"mawu {i}\tword {i}\n" for i in range(20))
    (tmp / "text.tsv").write_text(pairs)
    (tmp / "données ١٢.tsv").write_text(pairs)
    paths = {"loop-self": tmp / "loop-self", "loop-a": tmp / "loop-a",
             "long": tmp / ("n" * 300), "long-utf8": tmp / ("é" * 130),
             "under-file": tmp / "a-file" / "x", "fifo": tmp / "fifo", "empty": tmp / "empty",
             "dir": tmp / "dir", "binary": tmp / "binary", "missing": tmp / "missing",
             "text": tmp / "text.tsv", "non-ascii": tmp / "données ١٢.tsv"}
    for damage, changes in DAMAGES.items():
        folder = tmp / f"out-{damage}" / "quick"
        folder.mkdir(parents=True)
        rows = [_row(**cells, point_id=f"p{i}") for i, cells in enumerate(changes)]
        (folder / "results.csv").write_text(_head() + "".join(rows))
    for kind in ("empty", "header", "dir", "fifo", "loop"):  # results.csv itself hostile
        folder = tmp / f"out-file-{kind}" / "quick"
        folder.mkdir(parents=True)
        file = folder / "results.csv"
        if kind in ("empty", "header"):
            file.write_text("" if kind == "empty" else _head())
        elif kind == "dir":
            file.mkdir()
        elif kind == "fifo":
            os.mkfifo(file)
        else:
            file.symlink_to("results.csv")
    store = tmp / "out-store-loop"  # a results folder whose store is a link loop
    (store / "quick").mkdir(parents=True)
    (store / "quick" / "results.csv").write_text(_head() + _row(status="maybe"))
    (store / "mlflow.db").symlink_to("mlflow.db")
    return {k: str(v) for k, v in paths.items()}


OUTS = [*(f"out-{d}" for d in DAMAGES), *(f"out-file-{k}" for k in
                                          ("empty", "header", "dir", "fifo", "loop")),
        "out-store-loop"]
URIS = [f"sqlite:///{{{k}}}" for k in ("loop-self", "long", "under-file", "fifo", "dir",
                                       "binary")] + [
    "sqlite:///{loop-self}/mlflow.db", "sqlite:///{long}/mlflow.db", "none",
    f"postgresql//u:{SECRET}@127.0.0.1:1/db", f"http://u:{SECRET}@127.0.0.1:abc",
    f"mysql://u:{SECRET}@[::1/db", "sqlite:relative.db", f"u:{SECRET}@host"]
NUMBERS = ["٠٫٥", "１", "0.05", "nan", "1_0", "abc", "-1"]  # Arabic-Indic, full-width digits
BYTES = ["٨GiB", "８GiB", "1GiB", "0", "nan"]
SUITES = ["quick", "smoke", "nosuch", "n" * 300, "../quick", ""]


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    folder = tmp_path_factory.mktemp("fuzz-paths")
    paths = _arena(folder)
    cwd = Path.cwd()
    os.chdir(folder)  # a relative path or the default --out (results) stays in here
    yield folder, paths
    os.chdir(cwd)


@st.composite
def invocations(draw: st.DrawFn, tmp: Path, paths: dict[str, str]) -> tuple[list[str], dict]:
    """(arguments, environment) of one invocation of a command that reads paths."""
    def path() -> str:
        return paths[draw(st.sampled_from(KINDS))]

    def out() -> str:
        kind = draw(st.sampled_from(["results", "results", "results", "path"]))
        return str(tmp / draw(st.sampled_from(OUTS))) if kind == "results" else path()

    def uri() -> str:
        return draw(st.sampled_from(URIS)).format(**paths)

    command = draw(st.sampled_from(["run", "run", "table", "claims", "report", "compare",
                                    "sync", "doctor", "plot"]))
    args, env = [], {}
    if draw(st.integers(0, 9)) == 0:
        args += ["--plugin", path()]
    args.append(command)
    if command == "run":
        source = draw(st.sampled_from(["suite", "suite-file", "bitext", "corpus"]))
        if source == "suite-file":
            args += ["--suite-file", path()]
        elif source == "bitext":
            args += ["translation-tiny", "--bitext", path()]
            if draw(st.booleans()):
                args += ["--bitext", path()]
        else:
            args.append(draw(st.sampled_from(["smoke", "translation-tiny", "nosuch"])))
            if source == "corpus":
                args += ["--corpus", path()]
        args.append("--dry-run")
        if draw(st.booleans()):
            args += ["--min-run-time", draw(st.sampled_from(NUMBERS))]
        if draw(st.booleans()):
            args += ["--max-memory", draw(st.sampled_from(BYTES))]
        if draw(st.booleans()):
            args += ["--set", f"d_model={draw(st.sampled_from(NUMBERS))}"]
        if draw(st.booleans()):
            args += ["--tracking-uri", uri()]
    elif command in ("table", "plot"):
        if command == "plot":
            args.append(draw(st.sampled_from(["all", "crossover", "nosuch"])))
        if draw(st.booleans()):
            args += ["--suite", draw(st.sampled_from(SUITES))]
        if command == "table" and draw(st.booleans()):
            args += ["--format", draw(st.sampled_from(["markdown", "csv", "latex", "json"]))]
    elif command == "claims" and draw(st.booleans()):
        args += ["--format", draw(st.sampled_from(["markdown", "csv", "json"]))]
    elif command == "compare" and draw(st.booleans()):
        args += [draw(st.sampled_from(["m", "nosuch", path()]))]
    elif command == "sync":
        args += [draw(st.sampled_from(SUITES)), "--tracking-uri", uri()]
    elif command == "doctor" and draw(st.booleans()):
        env["MLFLOW_TRACKING_URI"] = uri()
    # report and plot draw figures of the rows that survive (seconds each): those folders
    # are test_odd_numbers_drawn's (out-odd)
    folder = str(tmp / draw(st.sampled_from([o for o in OUTS if o != "out-odd"])))
    args += ["--out", folder if command in ("report", "plot") else out()]
    return args, env


class _Hung(Exception):
    """An invocation ran past BOUND_S (raised by SIGALRM in the main thread)."""


def _alarm(_signum: int, _frame: object) -> None:
    raise _Hung


def check(args: list[str], code: int, output: str, seconds: float) -> None:
    """Exit 0, 1 or 2 within the bound; no traceback, no password; an exit 2 says what is
    wrong in one line, in a few lines at most (click's usage lines, a warning)."""
    assert seconds < BOUND_S, (args, seconds)
    assert code in (0, 1, 2), (args, code, output)
    assert "Traceback" not in output and "Aborted" not in output, (args, output)
    assert SECRET not in output and "pw@x" not in output, (args, output)
    if code == 2:
        lines = [x for x in output.strip().splitlines() if x.strip()]
        assert len(lines) <= 4, (args, output)
        assert len([x for x in lines if x.startswith("Error: ")]) == 1, (args, output)


@settings(max_examples=320, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_paths_and_stored_files_fuzzed(data: st.DataObject,
                                       arena: tuple[Path, dict[str, str]],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    args, env = data.draw(invocations(*arena))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(BOUND_S)  # a hang (a FIFO opened, a lock never freed) fails, not blocks
    t0 = time.monotonic()
    try:
        result = CliRunner().invoke(cli, args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not isinstance(result.exception, _Hung), (args, "hung")
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), (args, repr(result.exception))
    check(args, result.exit_code, result.output, time.monotonic() - t0)


def test_a_sample_as_real_processes(arena: tuple[Path, dict[str, str]]) -> None:
    """The real `tvr` (its exit code, stderr apart from stdout), forked pre-imported."""
    tmp, paths = arena
    prestart.run(["--version"], capture_output=True)  # the template's start is not timed
    chosen = [
        ["run", "translation-tiny", "--bitext", paths["loop-self"], "--dry-run"],
        ["--plugin", paths["long"], "suites"],
        ["claims", "--out", str(tmp / "out-abc")],
        ["sync", "quick", "--out", str(tmp / "out-store-loop")],
    ]
    for args in chosen:
        t0 = time.monotonic()
        done = prestart.run(args, capture_output=True, text=True, timeout=BOUND_S * 2,
                            cwd=tmp, env={k: v for k, v in os.environ.items()
                                          if k != "MLFLOW_TRACKING_URI"})
        check(args, done.returncode, done.stdout + done.stderr, time.monotonic() - t0)
        if done.returncode == 2:  # the line on stderr, nothing on stdout
            assert done.stderr.startswith("Error: ") and not done.stdout.strip(), done


def test_odd_numbers_drawn(arena: tuple[Path, dict[str, str]]) -> None:
    """The rows that survive the reading (inf, negative numbers, beside a good row and a bad
    one), through the commands that draw: once each, not fuzzed (seconds each)."""
    tmp, _ = arena
    out = tmp / "out-odd"
    for args in (["report"], ["plot", "all"], ["table", "--suite", "quick"], ["claims"]):
        args = [*args, "--out", str(out)]
        t0 = time.monotonic()
        result = CliRunner().invoke(cli, args)
        if result.exception is not None:
            assert isinstance(result.exception, SystemExit), (args, repr(result.exception))
        check(args, result.exit_code, result.output, time.monotonic() - t0)
        assert result.exit_code == 0 or args[0] == "plot", (args, result.output)
    assert (out / "REPORT.md").is_file() and list((out / "quick").glob("*.png"))
