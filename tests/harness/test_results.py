"""results.py: atomic appends, column union and order, resume set, loading many suites."""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from harness import machines, results
from harness.errors import BadInput
from harness.files import write_atomic
from harness.results import (
    ID_COLUMNS,
    TAIL_COLUMNS,
    append_row,
    done_points,
    load_results,
    read_results,
    results_path,
)


def _row(point_id: str, status: str = "ok", suite: str = "smoke", **metrics: object) -> dict:
    return {"suite": suite, "point_id": point_id, "mixer": "lstm", "seq_len": 64,
            "d_model": 32, "batch_size": 2, "device": "cpu", "dtype": "float32", "seed": 0,
            "status": status, "machine": "m1", "torch_version": "2.x", "host": "h",
            **metrics}


def test_results_path(tmp_path: Path) -> None:
    assert results_path(tmp_path, "quick") == tmp_path / "quick" / "results.csv"


def test_append_creates_dirs_and_orders_columns(tmp_path: Path) -> None:
    path = results_path(tmp_path / "deep" / "out", "smoke")
    append_row(path, {"host": "h", "fwd_ms": 1.5, **_row("a")})
    append_row(path, _row("b", bwd_ms=2.0, fwd_ms=3.25, message="x, \"quoted\"\nline"))
    frame = read_results(path)
    assert list(frame.columns) == [*ID_COLUMNS, "fwd_ms", "bwd_ms", *TAIL_COLUMNS]
    assert frame["point_id"].tolist() == ["a", "b"]
    assert frame["fwd_ms"].tolist() == [1.5, 3.25]
    assert pd.isna(frame.loc[0, "bwd_ms"]) and frame.loc[1, "bwd_ms"] == 2.0
    assert frame["message"].tolist() == ["", "x, \"quoted\"\nline"]
    assert frame["seq_len"].dtype.kind == "i"


def test_append_keeps_old_rows_verbatim(tmp_path: Path) -> None:
    path = results_path(tmp_path, "smoke")
    append_row(path, _row("007", fwd_ms=0.1 + 0.2))
    first = list(csv.DictReader(path.open()))
    append_row(path, _row("008", flops=1e12))
    second = list(csv.DictReader(path.open()))
    assert second[0]["point_id"] == "007"  # the id stays text, not the number 7
    assert second[0]["fwd_ms"] == "0.30000000000000004"  # floats survive every rewrite
    assert {k: second[0][k] for k in first[0]} == first[0]
    assert second[0]["flops"] == "" and second[1]["flops"] == "1000000000000.0"
    assert done_points(path, "cpu", "m1") == {"007", "008"}


def test_rerun_point_replaces_its_row(tmp_path: Path) -> None:
    path = results_path(tmp_path, "smoke")
    append_row(path, _row("a", status="error", message="boom"))
    append_row(path, _row("b"))
    append_row(path, _row("a", fwd_ms=1.0))
    frame = read_results(path)
    assert frame["point_id"].tolist() == ["b", "a"]
    assert frame["status"].tolist() == ["ok", "ok"]


def test_append_rejects_rows_without_identity(tmp_path: Path) -> None:
    path = results_path(tmp_path, "smoke")
    with pytest.raises(ValueError, match="point_id"):
        append_row(path, {"suite": "smoke", "status": "ok"})
    with pytest.raises(ValueError, match="status"):
        append_row(path, _row("a", status="fine"))
    assert not path.exists()


def test_crash_during_replace_keeps_old_file(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = results_path(tmp_path, "smoke")
    append_row(path, _row("a", fwd_ms=1.0))
    append_row(path, _row("b", fwd_ms=2.0))
    before = path.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError("disk pulled out mid-write")

    monkeypatch.setattr(results.os, "replace", crash)
    with pytest.raises(OSError, match="mid-write"):
        append_row(path, _row("c", fwd_ms=3.0, extra=1))
    assert path.read_bytes() == before
    assert read_results(path)["point_id"].tolist() == ["a", "b"]
    left = sorted(f for f in os.listdir(path.parent) if not f.endswith(".lock"))
    assert left == ["results.csv"]  # no temp file left behind


def test_crash_during_write_leaves_no_file(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(fd: int) -> None:
        raise OSError("fsync failed")

    monkeypatch.setattr(results.os, "fsync", crash)
    with pytest.raises(OSError, match="fsync"):
        write_atomic(tmp_path / "t" / "report.md", "# hello\n")
    assert os.listdir(tmp_path / "t") == []


def test_write_atomic_text_bytes_and_mode(tmp_path: Path) -> None:
    write_atomic(tmp_path / "a.md", "héllo\n")
    write_atomic(tmp_path / "a.png", b"\x89PNG")
    assert (tmp_path / "a.md").read_text(encoding="utf-8") == "héllo\n"
    assert (tmp_path / "a.png").read_bytes() == b"\x89PNG"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a.md").stat().st_mode & 0o777 == 0o666 & ~umask


def test_done_points_are_final_results(tmp_path: Path) -> None:
    path = results_path(tmp_path, "smoke")
    assert done_points(path, "cpu", "m1") == set()
    for pid, status in [("a", "ok"), ("b", "oom"), ("c", "error"), ("d", "skipped"), ("e", "ok"),
                        ("f", "diverged")]:
        append_row(path, _row(pid, status=status))
    assert done_points(path, "cpu", "m1") == {"a", "e", "f"}


def test_done_points_of_another_device_do_not_count(tmp_path: Path) -> None:
    path = results_path(tmp_path, "smoke")
    append_row(path, _row("a", status="ok", device="cpu"))
    append_row(path, _row("b", status="ok", device="cuda"))
    assert done_points(path, "cuda", "m1") == {"b"} and done_points(path, "cpu", "m1") == {"a"}


def test_two_machines_rows_live_side_by_side(tmp_path: Path) -> None:
    """Another machine's row of the same point is neither replaced nor counted as done here;
    tables read one machine: this one where it has rows, else the one with the most rows."""
    path = results_path(tmp_path, "smoke")
    append_row(path, _row("a", fwd_ms=1.0, machine="reference"))
    append_row(path, _row("b", fwd_ms=2.0, machine="reference"))
    append_row(path, _row("a", fwd_ms=3.0, machine="mine"))
    append_row(path, _row("a", fwd_ms=4.0, machine="mine"))  # a rerun replaces only its own
    frame = read_results(path)
    assert sorted(zip(frame["machine"], frame["fwd_ms"], strict=True)) == [
        ("mine", 4.0), ("reference", 1.0), ("reference", 2.0)]
    assert done_points(path, "cpu", "mine") == {"a"}
    assert done_points(path, "cpu", "reference") == {"a", "b"}
    assert set(machines.one_machine(frame, "mine")["machine"]) == {"mine"}
    assert set(machines.one_machine(frame, "new")["machine"]) == {"reference"}
    assert len(load_results(tmp_path, machine="all")) == 3


def test_this_machine_is_named_by_env_or_a_kept_tag(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(machines.MACHINE_ENV, "lab-gpu-3")
    assert machines.this_machine() == "lab-gpu-3"
    monkeypatch.delenv(machines.MACHINE_ENV)
    monkeypatch.setattr(machines, "_MACHINE_FILE", tmp_path / "machine-id")
    monkeypatch.setattr(machines, "_machine_tag", None)
    first = machines.this_machine()
    assert first == machines.this_machine()  # one name per process
    monkeypatch.setattr(machines, "_machine_tag", None)
    assert machines.this_machine() == first  # and the tag is kept for the next one
    (tmp_path / "machine-id").unlink()
    monkeypatch.setattr(machines, "_machine_tag", None)
    assert machines.this_machine() != first  # a new home is a new machine


def test_an_empty_tag_file_is_replaced_once_and_then_kept(tmp_path: Path) -> None:
    """A run killed between creating machine-id and writing it left it empty: the next
    draws a tag into it, and every run after reads that one."""
    path = tmp_path / "machine-id"
    path.write_text("")
    tag = machines._kept_tag(path)
    assert len(tag) == 6 and path.read_text().strip() == tag
    assert machines._kept_tag(path) == tag
    assert not list(tmp_path.glob("*.tmp"))  # no draft left


@pytest.mark.parametrize("legacy_empty", [False, True])
def test_first_runs_started_together_agree_on_one_tag(tmp_path: Path, legacy_empty) -> None:
    """Six processes, forked and released at one moment (each waits for the end of one pipe),
    each draw the tag of one new machine-id file, or of an empty one a killed run left: one
    writes it under a lock, the rest read it. Each child's draw takes a little longer than
    the one before (0.05 s apart), so without the lock and the second read under it the
    first to draw would keep its own tag while later ones write theirs. (Spawned processes
    spent seconds importing, and so started one after another.)"""
    path, start_read, start_write, children = tmp_path / "machine-id", *os.pipe(), []
    if legacy_empty:
        path.write_text("")
    for index in range(6):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: wait for the start, draw, say the tag, end without pytest
            code = 1
            try:
                os.close(start_write)
                machines.secrets.token_hex = lambda n, i=index: (  # this child's own tag, late
                    time.sleep(0.05 * i), f"{os.getpid():06x}"[-2 * n:])[1]
                os.read(start_read, 1)
                os.write(write, machines._kept_tag(path).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        children.append((pid, read))
    os.close(start_write)  # every child reads the end of the pipe at once
    os.close(start_read)
    tags = []
    for pid, read in children:
        with os.fdopen(read) as said:
            tags.append(said.read())
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert len(set(tags)) == 1 and tags[0] and path.read_text().strip() == tags[0]


def test_files_of_older_versions_read_under_todays_names(tmp_path: Path) -> None:
    path = results_path(tmp_path, "old")
    path.parent.mkdir()
    path.write_text("suite,point_id,mixer,model,device,status,measure,role,vocab,dilated,host\n"
                    "old,p,lstm,,cpu,ok,path,path,,False,vm\n"
                    "old,q,,gru-lm,cpu,ok,train,heads,16,,vm\n")
    frame = read_results(path)
    assert frame["runner"].tolist() == ["path", "train"]
    assert frame["fit"].fillna("").tolist() == ["path", ""]
    assert frame["study"].fillna("").tolist() == ["", "heads"]
    assert "alphabet_size" in frame and "dilation_growth" in frame and "role" not in frame
    assert frame["machine"].tolist() == ["vm", "vm"]


def test_read_missing_is_empty_with_columns(tmp_path: Path) -> None:
    frame = read_results(tmp_path / "nope" / "results.csv")
    assert frame.empty
    assert list(frame.columns)[: len(ID_COLUMNS)] == ID_COLUMNS


def test_unreadable_file_is_bad_input_and_untouched(tmp_path: Path) -> None:
    path = results_path(tmp_path, "smoke")
    path.parent.mkdir()
    path.write_text("not,a\nresults,file\n")
    with pytest.raises(BadInput, match="not a results file"):
        append_row(path, _row("a"))
    with pytest.raises(BadInput, match=str(path)):
        read_results(path)
    assert path.read_text() == "not,a\nresults,file\n"


def test_load_results_two_suites(tmp_path: Path) -> None:
    append_row(results_path(tmp_path, "smoke"), _row("s1", fwd_ms=1.0))
    append_row(results_path(tmp_path, "quick"), _row("q1", suite="quick", flops=10.0))
    append_row(results_path(tmp_path, "quick"), _row("q2", suite="quick", flops=20.0))
    (tmp_path / "figures").mkdir()  # other folders under out/ are not suites
    frame = load_results(tmp_path)
    assert sorted(frame["point_id"]) == ["q1", "q2", "s1"]
    assert list(frame.columns) == [*ID_COLUMNS, "flops", "fwd_ms", *TAIL_COLUMNS]
    only = load_results(tmp_path, ["smoke"])
    assert only["suite"].tolist() == ["smoke"]


def test_load_results_names_missing_suites(tmp_path: Path) -> None:
    append_row(results_path(tmp_path, "smoke"), _row("s1"))
    with pytest.raises(BadInput) as err:
        load_results(tmp_path, ["smoke", "complexity", "quick"])
    msg = str(err.value)
    assert "complexity, quick" in msg
    assert f"`tvr run complexity --out {tmp_path}`" in msg and "`tvr run smoke" not in msg
    with pytest.raises(BadInput, match="tvr run SUITE"):
        load_results(tmp_path / "empty")


def test_frozen_results_parse_a_file_once_hand_out_copies_and_see_a_change(
        tmp_path: Path, monkeypatch) -> None:
    """Within frozen_results() a results file is parsed once per version of it, each read a
    copy a caller may change; outside it, every read parses."""
    path = results_path(tmp_path, "smoke")
    append_row(path, _row("a"))
    parsed: list[Path] = []
    real = results._read_results
    monkeypatch.setattr(results, "_read_results", lambda p: parsed.append(p) or real(p))
    with results.frozen_results():
        first = read_results(path)
        first["point_id"] = "changed"
        assert read_results(path)["point_id"].tolist() == ["a"] and len(parsed) == 1
        append_row(path, _row("b"))  # another version of the file is read again
        assert read_results(path)["point_id"].tolist() == ["a", "b"] and len(parsed) == 2
    read_results(path), read_results(path)
    assert len(parsed) == 4


def test_the_ledger_is_built_once_per_report_and_read_for_every_subset(tmp_path, monkeypatch):
    """`tvr report --docs` asks for the ledger, whole or in part, several times: within
    frozen_results() it is built once and a subset is the whole one's rows, in the order
    asked; outside it, each call builds its own."""
    from harness.report import claims

    built: list[int] = []
    real = claims._ledger
    monkeypatch.setattr(claims, "_ledger",
                        lambda out, cs, progress: built.append(len(cs)) or real(out, cs, progress))
    everyone = claims.all_claims()
    some = [everyone[3], everyone[0]]
    with results.frozen_results():
        whole = claims.ledger(tmp_path)
        part = claims.ledger(tmp_path, some)
        assert claims.ledger(tmp_path).equals(whole)
    assert built == [len(everyone)]
    assert part["key"].tolist() == [some[0].key, some[1].key]
    assert part.equals(whole.set_index("key", drop=False).loc[part["key"]]
                       .reset_index(drop=True))
    assert claims.ledger(tmp_path, some).equals(part)
    assert built == [len(everyone), 2]
