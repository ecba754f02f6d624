"""Checkpoints of a training point, so a killed or preempted point resumes where it was.

A checkpoint holds everything the rest of the run depends on: the model, the optimiser and
schedule states, the torch RNG state (dropout), the step reached (the data position: the
batch stream is a pure function of seed and step), the log so far (curves, FLOPs, seconds),
the running loss and the early-stopping state (the best weights and when they were seen).
Resuming from it gives the numbers an uninterrupted run gives, the measured seconds aside.
It is written atomically (a temporary file in the same folder, then os.replace), so a kill
while writing leaves the previous checkpoint whole. The file names the point's id, and a
checkpoint of another point (a changed suite) is refused, never resumed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

CHECKPOINTS = "checkpoints"  # the folder, beside the suite's results.csv


def save(path: Path, state: dict[str, Any]) -> None:
    """torch.save(state) to `path`, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def load(path: Path, point_id: str) -> dict[str, Any] | None:
    """The checkpoint at `path` if it is this point's, else None (no file)."""
    if not path.exists():
        return None
    # weights_only=False: the state holds the log's plain Python objects and RNG tensors
    # written by this harness itself, never a file from elsewhere
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("point_id") != point_id:
        raise ValueError(f"checkpoint {path} belongs to point {state.get('point_id')!r}, "
                         f"not {point_id!r}; remove it to start this point afresh")
    return state
