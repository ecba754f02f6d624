"""What an MLflow run is called, where it came from and what it records: readable run names,
the context tags MLflow's UI knows (source, user, git commit) plus a summary of the machine,
and values as MLflow params and metrics."""

from __future__ import annotations

import functools
import getpass
import hashlib
import math
import re
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


# A point's own fields: what names it besides its config columns (which its id lists)
_FIELDS = ("batch_size", "dtype", "seed", "compile", "runner")
_IN_EVERY_NAME = ("suite", "mixer", "model", "seq_len", "d_model", "fit", "study")


def _shown(value: Any) -> str:
    """A value as a name shows it: 256.0 read back from a CSV is 256."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _config(row: Mapping[str, Any]) -> dict[str, str]:
    """What tells a point apart: its fields and the config columns its id lists (`-k=4`;
    the row's value where it has that column, else the id's, up to a `-`)."""
    listed = dict(re.findall(r"-([A-Za-z_]\w*)=([^-]*)", str(row.get("point_id", ""))))
    config = {k: _shown(row[k]) if k in row else v for k, v in listed.items()}
    config |= {k: _shown(row[k]) for k in _FIELDS if k in row}
    return {k: v for k, v in config.items() if k not in _IN_EVERY_NAME}


def _subject(row: Mapping[str, Any]) -> str:
    return _shown(row.get("mixer")) or _shown(row.get("model")) or _shown(row.get("runner"))


def _telling(members: list[Mapping[str, Any]], configs: dict[str, dict[str, str]]
             ) -> list[str]:
    """The config keys a name needs: each key whose value differs between points that agree
    on subject, n, d and the keys taken before it (so batch_size, set by n, is left out;
    the point's own fields come last)."""
    keys = sorted({k for c in configs.values() for k in c}, key=lambda k: (k in _FIELDS, k))
    taken: list[str] = []
    for key in keys:
        values: dict[tuple[str, ...], set[str]] = {}
        for row in members:
            config = configs[str(row["point_id"])]
            base = (_subject(row), _shown(row.get("seq_len")),
                    _shown(row.get("d_model")), *(config.get(k, "") for k in taken))
            values.setdefault(base, set()).add(config.get(key, ""))
        if any(len(v) > 1 for v in values.values()):
            taken.append(key)
    return taken


def run_names(rows: list[Mapping[str, Any]]) -> dict[str, str]:
    """point_id -> a short run name, unique within its study (or Table 1 fit): the subject,
    n and d, then each field that tells points of the same study apart (`k=3`, `heads=4`,
    `seed=1`), then the study. Two points alike in all of these (a bug in the suite) get a
    hash of their id."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        group = _shown(row.get("study")) or _shown(row.get("fit"))
        groups.setdefault(group, []).append(row)
    names: dict[str, str] = {}
    for group, members in groups.items():
        configs = {str(r["point_id"]): _config(r) for r in members}
        telling = _telling(members, configs)
        for row in members:
            point_id, config = str(row["point_id"]), configs[str(row["point_id"])]
            subject = _subject(row) or point_id
            parts = [str(subject), f"n={_shown(row.get('seq_len'))}",
                     f"d={_shown(row.get('d_model'))}"]
            parts += [f"{k}={config[k]}" for k in telling if config.get(k, "") != ""]
            names[point_id] = " ".join(parts + ([f"[{group}]"] if group else []))
    seen: dict[str, int] = {}
    for name in names.values():
        seen[name] = seen.get(name, 0) + 1
    return {p: n if seen[n] == 1 else f"{n} #{hashlib.sha1(p.encode()).hexdigest()[:6]}"
            for p, n in names.items()}


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
    return {"git_commit": commit,
            "git_dirty": str(bool(_git("status", "--porcelain", "--untracked-files=no")))}


def source_name(suite: str) -> str:
    """The Source column of the runs table: the command that measured them. MLflow's UI
    shows the last `/`-separated part of a local source, so no path may appear in it."""
    return f"tvr run {suite}"


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
    commit = _shown(row.get("git_commit"))
    return {"mlflow.source.git.commit": commit or "unknown",
            "git_dirty": _shown(row.get("git_dirty")) or "unknown"}


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
