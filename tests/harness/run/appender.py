"""A writer of rows for the test of two processes appending at once: a module of its own so
that each spawned process imports only the results file's code, not the test module's torch
and MLflow (about 6 s each)."""

from __future__ import annotations

from pathlib import Path

from harness.results import append_row


def append_many(path: str, suite: str, who: str, n: int) -> None:
    for i in range(n):
        append_row(Path(path), {"suite": suite, "point_id": f"{who}-{i}", "status": "ok",
                                "device": "cpu", "machine": who, "seq_len": i})
