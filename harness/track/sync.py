"""The results CSVs as the record MLflow is rebuilt from: `tvr sync` and `tvr doctor`.

A row is in the store when a run of its suite's experiment carries its point id and machine
as tags; `sync` logs the rows that are not (written while tracking was off, or by a run
killed between writing a row and logging it). `doctor --repair` moves a broken SQLite store
aside to a dated backup and rebuilds its runs from every suite's rows this way.
"""

from __future__ import annotations

from pathlib import Path

from harness.results import RESULTS_FILE, SERIES_FILE, read_results, read_series
from harness.track.sqlitefile import move_aside  # noqa: F401 -- `tvr doctor`'s
from harness.track.store import mask
from harness.track.tracker import Tracker


def sync_suite(out_dir: Path, suite: str, uri: str,
               headline: tuple[dict[str, float], dict[str, str]] | None = None
               ) -> tuple[int, int]:
    """Log every row of `suite` the store lacks, under a parent run "sync-<time>";
    returns (rows logged, rows stored)."""
    path = Path(out_dir) / suite / RESULTS_FILE
    rows = read_results(path)
    series = read_series(out_dir, suite) if (path.parent / SERIES_FILE).exists() else None
    with Tracker(uri, suite, out_dir, {"suite": suite, "synced_from": str(path)}) as tracker:
        logged = tracker.sync(rows, series)
        if not logged:
            tracker.discard()  # nothing added: no empty parent run
        elif headline:  # n*, exponents and verdicts on the parent run, as a live sweep's
            tracker.log_summary(*headline)
        if tracker.error is not None:
            first = str(tracker.error).strip().splitlines()[0] if str(tracker.error) else ""
            raise OSError(f"the store failed: {mask(first)}")
    return logged, len(rows)


def suites_with_results(out_dir: Path) -> list[str]:
    return sorted(p.parent.name for p in Path(out_dir).glob(f"*/{RESULTS_FILE}"))
