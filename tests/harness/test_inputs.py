"""Every input checked before it is read, with a bound: each case of an independent probe
that hung, printed a traceback or was accepted though wrong now exits 2 with one line
naming the value, within seconds."""

from __future__ import annotations

import http.server
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.results import append_row, results_path

SUITE = """name = "probe"
[[grid]]
measure = "path"
mixers = ["{mixer}"]
n = {n}
d = {d}
batch = {batch}
seeds = {seeds}
{extra}
"""


def suite_text(mixer: str = "lstm", n: object = 8, d: object = 8, batch: object = 1,
               seeds: object = 0, extra: str = "") -> str:
    return SUITE.format(mixer=mixer, n=n, d=d, batch=batch, seeds=seeds, extra=extra)


@pytest.fixture(scope="module", autouse=True)
def _imported() -> None:
    """The modules a suite file's check imports on first use (torch with them), imported
    before any case is timed: the bound is on the check, not on a cold worker's imports
    (which took over 10 s once while every test worker started at once)."""
    import experiments.suitefile  # noqa: F401
    import harness.cli.points  # noqa: F401
    import harness.train.train_runner  # noqa: F401


def one_line_exit_2(args: list[str], needle: str, bound_s: float = 10.0) -> str:
    t0 = time.monotonic()
    result = CliRunner().invoke(cli, args)
    assert time.monotonic() - t0 < bound_s, args
    assert result.exit_code == 2, (args, result.output, result.exception)
    assert "Traceback" not in result.output, result.output
    lines = one_error_line(result.output)
    assert needle in lines, lines
    return lines


def one_error_line(output: str) -> str:
    """The one line saying what is wrong (click's usage errors add their usage lines)."""
    lines = [x for x in output.strip().splitlines()
             if x.strip() and not x.startswith(("Usage: ", "Try '"))]
    assert len(lines) == 1, output
    return lines[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("dry", [True, False])
def test_a_fifo_or_a_device_as_suite_file_is_refused_at_once(tmp_path: Path, fifo: Path,
                                                             dry: bool) -> None:
    flags = ["--dry-run"] if dry else ["--tracking-uri", "none"]
    for path, what in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                       ("/proc/self/status", "not a regular file")):
        one_line_exit_2(["run", "--suite-file", str(path), "--out", str(tmp_path), *flags],
                        what, bound_s=5)


def test_a_fifo_or_a_device_as_corpus_is_refused_at_once(tmp_path: Path, fifo: Path) -> None:
    for path, what in ((fifo, f"{fifo}: a FIFO, not a regular file"),
                       ("/dev/zero", "/dev/zero: a device, not a regular file"),
                       ("/proc/self/status", "/status: a file of a virtual file system")):
        one_line_exit_2(["run", "translation-tiny", "--bitext", str(path), "--dry-run"],
                        what, bound_s=5)
    one_line_exit_2(["run", "convergence-smoke", "--corpus", str(fifo), "--dry-run"],
                    "--corpus", bound_s=5)


def test_a_corpus_whose_held_out_pairs_all_occur_in_train_is_refused(tmp_path: Path) -> None:
    lines = [f"mawu {i}\tword {i}" for i in range(20)]
    (tmp_path / "c.tsv").write_text("\n".join(lines + lines[:4]) + "\n")  # dev/test = repeats
    one_line_exit_2(["run", "translation-tiny", "--bitext", str(tmp_path / "c.tsv"),
                     "--dry-run"], "has its target in train as well")


@pytest.mark.parametrize("text, needle", [
    ("a = " + "[" * 2000 + "]" * 2000, "nested deeper than"),
    ("name = 'x'\ndescription = 'y'\n[config.lstm]\nk = " + "[" * 20 + "1" + "]" * 20,
     "nested deeper than 8 levels"),
    (suite_text(d=2**62), "grid.d: 4,611,686,018,427,387,904 is outside [1, 65,536]"),
    (suite_text(n=10**9), "grid.n: 1,000,000,000 is outside [1, 1,048,576]"),
    (suite_text(batch=[1, 2**40]), "grid.batch: 1,099,511,627,776 is outside [1, 65,536]"),
    (suite_text(seeds=2**63 - 1), "grid.seeds"),
    (suite_text(mixer="restricted-attention", extra="config = { window = 9999999999 }"),
     "grid.config.window: 9,999,999,999 is outside"),
    (suite_text(extra="config = { dropout = inf }"), "is not a finite number"),
    (suite_text().replace('"probe"', '"' + "a" * 300 + '"'), "at most 100"),
    ("x" * (2 << 20), "at most 1,048,576"),
    ('name = "p"\n[[grid]]\nmeasure = "attn-init"\nmodels = ["transformer"]\nseq_len = 16\n'
     'd_model = 16\nbatch_size = 2\n[grid.train]\ntask = "no-such-task"\n',
     "[grid.train]: unknown task 'no-such-task'"),  # a probe's task, before any point runs
])
def test_suite_files_beyond_what_a_machine_runs_are_refused_naming_the_bound(
        tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    line = one_line_exit_2(["run", "--suite-file", str(path), "--dry-run"], needle)
    assert len(line) < 400


@pytest.mark.parametrize("uri, needle", [
    ("sqlite:///tmp/a\0b.db", "NUL byte"),
    ("sqlite:///" + "d/" * 2500 + "x.db", "at most 4,096"),
    ("sqlite:///tmp/" + "x" * 300 + ".db", "a file system takes at most 255"),
    ("sqlite:///tmp/\udcffx.db", "not UTF-8"),
    ("sqlite:///tmp/a%00b.db", "NUL byte"),
    ("sqlite:relative.db", "three slashes"),
    ("sqlite:///x.db?mode=ro", "read-only store"),
    ("sqlite:////proc/mlflow.db", "virtual file system"),
])
def test_malformed_sqlite_uris_are_refused(tmp_path: Path, uri: str, needle: str) -> None:
    one_line_exit_2(["run", "smoke", "--out", str(tmp_path), "--tracking-uri", uri], needle)
    assert not any(tmp_path.glob("sqlite*")) and not Path("sqlite%3Arelative.db").exists()


def test_nul_or_undecodable_paths_are_refused(tmp_path: Path) -> None:
    one_line_exit_2(["run", "smoke", "--out", f"{tmp_path}/a\0b"], "NUL byte")
    one_line_exit_2(["run", "smoke", "--out", f"{tmp_path}/\udcff"], "not UTF-8")
    one_line_exit_2(["run", "--suite-file", f"{tmp_path}/a\0b.toml", "--dry-run"],
                    "NUL byte")
    one_line_exit_2(["run", "translation-tiny", "--bitext", "a\0b", "--dry-run"], "NUL")


ROW = {"suite": "s", "point_id": "p", "status": "ok", "device": "cpu", "machine": "m",
       "runner": "layer", "mixer": "lstm", "seq_len": 8, "d_model": 8, "batch_size": 1,
       "seed": 0, "dtype": "float32"}


@pytest.mark.parametrize("damage, needle", [
    (lambda t: t.rstrip("\n") + ",x,y,z\n", "more fields than the header"),
    (lambda t: t + t.splitlines()[1][:20], "cut short"),
])
@pytest.mark.parametrize("command", ["table", "run"])
def test_a_damaged_results_file_is_bad_input_naming_its_line(
        tmp_path: Path, damage, needle: str, command: str) -> None:
    path = results_path(tmp_path, "smoke")
    append_row(path, {**ROW, "suite": "smoke"})
    path.write_text(damage(path.read_text()))
    args = ["table", "--suite", "smoke"] if command == "table" else \
        ["run", "smoke", "--tracking-uri", "none", "--min-run-time", "0.01"]
    line = one_line_exit_2([*args, "--out", str(tmp_path)], needle)
    assert str(path) in line


@pytest.mark.parametrize("damage, needle", [
    (lambda t: t.replace(",8,8,1,", ",1e309,8,1,", 1), "column seq_len: 'inf' is not a whole"),
    (lambda t: t.replace(",ok,", ",maybe,"), "status 'maybe' is not one of"),
    (lambda t: t.replace(",8,8,1,", ",8,8,1,", 1).rstrip("\n") + "\n" +
     t.splitlines()[1].replace(",p,", ",q,").replace(",7.5", ",abc") + "\n",
     "column ms: 'abc' is not a number"),
])
@pytest.mark.slow
@pytest.mark.parametrize("command", ["table", "run"])
def test_a_bad_cell_skips_its_row_naming_file_and_line(
        tmp_path: Path, damage, needle: str, command: str) -> None:
    """Every command reads on: the row is said (file, line, column) and skipped; a sweep
    keeps it in the file as it is."""
    path = results_path(tmp_path, "smoke")
    append_row(path, {**ROW, "suite": "smoke", "ms": 7.5})
    path.write_text(damage(path.read_text()))
    bad = [x for x in path.read_text().splitlines() if "1e309" in x or "maybe" in x or "abc" in x]
    args = ["table", "--suite", "smoke"] if command == "table" else \
        ["run", "smoke", "--tracking-uri", "none", "--min-run-time", "0.01"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path)])
    assert result.exit_code in (0, 2) and "Traceback" not in result.output, result.output
    warnings = [x for x in result.output.splitlines() if x.startswith(f"warning: {path}")]
    assert len(warnings) == 1 and f"{path}: 1 row(s)" in warnings[0], result.output
    assert needle in warnings[0] and f"line {2 if 'abc' not in needle else 3}" in warnings[0]
    if command == "run":
        kept = bad[0].rstrip(",")  # the row as it was, its cells now followed by new columns
        assert result.exit_code == 0 and any(x.startswith(kept) for x in
                                             path.read_text().splitlines())


@pytest.mark.parametrize("command", [["table", "--suite", "quick"], ["claims"], ["report"]])
def test_a_metric_of_text_alone_in_its_column_skips_its_row(tmp_path: Path,
                                                            command: list[str]) -> None:
    """A one-row file with fwd_ms=abc: the column holds no number at all, but its name says
    it is a metric (harness.schema): the row is skipped and said, not summed into a
    TypeError."""
    reference = Path(__file__).resolve().parents[2] / "results" / "quick" / "results.csv"
    head, row = reference.read_text().splitlines()[:2]
    cells = dict(zip(head.split(","), row.split(","), strict=True)) | {"fwd_ms": "abc"}
    path = results_path(tmp_path, "quick")
    path.parent.mkdir()
    path.write_text(f"{head}\n{','.join(cells.values())}\n")
    result = CliRunner().invoke(cli, [*command, "--out", str(tmp_path)])
    assert result.exit_code in (0, 2) and "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    warnings = [x for x in result.output.splitlines() if x.startswith(f"warning: {path}")]
    assert warnings == [f"warning: {path}: 1 row(s) with a bad cell skipped: line 2 (column "
                        "fwd_ms: 'abc' is not a number); fix or remove them"], result.output


@pytest.fixture
def http_service() -> Iterator[int]:
    """An HTTP/1 server: something, but not Ray, listens."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            """Not on the test's stderr."""

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent_service() -> Iterator[int]:
    """A listener that accepts and never says a word (a stuck or foreign service)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("service", ["http_service", "silent_service"])
@pytest.mark.parametrize("where", ["--ray-address", "$RAY_ADDRESS"])
def test_a_foreign_service_as_ray_address_is_refused_within_10_s(
        request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        service: str, where: str) -> None:
    pytest.importorskip("ray")
    address = f"127.0.0.1:{request.getfixturevalue(service)}"
    args = ["--ray-address", address] if where == "--ray-address" else []
    if not args:
        monkeypatch.setenv("RAY_ADDRESS", address)
    one_line_exit_2(["run", "smoke", "--out", str(tmp_path), "--tracking-uri", "none",
                     "--executor", "ray", *args], f"{where} {address}: something listens "
                    "there but it is not Ray")
    assert not results_path(tmp_path, "smoke").exists()


@pytest.mark.slow
def test_postgresql_that_cannot_be_reached_is_said_within_10_s(silent_service: int,
                                                               tmp_path: Path) -> None:
    """A server that accepts and never answers, a Unix socket that is not there: each is one
    line in seconds (MLflow's own engine waited about two minutes)."""
    pytest.importorskip("psycopg")
    from harness.track import store

    for uri in (f"postgresql+psycopg://alice:s3cr%40t@127.0.0.1:{silent_service}/mlflow",
                f"postgresql+psycopg://alice:s3cr%40t@/mlflow?host={tmp_path}"):
        t0 = time.monotonic()
        reason = store.problem(uri)
        assert time.monotonic() - t0 < 10, uri
        assert reason is not None and "cannot connect" in reason and "s3cr" not in reason
        assert len(reason.splitlines()) == 1
