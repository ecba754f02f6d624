"""SIGTERM and SIGINT stop a sweep cleanly: the point in flight is dropped (its row never
half-written), the MLflow parent run is marked KILLED, and the command exits 143 or 130.

The same from the first instant of a command (`early`: while Python still imports, a stop
is a plain exit with the signal's code) and under every executor: Ray's wait turns the
Stopped raised in its call into a plain KeyboardInterrupt, so the signal that arrived is
remembered here (`exit_code`) rather than read from the exception.

A stop that arrives inside an `uncut` block (the tracker's store writes) waits until the block
ends: a Stopped raised inside SQLAlchemy's commit, or inside its session's close, can leave the
SQLite write lock held by a connection never handed back, and every later write of the process
(marking the point's and the parent's runs KILLED) then waits out MLflow's 20 s busy timeout
and fails, leaving the parent RUNNING."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

SIGNALS = (signal.SIGTERM, signal.SIGINT)
T = TypeVar("T")
# The stop signals the command was started ignoring: a shell starts `tvr ... &` in a script
# ignoring SIGINT, `nohup tvr ...` ignoring SIGHUP. They stay ignored for the whole command,
# as Python itself leaves an ignored SIGINT ignored (recorded by `early`).
_ignored: set[int] = set()
_received: list[int] = []  # the first stop signal of this process, if any
_pending: list[int] = []  # a stop signal inside stop_on_signals not yet acted on
_uncut: list[None] = []  # one entry per `uncut` block the main thread is in


class Stopped(KeyboardInterrupt):
    """Raised where the sweep was when a stop signal arrived; a KeyboardInterrupt, so every
    `except Exception` lets it through and the tracker marks the parent run KILLED."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.name = signal.Signals(signum).name
        self.exit_code = 128 + signum  # the shell's convention: 143 SIGTERM, 130 SIGINT


def received() -> int:
    """The stop signal this process got (SIGINT for a KeyboardInterrupt of no signal)."""
    return _received[0] if _received else int(signal.SIGINT)


def exit_code() -> int:
    return 128 + received()


def name() -> str:
    return signal.Signals(received()).name


def _stop(signum: int, _frame: FrameType | None) -> None:
    """Turn the first SIGTERM or SIGINT into Stopped; later ones are ignored while the sweep
    cleans up (a second Ctrl-C must not cut the parent run's KILLED mark short)."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    _received.append(signum)
    _pending.append(signum)
    if not _uncut:  # else raised where the outermost uncut block ends
        raise Stopped(signum)


@contextmanager
def uncut() -> Iterator[None]:
    """A block a stop signal does not cut: one that arrives inside is raised as Stopped where
    the outermost block ends (not when the block itself raises: the signal stays pending, and
    the sweep's `check` raises it). Usable as a decorator."""
    arrived = len(_received)
    _uncut.append(None)
    try:
        yield
    finally:
        _uncut.pop()
    if not _uncut and len(_received) > arrived and _pending:
        raise Stopped(_pending[0])


def check() -> None:
    """Raise Stopped again for a stop signal whose Stopped was lost: Python runs the handler
    between any two bytecodes, and one raised inside a weakref callback or a __del__
    (SQLAlchemy's session cleanup, say) is printed as "Exception ignored" and dropped, so the
    sweep would run on and exit 0. The sweep checks between points (`checked`)."""
    if _pending:
        raise Stopped(_pending[0])


def checked(items: Iterable[T]) -> Iterator[T]:
    """`items`, with `check` after the caller has handled each one and after the last: a
    sweep's loop over finished points stops at the next point when a stop was swallowed."""
    for item in items:
        yield item
        check()
    check()


def _stop_early(signum: int, _frame: FrameType | None) -> None:
    """Outside a sweep nothing is held that a stop must close (no row half-written: files
    are replaced whole; no run; no Ray instance): exit at once with the signal's code and one
    line. Not by raising: an exception thrown into an import half-way (numpy's C module,
    say) makes a later import fail with a traceback."""
    _received.append(signum)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken pipe: the exit code still says it
    os.write(2, f"stopped by {signal.Signals(signum).name}\n".encode())
    os._exit(128 + signum)


def early() -> None:
    """From the first instant of the command until its sweep starts: a stop exits at once
    with 143/130 (stop_on_signals then takes over, and `arm` after a Ray instance starts).
    A signal the command was started ignoring stays ignored."""
    _ignored.update(s for s in (*SIGNALS, signal.SIGHUP)
                    if signal.getsignal(s) is signal.SIG_IGN)
    for s in handled(SIGNALS):
        signal.signal(s, _stop_early)


def handled(signals: tuple[int, ...]) -> tuple[int, ...]:
    """Those of `signals` the command may take: not the ones it was started ignoring."""
    return tuple(s for s in signals if s not in _ignored)


def arm() -> None:
    """Once the command holds something to close (a Ray instance it started): a stop raises
    Stopped where the command is, so that it closes on the way out. Only where `early` took
    the signals: a test calling the command in-process keeps its own handlers."""
    for s in SIGNALS:
        if signal.getsignal(s) is _stop_early:
            signal.signal(s, _stop)


def stopped_exit(csv: object = None) -> SystemExit:
    """The one line and exit code (143/130) of a command a stop signal ended."""
    where = (f": the point in flight was dropped, every finished one is in {csv}; the same "
             "command resumes") if csv is not None else ""
    print(f"stopped by {name()}{where}", file=sys.stderr, flush=True)
    return SystemExit(exit_code())


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Stop signals raise Stopped inside the block (whatever a library such as Ray set in
    between), but for one the command was started ignoring; the handlers before it come back
    after."""
    old = {s: signal.signal(s, _stop) for s in handled(SIGNALS)}
    hook = sys.unraisablehook

    def quiet(unraisable: Any) -> None:
        """A Stopped swallowed in a callback is not printed as a traceback: it is pending,
        and `check` raises it again; anything else goes to the hook before."""
        if not isinstance(unraisable.exc_value, Stopped):
            hook(unraisable)

    sys.unraisablehook = quiet
    try:
        yield
    finally:
        _pending.clear()  # acted on: the block is left
        sys.unraisablehook = hook
        for s, handler in old.items():
            signal.signal(s, handler)
