"""Which machine measured a row: this one's name (`TVR_MACHINE`, else its host and a kept
tag), and which machine's rows a report shows (one per suite, so tables never mix two
machines' timings; `--machine` picks one)."""

from __future__ import annotations

import os
import secrets
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import pandas as pd

from harness.files import LockTimeout, locked, write_atomic

MACHINE_ENV = "TVR_MACHINE"
_MACHINE_FILE = Path.home() / ".config" / "tvr-bench" / "machine-id"


def this_machine() -> str:
    """This machine's name in the `machine` column: $TVR_MACHINE if set, else the host name
    and a random tag drawn once and kept in ~/.config/tvr-bench/machine-id. Host names alone
    repeat across VMs and containers (and images share /etc/machine-id), so two machines
    sharing a results folder would take each other's rows for their own."""
    name = os.environ.get(MACHINE_ENV, "").strip()
    return name or this_host()


def this_host() -> str:
    """The host this process runs on, whatever $TVR_MACHINE says: its host name and the tag
    kept in ~/.config/tvr-bench/machine-id. What depends on the hardware itself (which
    kernel is faster) is keyed by this, not by a label a user pins across sittings."""
    global _machine_tag
    if _machine_tag is None:
        _machine_tag = _kept_tag(_MACHINE_FILE)
    return f"{socket.gethostname()}-{_machine_tag}"


_machine_tag: str | None = None  # read once per process: every row of a run names one machine


def _kept_tag(path: Path) -> str:
    """The tag kept in `path`, drawn and written first if missing: under a lock beside it,
    read again and written whole (write_atomic), so two first runs agree on one tag and no
    reader sees it half-written. An empty file (left by a run killed mid-write under an
    older version) is replaced, never kept."""
    try:
        tag = _read_tag(path)
        if not tag:
            with locked(path):
                tag = _read_tag(path)  # another run's, drawn while this one waited
                if not tag:
                    write_atomic(path, secrets.token_hex(3) + "\n")
                    tag = _read_tag(path)
    except (OSError, LockTimeout) as exc:
        return _unkept_tag(path, exc)
    return tag or _unkept_tag(path, RuntimeError("the file stays empty"))


def _read_tag(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip() if path.exists() else ""


def _unkept_tag(path: Path, why: BaseException) -> str:
    print(f"warning: cannot keep this machine's tag in {path} ({why}); set {MACHINE_ENV} to "
          "name this machine, or each run counts as a new machine", file=sys.stderr)
    return secrets.token_hex(3)


_chosen_machine: ContextVar[str | None] = ContextVar("chosen_machine", default=None)


def chosen_machine() -> str | None:
    """The machine named by the enclosing machine_choice, if any."""
    return _chosen_machine.get()


@contextmanager
def machine_choice(name: str | None) -> Iterator[None]:
    """Within this block, reports show machine `name` (`--machine NAME`) in every suite
    where it has rows; None keeps the default choice (see one_machine)."""
    token = _chosen_machine.set(name)
    try:
        yield
    finally:
        _chosen_machine.reset(token)


def covered(frame: pd.DataFrame) -> pd.Series:
    """Points each machine measured ok (every row counts where none is ok), most first."""
    ok = frame[frame["status"] == "ok"] if (frame["status"] == "ok").any() else frame
    counts = ok.groupby(ok["machine"].astype(str))["point_id"].nunique()
    return counts.sort_values(ascending=False, kind="stable")


def pick_machine(frame: pd.DataFrame, machine: str | None = None) -> str:
    """The machine whose rows a report of this suite shows: `machine` (or --machine) where it
    has rows; else this machine if its rows cover the suite as well as any other's; else the
    machine that measured the most points (the reference committed with the code,
    typically): a partial set of this machine's rows never hides a complete reference."""
    names = frame["machine"].astype(str)
    wanted = machine or _chosen_machine.get()
    if wanted and (names == wanted).any():
        return wanted
    counts = covered(frame)
    mine = this_machine()
    if mine in counts and counts[mine] >= counts.iloc[0]:
        return mine
    return str(counts.index[0])


def one_machine(frame: pd.DataFrame, machine: str | None = None) -> pd.DataFrame:
    """The rows of one machine (pick_machine), so tables never mix two machines' timings."""
    if frame.empty or "machine" not in frame:
        return frame
    return frame[frame["machine"].astype(str) == pick_machine(frame, machine)]


def machine_note(every: pd.DataFrame, shown: str, suite: str) -> str:
    """Whose rows a suite's table shows, in words: this machine's, or the reference's and
    why (this machine's rows cover fewer of the suite's points)."""
    if shown == this_machine():
        return "this machine"
    if shown == _chosen_machine.get():
        return "chosen with --machine"
    counts = covered(every) if "machine" in every and len(every) else pd.Series(dtype=int)
    mine = counts.get(this_machine(), 0)
    if mine:
        return (f"the reference: this machine's rows cover {mine} of its {counts[shown]} "
                f"points; `tvr run {suite}` completes them, --machine picks one")
    return f"the reference: this machine has no rows here yet, `tvr run {suite}` measures them"
