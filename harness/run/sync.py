"""The results CSVs as the record MLflow is rebuilt from: `tvr sync` and `tvr doctor`.

A row is in the store when a run of its suite's experiment carries its point id and machine
as tags; `sync` logs the rows that are not (written while tracking was off, or by a run
killed between writing a row and logging it). `doctor --repair` moves a broken SQLite store
aside to a dated backup and rebuilds its runs from every suite's rows this way.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

import models
from experiments.spec import CompareOptions, PathOptions, TaskSpec, TrainOptions
from harness.measure.machine import FACT_KEYS
from harness.results import ID_COLUMNS, RESULTS_FILE, SERIES_FILE, read_results, read_series
from harness.run.sqlitefile import move_aside  # noqa: F401 -- `tvr doctor`'s
from harness.run.store import mask


@cache
def param_keys() -> frozenset[str]:
    """Columns that describe a point (params), whatever their type: the point's fields, its
    options', every model and mixer config key and the machine facts; the other numbers are
    measurements."""
    options = (CompareOptions, PathOptions, TrainOptions, TaskSpec)
    return frozenset({*ID_COLUMNS, *FACT_KEYS, "compile", "fit", "study", "task", "match",
                      *models.config_keys(),
                      *(f.name for cls in options for f in dataclasses.fields(cls))})


def split_row(row: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, float]]:
    """A stored row as (params, metrics), laid out as a live sweep logs it; empty cells are
    left out."""
    keys = param_keys()
    params: dict[str, str] = {}
    metrics: dict[str, float] = {}
    for key, value in row.items():
        if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
            continue
        if key in ("status", "message", "point_id"):
            continue
        if key not in keys and not key.startswith("match_") \
                and isinstance(value, (int, float)) and not isinstance(value, bool):
            metrics[key] = float(value)
        else:
            params[key] = str(value)
    return params, metrics


def row_series(series: pd.DataFrame | None, point_id: str, machine: str
            ) -> dict[str, list[tuple[int, float]]]:
    if series is None or series.empty:
        return {}
    mine = series[(series["point_id"] == point_id) & (series["machine"] == machine)]
    return {name: list(zip(g["step"].astype(int), g["value"].astype(float), strict=True))
            for name, g in mine.groupby("metric")}


def sync_suite(out_dir: Path, suite: str, uri: str,
               headline: tuple[dict[str, float], dict[str, str]] | None = None
               ) -> tuple[int, int]:
    """Log every row of `suite` the store lacks, under a parent run "sync-<time>";
    returns (rows logged, rows stored)."""
    from harness.run.tracking import Tracker

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
