"""Superseded rows move to an archive no table reads: a trained point whose recipe a later one
of its search replaced leaves the suite's file (with its curves), every other row stays as
written, and what the tables read is the same before and after."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.report.superseded import archive, archive_path, archived, restore, superseded
from harness.report.translation import trained_runs
from harness.results import (
    append_row,
    append_series,
    load_results,
    read_results,
    read_series,
    results_path,
    series_path,
)
from harness.variants import stored_names

SUITE = "tuned"


def _row(model: str, seed: int, lr: float, when: str, machine: str = "box", status: str = "ok",
         recipe: str = "search", alpha: str = "") -> dict:
    pid = f"translate-{model}-peak_lr={lr}-recipe={recipe}{alpha}-s{seed}"
    return {"suite": SUITE, "point_id": pid, "runner": "translate", "model": model,
            "seed": seed, "device": "cpu", "machine": machine, "status": status,
            "peak_lr": lr, "recipe": recipe, "test_bleu": 10.0 + seed, "measured_at": when,
            "test_hypotheses": f"hypotheses/{model}-s{seed}-{lr}-{machine}.test.txt"}


def _suite(out: Path) -> list[dict]:
    rows = [
        _row("transformer", 0, 0.003, "2026-01-01"),  # recipe A, then the search moved on
        _row("transformer", 1, 0.003, "2026-01-02", status="error"),  # unfinished: stays
        _row("gru-attention", 0, 0.001, "2026-01-03"),
        _row("transformer", 0, 0.0008, "2026-01-04"),  # recipe B: what the tables read
        _row("transformer", 1, 0.0008, "2026-01-05"),
        _row("transformer", 0, 0.0008, "2026-01-06", alpha="-alphas=0.6"),  # options only
        _row("transformer", 0, 0.003, "2026-01-01", machine="other"),  # its last recipe: A
        _row("transformer", 0, 0.001, "2026-01-07", recipe=""),  # a recipe of no search
        {"suite": SUITE, "point_id": "constant-s0", "runner": "constant", "model": "constant",
         "seed": 0, "device": "cpu", "machine": "box", "status": "ok", "test_bleu": 1.0,
         "measured_at": "2026-01-08"},
    ]
    for row in rows:
        append_row(results_path(out, SUITE), row)
        if "test_hypotheses" in row:
            (out / SUITE / "hypotheses").mkdir(parents=True, exist_ok=True)
            (out / SUITE / row["test_hypotheses"]).write_text(row["point_id"])
        append_series(series_path(out, SUITE), row["point_id"],
                      {"dev_bleu_greedy": [(1, 1.0), (2, 2.0)]}, row["machine"])
    return rows


def test_the_older_recipe_moves_to_the_archive_and_the_tables_read_the_same(tmp_path):
    rows = _suite(tmp_path)
    path = results_path(tmp_path, SUITE)
    before = path.read_text().splitlines()
    tables = trained_runs(load_results(tmp_path, [SUITE])).reset_index(drop=True)
    old = rows[0]["point_id"]
    assert list(superseded(read_results(path))["point_id"]) == [old]

    moved = archive(tmp_path, SUITE)
    assert list(moved["point_id"]) == [old] and list(moved["machine"]) == ["box"]
    after = path.read_text().splitlines()
    assert len(after) == len(before) - 1 and set(after) < set(before)  # rows as written
    kept = read_results(path)
    assert ((kept["point_id"] == old) & (kept["machine"] == "other")).any()  # its last
    assert (kept["status"] == "error").any() and (kept["recipe"].fillna("") == "").any()
    pd.testing.assert_frame_equal(
        trained_runs(load_results(tmp_path, [SUITE])).reset_index(drop=True), tables)

    stored = read_results(archive_path(tmp_path, SUITE))
    assert list(stored["point_id"]) == [old] and archived(tmp_path, SUITE) == 1
    curves = read_series(tmp_path, SUITE)
    assert not ((curves["point_id"] == old) & (curves["machine"] == "box")).any()
    assert ((curves["point_id"] == old) & (curves["machine"] == "other")).any()
    assert set(read_series(tmp_path / SUITE, "archive")["point_id"]) == {old}
    hypotheses = rows[0]["test_hypotheses"]  # its output, with it; the others' stay
    assert (tmp_path / SUITE / "archive" / hypotheses).read_text() == old
    assert not (tmp_path / SUITE / hypotheses).exists()
    assert all((tmp_path / SUITE / r["test_hypotheses"]).is_file() for r in rows[1:]
               if "test_hypotheses" in r)
    # nothing that reads suites finds the archive, and a second pass moves nothing
    assert stored_names(tmp_path) == [SUITE]
    assert len(load_results(tmp_path, machine="all")) == len(rows) - 1
    assert archive(tmp_path, SUITE).empty and path.read_text().splitlines() == after
    assert not list(tmp_path.rglob("*.lock"))  # no bookkeeping left

    assert restore(tmp_path, SUITE) == 1  # and back, as it was but for the rows' order
    assert not (tmp_path / SUITE / "archive").exists() and archived(tmp_path, SUITE) == 0
    assert sorted(path.read_text().splitlines()) == sorted(before)
    assert (tmp_path / SUITE / hypotheses).read_text() == old
    assert len(read_series(tmp_path, SUITE)) == 2 * len(rows)
    assert not list(tmp_path.rglob("*.lock"))


def test_a_suite_without_a_search_keeps_every_row(tmp_path):
    """A recipe sweep (rows of no search, several recipes per model) is what its table
    compares: nothing is superseded there."""
    for lr, when in ((0.001, "2026-01-01"), (0.003, "2026-01-02")):
        append_row(results_path(tmp_path, SUITE),
                   _row("transformer", 0, lr, when, recipe=""))
    assert archive(tmp_path, SUITE).empty
    assert not archive_path(tmp_path, SUITE).exists()
