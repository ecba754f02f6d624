"""What an MLflow run is called, where it came from and what it records: readable run names,
the context tags MLflow's UI knows (source, user, git commit) plus a summary of the machine,
and values as MLflow params and metrics."""

from __future__ import annotations

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

from harness.results import ID_COLUMNS
from harness.run.store import mask
from harness.run.sync import param_keys

if TYPE_CHECKING:
    from mlflow.entities import Metric

# Options columns that are the same for every point of a suite: they would only lengthen names
_NOT_IN_NAME = {"steps", "lr", "schedule", "warmup", "clip", "eval_every", "eval_batches",
                "target", "length_gen", "alphabet_size", "framing", "path", "val_fraction",
                "versus", "reps", "peak_n", "compile", "fit", "study", "vocab_size"}
# Machine facts shown on every point's run (the full report is an artifact of the parent)
FACT_TAGS = ("cpu", "device_name", "threads", "physical_cores", "usable_cpus", "blas",
             "onednn", "cpu_capability", "torch_version", "cuda_version")


RUN_NAME_LIMIT = 250  # the runs table's name column: PostgreSQL refuses longer, SQLite not


def run_name(params: Mapping[str, Any], point_id: str) -> str:
    """What tells a point apart first: `lstm n=64 d=32`, then its config (`heads=4`), seed,
    dtype and study. The UI cuts long names, so the subject and sizes lead. A name longer
    than a run name may be keeps its head and a hash of the point id (the full id is the
    run's point_id tag)."""
    name = _describe(params) or point_id
    if len(name) <= RUN_NAME_LIMIT:
        return name
    digest = hashlib.sha1(point_id.encode()).hexdigest()[:12]
    return f"{name[:RUN_NAME_LIMIT - 13]}~{digest}"


def _describe(params: Mapping[str, Any]) -> str:
    subject = params.get("mixer") or params.get("model")
    if not subject:
        return ""
    parts = [str(subject), f"n={params.get('seq_len')}", f"d={params.get('d_model')}"]
    keys = param_keys()
    parts += [f"{k}={v}" for k, v in params.items()
              if k in keys and k not in ID_COLUMNS and k not in _NOT_IN_NAME
              and k not in FACT_TAGS and not k.startswith("match_") and v not in ("", None)]
    if str(params.get("seed", "0")) != "0":
        parts.append(f"seed={params['seed']}")
    if params.get("dtype") not in (None, "", "float32"):
        parts.append(str(params["dtype"]))
    group = params.get("study") or params.get("fit")
    if group:
        parts.append(f"[{group}]")
    return " ".join(parts)


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


def context_tags() -> dict[str, str]:
    """MLflow's own context tags (the UI shows source, user and commit in its columns) for a
    run started by this command line; a password in a URI argument is masked."""
    tags = {"mlflow.source.type": "LOCAL",
            "mlflow.source.name": mask(" ".join(["tvr", *sys.argv[1:]]))[:500],
            "mlflow.user": _user()}
    commit = _git("rev-parse", "HEAD")
    if commit:
        tags["mlflow.source.git.commit"] = commit
        # measured with uncommitted changes: the commit alone does not say what ran
        tags["git_dirty"] = str(bool(_git("status", "--porcelain", "--untracked-files=no")))
    return tags


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
