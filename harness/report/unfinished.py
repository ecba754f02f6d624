"""Runs of a suite that have not finished, read from its folder: a verdict on trained
models is not read while a contestant is still training or has yet to start.

The suite's plan (harness.plan: the points its last whole sweep set out to measure) names
the runs it should have. A sweep claims a point before measuring it
(`<suite>/.claims/<key>`, JSON naming the point id and the process) and a training point
checkpoints as it goes
(`<suite>/checkpoints/<subject>-s<seed>-<digest>-<device>.pt`, the digest of the point's
configuration: harness.train.checkpoint.point_path); both go once its row is written,
unless the sweep keeps checkpoints. So a claim or a checkpoint of a point without a row is a
run in flight, or one stopped that `tvr run SUITE` resumes. The report reads stored files
only, so the file names are parsed here; a test ties them to the writers'.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pandas as pd

from harness.plan import read_plan

CLAIMS, CHECKPOINTS = ".claims", "checkpoints"
CHECKPOINT_NAME = re.compile(r"(?P<subject>.+)-s(?P<seed>\d+)-(?P<digest>[0-9a-f]{12})"
                             r"-(?P<device>\w+)\.pt")
SHORT_ID = re.compile(r".*-s(?P<seed>\d+)(-compiled)?-(?P<digest>[0-9a-f]{12})")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def digests(rows: pd.DataFrame) -> set[str]:
    """The configuration digests of the rows' points: a short id's own, and the digest of a
    long id or of the `config_key` column (a row written before ids were short)."""
    out = set()
    for col in ("point_id", "config_key"):
        for value in rows.get(col, pd.Series(dtype=str)).dropna().astype(str):
            short = SHORT_ID.fullmatch(value)
            out.add(short["digest"] if short and col == "point_id" else _sha(value))
    return out


def unfinished(folder: Path, rows: pd.DataFrame) -> dict[str, int]:
    """The runs of the suite in `folder` that are planned, or started, and have no row among
    `rows` (every status: a failed point is finished), each named by its point id without
    the digest where the plan has it (`table2-translate-transformer-s3`), else by its
    checkpoint ("<subject> seed <n>") or its claim's point id, with how many runs bear that
    name (points alike but for an option, such as a learning rate), in plan order. None
    where the folder holds no plan, claims or checkpoints."""
    done_ids = set(rows.get("point_id", pd.Series(dtype=str)).astype(str))
    done = digests(rows)
    found: dict[str, str] = {}  # digest -> how it is named
    for entry in read_plan(folder):
        if entry["point_id"] not in done_ids and entry["digest"] not in done:
            found[entry["digest"]] = entry["point_id"].removesuffix(f"-{entry['digest']}")
    for path in sorted((folder / CHECKPOINTS).glob("*.pt")):
        name = CHECKPOINT_NAME.fullmatch(path.name)
        if name and name["digest"] not in done:
            found.setdefault(name["digest"], f"{name['subject']} seed {int(name['seed'])}")
    for path in sorted((folder / CLAIMS).glob("*")):
        try:
            point_id = str(json.loads(path.read_text(encoding="utf-8"))["point_id"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a claim being written or removed this instant: its checkpoint says
        short = SHORT_ID.fullmatch(point_id)
        digest = short["digest"] if short else _sha(point_id)
        if point_id not in done_ids and digest not in done:
            found.setdefault(digest, point_id if len(point_id) <= 80 else point_id[:77] + "...")
    return dict(Counter(found.values()))  # runs alike but for an option (a learning rate)
