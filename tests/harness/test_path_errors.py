"""A path the system refuses is one line and exit 2, never a traceback: a link loop (one
link to itself, two to each other), a name over 255 bytes, a path under a file, a results
folder or store that cannot be read or written. Permissions: the tests run as root, whom
permission bits do not stop, so the real ones are checked in a forked child that entered a
user namespace of its own (there root's files are another user's and the bits hold; skipped
where the system allows no such namespace), and the handler for a PermissionError no check
foresaw in process, raised by a patched pandas.read_csv."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.errors import BadInput
from harness.inputs import path_error
from harness.results import append_row, results_path

ROW = {"suite": "smoke", "point_id": "p", "runner": "layer", "mixer": "lstm", "seq_len": 8,
       "d_model": 8, "batch_size": 1, "device": "cpu", "dtype": "float32", "seed": 0,
       "status": "ok", "machine": "m", "ms": 7.5}


def one_line_exit_2(args: list[str], *needles: str) -> str:
    """The command exits 2 with one line (click's usage lines aside) holding every needle."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (args, result.output, result.exception)
    assert "Traceback" not in result.output, result.output
    lines = [x for x in result.output.strip().splitlines()
             if x.strip() and not x.startswith(("Usage: ", "Try '"))]
    assert len(lines) == 1, result.output
    assert all(n in lines[0] for n in needles), (needles, lines[0])
    return lines[0]


def _commands(path: str, results: Path) -> dict[str, list[str]]:
    """Each option that takes a path, given `path`."""
    return {
        "--bitext": ["run", "translation-tiny", "--bitext", path, "--dry-run"],
        "--corpus": ["run", "smoke", "--corpus", path, "--dry-run"],
        "--suite-file": ["run", "--suite-file", path, "--dry-run"],
        "--out of run": ["run", "smoke", "--dry-run", "--out", path],
        "--out of table": ["table", "--out", path],
        "--out of doctor": ["doctor", "--out", path],
        "--plugin": ["--plugin", path, "suites"],
        "--tracking-uri": ["sync", "smoke", "--out", str(results), "--tracking-uri",
                           f"sqlite:///{path}"],
        "a store under it": ["sync", "smoke", "--out", str(results), "--tracking-uri",
                             f"sqlite:///{path}/mlflow.db"],
    }


OPTIONS = list(_commands("x", Path("r")))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    for suite in ("smoke", "quick"):  # quick: what the claims read
        append_row(results_path(out, suite), {**ROW, "suite": suite})
    return out


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("links", ["self", "pair"])
def test_a_link_loop_is_one_line(tmp_path: Path, results: Path, option: str,
                                 links: str) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to("loop" if links == "self" else "other")
    if links == "pair":
        (tmp_path / "other").symlink_to("loop")
    one_line_exit_2(_commands(str(loop), results)[option], str(loop), "symbolic links")


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("name", ["n" * 300, "é" * 130])  # 300 and 260 bytes
def test_a_name_over_255_bytes_is_one_line(tmp_path: Path, results: Path, option: str,
                                           name: str) -> None:
    size = len(name.encode())
    one_line_exit_2(_commands(str(tmp_path / name), results)[option],
                    f"a name of {size} bytes")


@pytest.mark.parametrize("option", [o for o in OPTIONS if o != "--out of run"])
def test_a_path_under_a_file_is_one_line(tmp_path: Path, results: Path, option: str) -> None:
    """NotADirectoryError: no such path, said by each option's own check (a dry run writes
    nothing to --out: it is not one of them)."""
    (tmp_path / "file").write_text("a file\n")
    under = tmp_path / "file" / "x"
    one_line_exit_2(_commands(str(under), results)[option], str(under))


def test_a_store_that_is_a_link_loop_is_one_line(results: Path) -> None:
    (results / "mlflow.db").symlink_to("mlflow.db")
    for args in (["doctor"], ["sync", "smoke"]):
        one_line_exit_2([*args, "--out", str(results)], str(results / "mlflow.db"),
                        "symbolic links")


def test_a_suite_name_over_255_bytes_is_one_line(results: Path) -> None:
    """The suite names a folder under --out: a long one fails in the system's lookup, which
    the top-level command turns into one line."""
    one_line_exit_2(["table", "--suite", "n" * 300, "--out", str(results)], "too long")


# ---------------------------------------------------------------- permissions, for real

CLONE_NEWUSER = 0x10000000


def _as_another_user(calls: list[list[str]]) -> list[tuple[int, str]]:
    """Each `tvr ARGS` invoked in process by a forked child that entered a new user
    namespace (where this root is nobody to the files outside it): (exit code, output)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWUSER) != 0:
                answer = {"skip": os.strerror(ctypes.get_errno())}
            else:
                answer = {"results": []}
                for args in calls:
                    result = CliRunner().invoke(cli, args)
                    answer["results"].append((result.exit_code, result.output))
            with os.fdopen(write, "w") as f:
                json.dump(answer, f)
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    with os.fdopen(read, "rb") as f:
        while select.select([f], [], [], 60)[0]:
            chunk = os.read(f.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert chunks, "the child said nothing within 60 s"
    answer = json.loads(b"".join(chunks))
    if "skip" in answer:
        pytest.skip(f"no user namespace here: {answer['skip']}")
    return [tuple(r) for r in answer["results"]]


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user may enter (pytest's tmp_path is root's alone: 0700 above it)."""
    folder = Path(tempfile.mkdtemp(prefix="tvr-perm-"))
    folder.chmod(0o777)
    yield folder
    for root, dirs, _ in os.walk(folder):  # folders of mode 000 or 555 block rmtree
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    shutil.rmtree(folder)


def _results(folder: Path) -> Path:
    """Rows of smoke and quick (which the claims read), writable by all."""
    for suite in ("smoke", "quick"):
        append_row(results_path(folder, suite), {**ROW, "suite": suite})
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    return folder


def test_unreadable_and_read_only_results_and_stores(shared: Path) -> None:
    readable = _results(shared / "readable")
    unreadable = _results(shared / "unreadable")
    for suite in ("smoke", "quick"):
        (unreadable / suite).chmod(0o000)
    read_only = _results(shared / "read-only")
    (read_only / "smoke").chmod(0o555)
    store = _results(shared / "store")
    (store / "mlflow.db").write_text("")
    (store / "mlflow.db").chmod(0o000)
    store.chmod(0o555)
    smoke = ["run", "smoke", "--only", "lstm", "--tracking-uri", "none", "--no-resume"]
    calls = {
        "control": ["run", "smoke", "--dry-run", "--out", str(readable)],
        "table": ["table", "--suite", "smoke", "--out", str(unreadable)],
        "claims": ["claims", "--out", str(unreadable)],
        "report": ["report", "--out", str(unreadable)],
        "dry run": ["run", "smoke", "--dry-run", "--out", str(unreadable)],
        "run unreadable": [*smoke, "--out", str(unreadable)],
        "run read-only": [*smoke, "--out", str(read_only)],  # said before measuring
        "doctor": ["doctor", "--out", str(store)],
        "sync": ["sync", "smoke", "--out", str(store)],
    }
    answers = dict(zip(calls, _as_another_user(list(calls.values())), strict=True))
    code, output = answers.pop("control")
    assert code == 0 and str(readable) in output, output  # read there: permissions refuse
    for name, (code, output) in answers.items():
        assert code == 2 and "Traceback" not in output, (name, output)
        lines = [x for x in output.strip().splitlines() if x.startswith("Error: ")]
        assert len(lines) == 1, (name, output)
        assert "Permission denied" in lines[0] or "not writable" in lines[0], (name, output)
        assert str(shared) in lines[0], (name, output)
    code, output = answers["run read-only"]  # said before any point is measured: no bar
    assert output.strip() == (f"Error: results folder {read_only / 'smoke'}: cannot write "
                              "there (Permission denied)"), output


def test_a_permission_error_no_check_foresaw_is_one_line(results: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated (in process): pandas.read_csv raises what an unreadable file raises."""
    import pandas as pd

    real = pd.read_csv

    def refused(path, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if str(path).endswith("results.csv"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", refused)
    for args in (["table", "--suite", "smoke"], ["claims"], ["report"], ["compare"]):
        one_line_exit_2([*args, "--out", str(results)], f"{results}/", "/results.csv: "
                        "Permission denied; check its permissions")


def test_path_error_words() -> None:
    """Each kind of refusal: the path, the system's words and what to do."""
    cases = {errno.EROFS: "choose a writable place", errno.EPERM: "chattr",
             errno.EACCES: "permissions", errno.ELOOP: "symbolic links"}
    for code, needle in cases.items():
        exc = OSError(code, os.strerror(code), "/data/x\udcff")
        line = str(path_error(exc, "--out"))
        assert line.startswith("--out /data/x\\udcff: ") and needle in line, line
        assert isinstance(path_error(exc), BadInput)
    renamed = str(path_error(OSError(errno.EACCES, "Permission denied", "/a", None, "/b")))
    assert renamed.startswith("/a -> /b: Permission denied"), renamed


def test_commands_started_together_on_one_out_do_not_race_on_the_write_probe(tmp_path) -> None:
    """`tvr tune --only a` and `--only b` started at once check the same --out: each
    probe is its own file, so neither sees the other's vanish (a shared name did)."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.cli.common import output_folder

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: output_folder(str(tmp_path / "out")), range(400)))
    assert set(got) == {tmp_path / "out"} and not list((tmp_path / "out").iterdir())
