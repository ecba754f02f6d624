"""The results CSVs as the record MLflow is rebuilt from: `tvr sync` and `tvr doctor`.

A row is in the store when a run of its suite's experiment carries its point id and machine
as tags; `sync` logs the rows that are not (written while tracking was off, or by a run
killed between writing a row and logging it). `doctor --repair` moves a broken SQLite store
aside to a dated backup and rebuilds its runs from every suite's rows this way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.machines import this_machine
from harness.results import RESULTS_FILE, SERIES_FILE, read_results, read_series
from harness.track.names import reference_name
from harness.track.sqlitefile import move_aside  # noqa: F401 -- `tvr doctor`'s
from harness.track.store import mask
from harness.track.tracker import Tracker
from harness.track.values import reference_tags, row_times
from harness.variants import stored_names

GPU_FOLDER = "gpu"  # results/gpu/SUITE: the suites measured on a GPU machine


def sync_suite(out_dir: Path, suite: str, uri: str,
               headline: tuple[dict[str, float], dict[str, str]] | None = None,
               description: str = "") -> tuple[int, int]:
    """Log every row of `suite` the store lacks, under one parent run per machine; returns
    (rows logged, rows stored). This machine's rows go under "SUITE DATE TIME"; another
    machine's (the reference committed with the code) under a parent named and tagged as
    the reference, its runs carrying the machine, commit and days of their rows. The
    experiment gets `description` if it has none."""
    path = Path(out_dir) / suite / RESULTS_FILE
    rows = read_results(path)
    series = read_series(out_dir, suite) if (path.parent / SERIES_FILE).exists() else None
    machines = rows["machine"].fillna("").astype(str) if "machine" in rows else \
        pd.Series("", index=rows.index)
    logged = 0
    for machine in dict.fromkeys(machines):  # in the file's order
        logged += _sync_machine(out_dir, suite, uri, rows[machines == machine], series,
                                headline, description, machine not in ("", this_machine()))
    return logged, len(rows)


Headline = tuple[dict[str, float], dict[str, str]]


def sync_reference(out_dir: Path, suite: str, uri: str,
                   headline: Callable[[str], Headline] | None = None,
                   description: str = "") -> int:
    """Log the rows of `suite` that other machines measured (the reference committed with
    the code) and the store lacks, each machine's under its reference parent run, as `tvr
    sync` does; returns how many. `tvr run` calls it before its sweep, so the store a first
    `make run` builds holds the reference beside the user's runs without a `tvr sync`.
    `headline(machine)` gives a parent's headline numbers, asked only where rows are
    logged."""
    path = Path(out_dir) / suite / RESULTS_FILE
    if not path.is_file():
        return 0
    rows = read_results(path)
    if "machine" not in rows:
        return 0
    machines = rows["machine"].fillna("").astype(str)
    others = [m for m in dict.fromkeys(machines) if m not in ("", this_machine())]
    if not others:
        return 0
    series = read_series(out_dir, suite) if (path.parent / SERIES_FILE).exists() else None
    return sum(_sync_machine(out_dir, suite, uri, rows[machines == m], series,
                             (lambda m=m: headline(m)) if headline else None, description,
                             True) for m in others)


def _sync_machine(out_dir: Path, suite: str, uri: str, rows: pd.DataFrame,
                  series: pd.DataFrame | None,
                  headline: Headline | Callable[[], Headline] | None,
                  description: str, reference: bool) -> int:
    """One machine's rows of `suite` under one parent run (deleted if it adds none)."""
    labels: dict[str, Any] = {}
    if reference:
        tags = reference_tags(rows, suite)
        times = [t for row in rows.to_dict("records") for t in row_times(row) if t is not None]
        labels = {"name": reference_name(suite, tags["machine"], tags["measured"]),
                  "tags": tags, "span": (min(times), max(times)) if times else None}
    path = Path(out_dir) / suite / RESULTS_FILE
    with Tracker(uri, suite, out_dir, {"suite": suite, "synced_from": str(path)},
                 description=description, keep_note=True, **labels) as tracker:
        logged = tracker.sync(rows, series)
        if not logged:
            tracker.discard()  # nothing added: no empty parent run
        elif headline:  # n*, exponents and verdicts on the parent run, as a live sweep's
            tracker.log_summary(*(headline() if callable(headline) else headline))
        if tracker.error is not None:
            first = str(tracker.error).strip().splitlines()[0] if str(tracker.error) else ""
            raise OSError(f"the store failed: {mask(first)}")
    return logged


def suites_with_results(out_dir: Path) -> list[tuple[Path, str]]:
    """(folder, suite) of every suite with results under `out_dir`, and under its gpu/
    folder (the GPU suites committed beside the CPU reference); a suite's variants as
    (folder, `SUITE/variants/VARIANT`)."""
    out_dir = Path(out_dir)
    found = [(out_dir, name) for name in stored_names(out_dir, RESULTS_FILE)]
    found += [(out_dir / GPU_FOLDER, name)
              for name in stored_names(out_dir / GPU_FOLDER, RESULTS_FILE)]
    return sorted(found)
