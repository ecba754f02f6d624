"""Rows and facts as MLflow takes them: params (flat strings), metrics (finite numbers, with
steps for curves) and tags (MLflow's source, user and commit, a summary of the machine)."""

from __future__ import annotations

import dataclasses
import functools
import getpass
import hashlib
import math
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import models
from experiments.spec import (
    CompareOptions,
    Match,
    PathOptions,
    TaskSpec,
    ThreadOptions,
    TrainOptions,
    TranslateOptions,
)
from harness.schema import Parts
from harness.track.store import mask
from harness.variants import source_text

if TYPE_CHECKING:
    import pandas as pd
    from mlflow.entities import Metric

# Machine facts shown on every point's run (the full report is an artifact of the parent)
FACT_TAGS = ("cpu", "device_name", "threads", "physical_cores", "usable_cpus", "blas",
             "onednn", "cpu_capability", "torch_version", "cuda_version")


def shown(value: Any) -> str:
    """A value as a name shows it: 256.0 read back from a CSV is 256."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


@functools.cache
def declared_params() -> frozenset[str]:
    """Every name a Point may carry as a param: its options' fields and every model and
    mixer config key (a row's own point_id lists those it has)."""
    options = (CompareOptions, PathOptions, ThreadOptions, TrainOptions, TaskSpec,
               TranslateOptions, Match)
    return frozenset({*models.config_keys(), "task",
                      *(f.name for cls in options for f in dataclasses.fields(cls))})


def split_row(row: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """A stored row as (params, metrics, tags), laid out as a live sweep logs it (the row's
    parts: harness.schema); empty cells are left out."""
    parts = Parts.of_row(row, declared_params())
    return ({k: str(v) for k, v in parts.mlflow_params().items()},
            {k: float(v) for k, v in parts.metrics.items()},
            row_tags(row) | fact_tags(parts.facts))


def row_series(series: pd.DataFrame | None, point_id: str, machine: str
            ) -> dict[str, list[tuple[int, float]]]:
    if series is None or series.empty:
        return {}
    mine = series[(series["point_id"] == point_id) & (series["machine"] == machine)]
    return {name: list(zip(g["step"].astype(int), g["value"].astype(float), strict=True))
            for name, g in mine.groupby("metric")}


@functools.cache
def _git(*args: str) -> str:
    """A git command's output in the checkout this code runs from; "" outside one (an
    installed wheel) or when git is missing or slow."""
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def code_facts() -> dict[str, str]:
    """The git commit of the code measuring a row and whether it had uncommitted changes
    (the commit alone does not say what ran then); empty outside a checkout."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return {}
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    # what the uncommitted changes were, as a digest: two dirty rows of one commit measured
    # the same code only if their digests agree
    diff = hashlib.sha256(_git("diff", "HEAD").encode()).hexdigest()[:16] if dirty else ""
    return {"git_commit": commit, "git_dirty": str(dirty), "git_diff_sha256": diff}


def source_name(suite: str) -> str:
    """The Source column of the runs table: the command that measured them. MLflow's UI
    shows the last `/`-separated part of a local source, so no path may appear in it (a
    variant's stored name has some: harness.variants.source_text)."""
    return source_text(suite)


def context_tags(suite: str = "") -> dict[str, str]:
    """MLflow's own context tags (the UI shows source, user and commit in its columns) for a
    run of `suite` started by this command; the full command line (a password in a URI
    masked) is a tag of its own."""
    tags = {"mlflow.source.type": "LOCAL",
            "mlflow.source.name": source_name(suite) if suite else "tvr",
            "command": mask(" ".join(["tvr", *sys.argv[1:]]))[:500],
            "mlflow.user": _user()}
    code = code_facts()
    if code:
        tags["mlflow.source.git.commit"] = code["git_commit"]
        tags["git_dirty"] = code["git_dirty"]
    return tags


def row_tags(row: Mapping[str, Any]) -> dict[str, str]:
    """A stored row's source tags: the commit that measured it, or "unknown" for a row from
    before rows named one (never the commit of the code syncing it)."""
    commit = shown(row.get("git_commit"))
    return {"mlflow.source.git.commit": commit or "unknown",
            "git_dirty": shown(row.get("git_dirty")) or "unknown"}


REFERENCE_TAG = "reference"  # "true" on every run of rows measured on another machine


def measured_dates(rows: pd.DataFrame) -> str:
    """The days rows were measured on (their measured_at): `2026-11-30`, or
    `2026-11-30 to 2026-12-02`; "" when none says."""
    days = sorted({str(v)[:10] for v in rows.get("measured_at", []) if shown(v)})
    return "" if not days else days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def reference_tags(rows: pd.DataFrame, suite: str) -> dict[str, str]:
    """Tags for rows one other machine measured (the reference committed with the code),
    from the rows, never from the process logging them: their machine, host, torch, commit
    (one, or "several"; "unknown" before rows named one), the days they were measured, the
    command that measured them, and the reference tag (MLflow's User column says it too)."""
    def one(column: str, unknown: str = "unknown") -> str:
        values = {shown(v) for v in rows.get(column, [])} - {""}
        return unknown if not values else values.pop() if len(values) == 1 else "several"

    return {REFERENCE_TAG: "true", "machine": one("machine"), "host": one("host"),
            "torch_version": one("torch_version"), "measured": measured_dates(rows) or "unknown",
            "command": source_text(suite), "mlflow.user": REFERENCE_TAG,
            "mlflow.source.git.commit": one("git_commit"), "git_dirty": one("git_dirty")}


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container's uid with no passwd entry
        return ""


def fact_tags(facts: Mapping[str, Any]) -> dict[str, str]:
    """The machine summary each point's run carries as tags."""
    return {k: str(facts[k]) for k in FACT_TAGS if k in facts and facts[k] != ""}


def flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """{"a": {"b": 1}} -> {"a.b": "1"}; MLflow params are flat strings."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def finite(key: str, value: Any) -> float | None:
    """The metric as a float, or None when it is missing or not finite (MLflow plots NaN badly)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"metric {key!r} is not a number: {value!r}") from e
    return number if math.isfinite(number) else None


def row_times(row: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(start, end) in ms of a stored row's point: it ended at measured_at and took wall_s."""
    from datetime import datetime

    try:
        ended = datetime.fromisoformat(str(row.get("measured_at"))).timestamp()
    except ValueError:
        return None, None
    wall = finite("wall_s", row.get("wall_s"))
    started = ended - wall if wall is not None and wall >= 0 else ended
    return int(started * 1000), int(ended * 1000)


def metrics_batch(metrics: Mapping[str, Any],
             series: Mapping[str, list[tuple[int, float]]] | None) -> list[Metric]:
    """Finite scalar metrics at step 0 plus every finite point of each series.

    Raises TypeError for a value that is not a number.
    """
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = []
    for key, value in metrics.items():
        number = finite(key, value)
        if number is not None:
            batch.append(Metric(key, number, now, 0))
    for key, points in (series or {}).items():
        for step, value in points:
            number = finite(key, value)
            if number is not None:
                batch.append(Metric(key, number, now, int(step)))
    return batch
