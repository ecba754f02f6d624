"""The sweep's progress bar: tqdm when installed, plain lines on stderr otherwise.

A lent GPU machine (scripts/gpu-check) may have torch and pandas but not tqdm; the sweep must
run there unchanged, so the bar degrades to one line per point.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.console import say
from harness.track.names import sized

# Libraries whose own log lines (MLflow's multi-line ERROR blocks, SQLAlchemy's and
# Alembic's notes, urllib3's retries) go to the suite's errors.log, not the terminal.
QUIET_LOGGERS = ("mlflow", "alembic", "sqlalchemy", "urllib3")


class _Lines:
    """The part of tqdm's interface the sweep uses, printing `suite k/N point (elapsed)`, or
    with `total` (expected seconds) `suite S/T expected s, point k/N point (elapsed)`."""

    def __init__(self, items: Sequence[Any], desc: str, enabled: bool,
                 total: float | None = None) -> None:
        self.items, self.desc, self.enabled, self.total = items, desc, enabled, total
        self.started = time.perf_counter()
        self.done = 0
        self.n = 0.0  # what update() added: points, or their expected seconds

    def __iter__(self) -> Iterator[Any]:
        for item in self.items:
            yield item
            self.done += 1

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            count = (f"{self.n:.0f}/{self.total:.0f} expected s, point " if self.total
                     else "")
            print(f"{self.desc} {count}{self.done + 1}/{len(self.items)} {text} "
                  f"({elapsed:.0f} s)", file=sys.stderr, flush=True)

    def update(self, n: float = 1) -> None:
        self.n += n
        self.done += 1

    def close(self) -> None:
        """Nothing to tear down: every line is already complete."""


def label(point: Any, d_model: int) -> str:
    """A point in a few words for the bar: `lstm seq_len=64 d_model=32`, the width it trained
    at (the full id is in its row)."""
    return sized(point.subject, point.seq_len, d_model)


# the bar of expected seconds: how far by the reference's point times, then tqdm's ETA
SECONDS_FORMAT = ("{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s of expected point "
                  "time [{elapsed}<{remaining}{postfix}]")


def progress_bar(items: Sequence[Any], desc: str, enabled: bool = True,
                 seconds: Sequence[float] | None = None) -> Any:
    """tqdm over items (points done, current point, ETA), or _Lines without tqdm. With
    `seconds` (each item's expected seconds, harness.report.expected_time.point_weights) the bar
    counts those, and the caller updates it by each finished item's: a point of many minutes
    moves it as far as it takes, where a count of points sat still through it."""
    total = float(sum(seconds)) if seconds else None
    try:
        from tqdm import tqdm
    except ImportError:
        return _Lines(items, desc, enabled, total)
    if total:
        return tqdm(total=total, desc=desc, unit="s", file=sys.stderr, disable=not enabled,
                    dynamic_ncols=True, bar_format=SECONDS_FORMAT)
    return tqdm(items, desc=desc, unit="pt", file=sys.stderr, disable=not enabled,
                dynamic_ncols=True)


@contextmanager
def logs_to(path: Path, tracked: bool = True) -> Iterator[None]:
    """While a sweep runs: QUIET_LOGGERS write to `path` (created only if one of them
    speaks), and a Python warning is one line above the bar (its whole text in `path`).
    With `tracked`, MLflow is imported first: its import replaces its logger's handlers."""
    if tracked:
        try:
            import mlflow  # noqa: F401
        except ImportError:
            pass  # the tracker says so in one line
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, delay=True, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    saved = {}
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        saved[name] = (logger.handlers[:], logger.propagate)
        logger.handlers, logger.propagate = [handler], False
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        handler.handle(logging.LogRecord("warnings", logging.WARNING, str(filename), lineno,
                                         f"{category.__name__}: {message}", None, None))
        say(f"warning: {category.__name__}: {message}")

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown
        for name, (handlers, propagate) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers, logger.propagate = handlers, propagate
        handler.close()
