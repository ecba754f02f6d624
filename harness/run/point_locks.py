"""Sweeps sharing one folder share its work: a point is claimed before it is measured.

A claim is a small file `<out>/<suite>/.claims/<key>` naming the process that holds it,
taken under the results file's lock (so two sweeps never both take one point) and removed
once the point's row is written and its MLflow run logged. A claim whose process is gone
(killed) has expired: the next sweep takes it over. A row whose claim is held is being
logged by its owner: `tvr sync` and a starting sweep leave it to that owner, so each point
gets one MLflow run however many sweeps run at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from harness.files import LockTimeout, PathLock, lock_file, locked, remove_lock
from harness.track.client import alive

if TYPE_CHECKING:
    import pandas as pd

CLAIMS = ".claims"
SYNC_LOCK_TIMEOUT_S = 600.0  # another sweep logging a killed run's rows: minutes at most


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), so a pid reused by a new
    process is not taken for the claim's owner; None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _alive(owner: dict) -> bool:
    """Whether the process named in a claim still runs (on this host; a claim of another
    host cannot be checked here, so it holds)."""
    if owner.get("host") != socket.gethostname():
        return True
    pid = owner.get("pid")
    if not isinstance(pid, int) or not alive(pid):
        return False
    return owner.get("started") in (None, _started(pid))


class Claims:
    """This process's claims on the points of one results file, for one device and machine
    (the row key: another machine's sweep measures its own rows)."""

    def __init__(self, results: Path, device: str, machine: str) -> None:
        self.results, self.device, self.machine = Path(results), device, machine
        self.folder = self.results.parent / CLAIMS
        self.me = {"pid": os.getpid(), "host": socket.gethostname(),
                   "started": _started(os.getpid())}
        self.mine: set[str] = set()

    def _file(self, point_id: str) -> Path:
        key = f"{point_id}\0{self.device}\0{self.machine}".encode()
        return self.folder / hashlib.sha256(key).hexdigest()[:24]

    def holder(self, point_id: str) -> dict | None:
        """The live process holding the point's claim (this one included), or None."""
        try:
            owner = json.loads(self._file(point_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # no claim, or one cut short by a kill
            return None
        return owner if isinstance(owner, dict) and _alive(owner) else None

    def held_elsewhere(self, point_id: str) -> bool:
        """Whether another live sweep holds the point (it measures and logs it)."""
        owner = self.holder(point_id)
        return owner is not None and owner.get("pid") != self.me["pid"]

    def take(self, point_id: str) -> bool:
        """Claim the point for this process: False if another live sweep holds it. The
        caller holds the results lock (claim_or_skip)."""
        if point_id in self.mine:
            return True
        if self.held_elsewhere(point_id):
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        self._file(point_id).write_text(json.dumps({**self.me, "point_id": point_id}),
                                        encoding="utf-8")
        self.mine.add(point_id)
        return True

    def release(self, point_id: str) -> None:
        """The point is written and logged (or dropped): others may take it again."""
        if point_id in self.mine:
            self._file(point_id).unlink(missing_ok=True)
            self.mine.discard(point_id)

    def release_all(self) -> None:
        for point_id in list(self.mine):
            self.release(point_id)

    def unclaimed(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The rows no other live sweep is still logging."""
        if rows.empty or not self.folder.is_dir():
            return rows
        held = rows["point_id"].astype(str).map(self.held_elsewhere)
        return rows[~held.astype(bool)]


SYNC_LOCK = ".sync.lock"


@contextmanager
def sync_lock(results: Path) -> Iterator[None]:
    """One sync of a suite's rows to MLflow at a time: two sweeps starting together would
    each log the rows a killed run left unlogged."""
    with PathLock(Path(results).with_name(SYNC_LOCK), timeout=SYNC_LOCK_TIMEOUT_S):
        yield


def tidy(results: Path) -> None:
    """What a sweep that ended cleanly leaves of its bookkeeping beside `results`: nothing no
    other process uses. The claims folder goes once empty (under the results lock, which a
    claim is taken under, so no claim is being made in it), then each lock file no process
    holds (harness.files.remove_lock: removed by a holder only, safe for its waiters); one
    a sweep beside this one holds stays, for it to remove."""
    results = Path(results)
    folder = results.parent / CLAIMS
    lock = PathLock(lock_file(results), timeout=0)
    try:
        lock.acquire()
    except LockTimeout:
        return  # a sweep beside this one is writing: the folder is its, for now
    try:
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    finally:
        lock.release(remove=True)
    from harness.results import SERIES_FILE

    for name in (SERIES_FILE, results.name):  # series.csv's lock, and a lock taken since
        remove_lock(lock_file(results.with_name(name)))
    remove_lock(results.with_name(SYNC_LOCK))


def claim_or_skip(claims: Claims, point_id: str, resume: bool) -> str | None:
    """Under the results lock: "done" if (with `resume`) the point has a final row by now,
    "elsewhere" if another live sweep holds it, else None (claimed: measure it)."""
    from harness.results import done_points

    with locked(claims.results):
        if resume and point_id in done_points(claims.results, claims.device, claims.machine):
            return "done"
        return None if claims.take(point_id) else "elsewhere"
