"""Suite `threads`, parallel hardware without a GPU: each layer's time at a fixed token count
on 1 thread up to every core of this machine, for parallel efficiency over n, with what a
work-span projection needs (counted FLOPs, sequential depth, time per dependent step)
measured at 1 thread.

The thread counts are this machine's (powers of two up to os.cpu_count()), so each machine
measures its own scaling.
"""

from __future__ import annotations

import os

from experiments.complexity import MIXERS
from experiments.spec import Point, ThreadOptions, config

TOKENS = 4096  # B * n at every point: the work per batch is fixed, only n changes
D_MODEL = 128


def thread_counts(cores: int | None = None) -> list[int]:
    """1, 2, 4, ... up to `cores` (default: this machine's), and `cores` itself."""
    cores = max(1, cores or os.cpu_count() or 1)
    counts = [2**k for k in range(cores.bit_length()) if 2**k <= cores]
    return sorted({*counts, cores})


def thread_points(suite: str, ns: tuple[int, ...], cores: int | None = None) -> list[Point]:
    heads = {"self-attention": {"n_heads": 4}}
    return [Point(suite, "threads", mixer, n, D_MODEL, TOKENS // n,
                  config=config(heads.get(mixer, {})), options=ThreadOptions(t))
            for mixer in MIXERS for n in ns for t in thread_counts(cores)]


def threads() -> list[Point]:
    """Self-attention, LSTM and GRU at 4096 tokens per batch, d = 128, n = 64, 256, 1024, on
    1 thread up to every core: parallel efficiency and a work-span projection (under a
    minute on 2 idle cores; minutes when other jobs hold the cores)."""
    return thread_points("threads", (64, 256, 1024))

