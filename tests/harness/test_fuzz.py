"""A hypothesis-driven fuzz of the command line: whatever the arguments, `tvr` exits 0 or 2
with no traceback within a bound, and a run that measures leaves one row per point."""

from __future__ import annotations

import os
import time
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

NUMBERS = ["0.01", "0.05", "nan", "inf", "-inf", "1e308", "-1", "0", "abc", "", "1e-9",
           "60", "61", "0x10", "1_000"]
BYTES = ["1", "8GiB", "512MB", "0", "-5", "1" * 400, "nan", "1.5G", "GiB", "1e9", "9" * 20]
OUTS = ["", "a%20b", "q?x=1", "with space", "hash#1", "../escape", "deep/er/dir", "-", "."]
URIS = ["none", "sqlite://", "sqlite:///:memory:", "http://127.0.0.1:abc", "ftp://x",
        "postgresql+nosuch://h/db", "file:///tmp/x", "http://[::1:5000", "garbage", "NONE"]
WORDS = ["smoke", "quick", "table1", "bench", "convergence-smoke", "nosuch", "", "lstm",
         "gru", "self-attention", "--help", "-1", "all"]


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
                                    "suites", "models", "sync", "doctor"]))
    args = [command]
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
    folder = tmp_path_factory.mktemp("fuzz")
    os.chdir(folder)  # the default --out (results) must not be the repository's
    yield folder
    os.chdir(cwd)
    experiments.SUITES["smoke"] = real


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
