"""What every runner takes and returns: `runner(point, context) -> Result`.

The runner table is harness.run.runner_table.RUNNERS; layer-level runners live there, training-type
runners in harness.train.train_runner and harness.train.probes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from experiments.spec import Point

Series = dict[str, list[tuple[int, float]]]  # metric -> [(step, value), ...]


@dataclass(frozen=True)
class Context:
    """Where and how long to measure: the same for every point of a sweep."""

    device: torch.device
    min_run_time: float = 0.2  # seconds of timed calls per timing (layer and compare points)
    cache_dir: Path | None = None  # the output folder: caches a point may reuse (BPE models)
    machine: str = ""  # the machine the rows name (the driver's, wherever a point runs)
    keep_checkpoints: bool = False  # a finished training point keeps its checkpoint
    # a tuning search's pruner (`tvr tune`, in this process): (point, training FLOPs so
    # far, its curve so far: metric -> [(step, value)]) -> stop training now
    prune: Callable[[Point, int, dict[str, list[tuple[int, float]]]], bool] | None = None
    resume: bool = True  # False (--no-resume): a training point ignores its checkpoint


@dataclass
class Result:
    """A runner's outcome. `status` is "ok", or "diverged" for a run that ended without an
    exception but did not succeed (`message` says how); exceptions become error rows in the
    sweep. `series` are curves: logged to MLflow with step= and stored in series.csv.
    `files` are text files the sweep writes beside results.csv before the row (path relative
    to the suite's folder -> lines), so a point run anywhere (a Ray worker) still has one
    writer."""

    values: dict[str, Any]
    series: Series = field(default_factory=dict)
    status: str = "ok"
    message: str = ""
    files: dict[str, list[str]] = field(default_factory=dict)


Runner = Callable[["Point", Context], Result]
