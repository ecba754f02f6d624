"""SIGTERM and SIGINT stop a sweep cleanly: the point in flight is dropped (its row never
half-written), the MLflow parent run is marked KILLED, and the command exits 143 or 130."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(KeyboardInterrupt):
    """Raised where the sweep was when a stop signal arrived; a KeyboardInterrupt, so every
    `except Exception` lets it through and the tracker marks the parent run KILLED."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.name = signal.Signals(signum).name
        self.exit_code = 128 + signum  # the shell's convention: 143 SIGTERM, 130 SIGINT


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn the first SIGTERM or SIGINT into Stopped; later ones are ignored while the sweep
    cleans up (a second Ctrl-C must not cut the parent run's KILLED mark short)."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise Stopped(signum)

    old = {s: signal.signal(s, stop) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
