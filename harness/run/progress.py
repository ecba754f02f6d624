"""The sweep's progress bar: tqdm when installed, plain lines on stderr otherwise.

A lent GPU machine (scripts/gpu-check) may have torch and pandas but not tqdm; the sweep must
run there unchanged, so the bar degrades to one line per point.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any


class _Lines:
    """The part of tqdm's interface the sweep uses, printing `suite k/N point (elapsed)`."""

    def __init__(self, items: Sequence[Any], desc: str, enabled: bool) -> None:
        self.items, self.desc, self.enabled = items, desc, enabled
        self.started = time.perf_counter()
        self.done = 0

    def __iter__(self) -> Iterator[Any]:
        for item in self.items:
            yield item
            self.done += 1

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            print(f"{self.desc} {self.done + 1}/{len(self.items)} {text} ({elapsed:.0f} s)",
                  file=sys.stderr, flush=True)

    def update(self, n: int = 1) -> None:
        self.done += n

    def close(self) -> None:
        """Nothing to tear down: every line is already complete."""


def label(point: Any) -> str:
    """A point in a few words for the bar: `lstm n=64 d=32` (the full id is in its row)."""
    return f"{point.subject} n={point.seq_len} d={point.d_model}"


def progress_bar(items: Sequence[Any], desc: str, enabled: bool = True) -> Any:
    """tqdm over items (points done, current point, ETA), or _Lines without tqdm."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _Lines(items, desc, enabled)
    return tqdm(items, desc=desc, unit="pt", file=sys.stderr, disable=not enabled,
                dynamic_ncols=True)
