"""What a results row holds, declared once, in four parts:

- identity: the point's own fields (`Point.fields()`), its id and config_key, where it ran
  (device, machine) and how it ended (status, message, measured_at);
- params: what the point was configured with (`Point.columns()`: its model config and its
  options; its config_key lists them as `-key=value`), and any text a runner returned about
  the measurement (a kernel's name, a scorer's signature);
- machine facts: the machine and code that measured it (harness.measure.machine's facts,
  the executor's, the commit);
- metrics: the numbers a runner returned (`Result.values`).

The CSV writer orders a row's columns by it (harness.results), MLflow takes the parts as
params, tags and metrics (harness.track), and a row read back from any file, old ones
included, splits by the same rule (`Parts.of_row`). This module imports nothing but the
catalog (models.catalog, which imports nothing), so every stage, the report's included, may
use it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from models import catalog

POINT_FIELDS = ("suite", "runner", "mixer", "model", "seq_len", "d_model", "batch_size",
                "dtype", "seed", "compile", "fit", "study")  # Point.fields(), in its order
KEY = ("point_id", "device", "machine")  # one row per point, device and machine
OUTCOME = ("status", "message", "measured_at")
# Facts recorded beside every measurement (harness.measure.machine.machine_facts)
FACT_KEYS = ("cpu", "threads", "torch_version", "host", "device_name",
             "float32_matmul_precision", "cuda_version", "cudnn_version", "driver_version",
             "tf32_matmul", "tf32_cudnn",
             "cpu_count", "physical_cores", "usable_cpus", "blas", "onednn", "cpu_capability")
# Who measured it besides the machine: the executor, its node and the code's commit
RUN_FACTS = ("executor", "node", "nice", "attempts", "git_commit", "git_dirty",
             "git_diff_sha256")
FACTS = (*FACT_KEYS, *RUN_FACTS)

# The CSV's column order: these first, every other column in first-seen order, then the tail
ID_COLUMNS = ["suite", "point_id", "runner", "model", "mixer", "seq_len", "d_model", "batch_size",
              "device", "dtype", "seed", "status", "machine"]
# the point's whole configuration as one string (Point.config_key): last, it is long
CONFIG_KEY = "config_key"
TAIL_COLUMNS = ["message", "torch_version", "host", CONFIG_KEY]

_LISTED = re.compile(r"-([A-Za-z_]\w*)=")


def config_key_of(row: Mapping[str, Any]) -> str:
    """A row's config_key; its point_id for a row from before ids were short (whose id was
    its config_key)."""
    key = row.get(CONFIG_KEY)
    return str(row.get("point_id", "")) if _empty(key) else str(key)


def listed_params(config_key: str) -> set[str]:
    """The params a config_key lists (`-n_heads=4`): the keys of its Point.columns()."""
    return set(_LISTED.findall(config_key))


def is_metric_name(column: str) -> bool:
    """Whether `column` is a metric the catalog declares (models.catalog.metrics): a number in
    every row that fills it, whatever one file holds (text there is a bad cell, not a param).
    Timings listed per candidate ("onednn:39.4;F.linear:73.4") and a scorer's signature
    (bleu_signature) are text: no metric of the catalog."""
    return column in catalog.metrics()


def _empty(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class Parts:
    """One row in its four parts (see the module docstring)."""

    identity: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_point(cls, fields: Mapping[str, Any], columns: Mapping[str, Any],
                 values: Mapping[str, Any], facts: Mapping[str, Any]) -> Parts:
        """A measured point: its fields, its columns, what its runner returned (numbers are
        metrics, texts params) and the facts of its machine."""
        texts = {k: v for k, v in values.items() if not _number(v)}
        return cls(dict(fields), {**columns, **texts}, dict(facts),
                   {k: v for k, v in values.items() if _number(v)})

    @classmethod
    def of_row(cls, row: Mapping[str, Any], declared: Collection[str] = ()) -> Parts:
        """A stored row split by name: identity, the params its config_key lists or a Point
        declares (`declared`: option fields, model config keys), the facts, and the rest
        (numbers: metrics; texts: params). Empty cells are left out."""
        params = listed_params(config_key_of(row)) | set(declared)
        parts = cls()
        for key, value in row.items():
            if _empty(value):
                continue
            if key in POINT_FIELDS or key in KEY or key in OUTCOME or key == CONFIG_KEY:
                parts.identity[key] = value
            elif key in FACTS:
                parts.facts[key] = value
            elif key in params or not _number(value):
                parts.params[key] = value
            else:
                parts.metrics[key] = value
        return parts

    def mlflow_params(self) -> dict[str, Any]:
        """What an MLflow run takes as params: the point's fields, its params; its key and
        outcome are tags, its facts tags of the machine."""
        return {**{k: v for k, v in self.identity.items() if k in POINT_FIELDS},
                **self.params}
