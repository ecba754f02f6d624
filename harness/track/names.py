"""What an MLflow run is called: readable names that tell the points of a study apart."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from harness.results import ID_COLUMNS
from harness.schema import config_key_of
from harness.track.values import FACT_TAGS, declared_params, shown

# Options columns that are the same for every point of a suite: they would only lengthen names
_NOT_IN_NAME = {"steps", "lr", "schedule", "warmup", "clip", "eval_every", "eval_batches",
                "target", "length_gen", "alphabet_size", "framing", "path", "val_fraction",
                "versus", "reps", "peak_n", "compile", "fit", "study", "vocab_size"}
RUN_NAME_LIMIT = 250  # the runs table's name column: PostgreSQL refuses longer, SQLite not


def sized(subject: Any, seq_len: Any, d_model: Any) -> str:
    """`lstm seq_len=64 d_model=32`: a subject and its sizes; a baseline's (0, or none) are
    left out."""
    sizes = [f"{k}={shown(v)}" for k, v in (("seq_len", seq_len), ("d_model", d_model))
             if shown(v) not in ("", "0", "None", "nan")]
    return " ".join([str(subject), *sizes])


def run_name(params: Mapping[str, Any], point_id: str) -> str:
    """What tells a point apart first: `lstm seq_len=64 d_model=32` (the row's columns), then
    its config (`heads=4`), seed, dtype and study. The UI cuts long names, so the subject
    and sizes lead. A name longer than a run name may be keeps its head and a hash of the
    point id (the full id is the run's point_id tag)."""
    name = _describe(params) or point_id
    if len(name) <= RUN_NAME_LIMIT:
        return name
    digest = hashlib.sha1(point_id.encode()).hexdigest()[:12]
    return f"{name[:RUN_NAME_LIMIT - 13]}~{digest}"


def reference_name(suite: str, machine: str, measured: str) -> str:
    """A reference parent run's name: what it is, whose rows, when measured; a user's
    parent run is `SUITE DATE TIME`, so the two never read alike."""
    return f"reference {suite} · {machine} · measured {measured or 'unknown'}"


def _describe(params: Mapping[str, Any]) -> str:
    subject = params.get("mixer") or params.get("model")
    if not subject:
        return ""
    parts = [sized(subject, params.get("seq_len"), params.get("d_model"))]
    keys = declared_params()
    parts += [f"{k}={_brief(shown(v))}" for k, v in params.items()
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


# A point's own fields: what names it besides its config columns (its config_key lists them)
_FIELDS = ("batch_size", "dtype", "seed", "compile", "runner")
_IN_EVERY_NAME = ("suite", "mixer", "model", "seq_len", "d_model", "fit", "study")


def _config(row: Mapping[str, Any]) -> dict[str, str]:
    """What tells a point apart: its fields and the config columns its config_key lists
    (`-k=4`; the row's value where it has that column, else the key's, up to a `-`)."""
    listed = dict(re.findall(r"-([A-Za-z_]\w*)=([^-]*)", config_key_of(row)))
    config = {k: shown(row[k]) if k in row else v for k, v in listed.items()}
    config |= {k: shown(row[k]) for k in _FIELDS if k in row}
    return {k: _brief(v) for k, v in config.items() if k not in _IN_EVERY_NAME}


def _brief(value: str) -> str:
    """A searched float as a name spells it: 0.18669453058109578 is 0.1867,
    5.718740867244332e-05 is 5.719e-05 (the full value is in the run's params and
    config.json)."""
    if not re.fullmatch(r"-?\d+\.\d{5,}(e[-+]?\d+)?", value):
        return value
    return f"{float(value):.4g}"


def _subject(row: Mapping[str, Any]) -> str:
    return shown(row.get("mixer")) or shown(row.get("model")) or shown(row.get("runner"))


def _telling(members: list[Mapping[str, Any]], configs: dict[str, dict[str, str]]
             ) -> list[str]:
    """The config keys a name needs: each key whose value differs between points that agree
    on subject, seq_len, d_model and the keys taken before it (so batch_size, set by seq_len,
    is left out; the point's own fields come last)."""
    keys = sorted({k for c in configs.values() for k in c}, key=lambda k: (k in _FIELDS, k))
    taken: list[str] = []
    for key in keys:
        values: dict[tuple[str, ...], set[str]] = {}
        for row in members:
            config = configs[str(row["point_id"])]
            base = (_subject(row), shown(row.get("seq_len")),
                    shown(row.get("d_model")), *(config.get(k, "") for k in taken))
            values.setdefault(base, set()).add(config.get(key, ""))
        if any(len(v) > 1 for v in values.values()):
            taken.append(key)
    return taken


def run_names(rows: list[Mapping[str, Any]]) -> dict[str, str]:
    """point_id -> a short run name, unique within its study (or Table 1 fit): the subject,
    seq_len and d_model, then each field that tells points of the same study apart (`k=3`,
    `heads=4`, `seed=1`), then the study. Two points alike in all of these (a bug in the
    suite) get a hash of their id."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        group = shown(row.get("study")) or shown(row.get("fit"))
        groups.setdefault(group, []).append(row)
    names: dict[str, str] = {}
    for group, members in groups.items():
        configs = {str(r["point_id"]): _config(r) for r in members}
        telling = _telling(members, configs)
        for row in members:
            point_id, config = str(row["point_id"]), configs[str(row["point_id"])]
            subject = _subject(row) or point_id
            parts = [sized(subject, row.get("seq_len"), row.get("d_model"))]
            parts += [f"{k}={config[k]}" for k in telling if config.get(k, "") != ""]
            names[point_id] = " ".join(parts + ([f"[{group}]"] if group else []))
    seen: dict[str, int] = {}
    for name in names.values():
        seen[name] = seen.get(name, 0) + 1
    return {p: n if seen[n] == 1 else f"{n} #{hashlib.sha1(p.encode()).hexdigest()[:6]}"
            for p, n in names.items()}
