"""A suite's plan: the points its last whole sweep set out to measure (`tvr run SUITE`
without --only), saved beside its rows as <out>/<suite>/plan.json, so what has not been
measured yet is known from the stored files alone (the ledger's `finished` gate).

Each entry names the point (its id), its subject and seed (how a report names it) and the
digest of its configuration (how its checkpoint is named). Written atomically; a damaged
file reads as no plan, said by the reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.files import write_atomic

PLAN_FILE = "plan.json"


def write_plan(folder: Path, points: list[Any]) -> None:
    """The points (experiments.spec.Point) as the folder's plan, in sweep order."""
    entries = [{"point_id": p.point_id, "subject": p.subject, "seed": p.seed,
                "digest": p.digest} for p in points]
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / PLAN_FILE, json.dumps({"points": entries}, indent=1) + "\n")


def read_plan(folder: Path) -> list[dict[str, Any]]:
    """The folder's plan entries; [] without a plan; ValueError for one that cannot be read."""
    path = folder / PLAN_FILE
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["points"]
        return [{k: e[k] for k in ("point_id", "subject", "seed", "digest")} for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a plan ({type(exc).__name__}: {exc}); the next "
                         "`tvr run` of the suite writes it again") from None
