"""The SQLite file of a local MLflow store: checked, recovered in place, created whole.

A writer killed inside a transaction leaves a hot journal (`mlflow.db-journal`) or a WAL
(`mlflow.db-wal`) beside a sound file: SQLite rolls the one back and replays the other the
next time the file is opened read-write, so the check opens it read-write (a read-only open
cannot, and would call a sound store unwritable). Only a file that cannot be opened, is not
SQLite, or fails its integrity check is a problem that `tvr doctor --repair` moves aside.
Every wait (SQLite's busy lock, the file lock beside the store) has a bound and a message.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.files import LockTimeout, PathLock, lock_file
from harness.inputs import is_virtual, resolved

SQLITE_MAGIC = b"SQLite format 3\x00"
LOCKED_WAIT_S = 5.0  # how long a check waits for another writer's lock before saying so
LOCK_TIMEOUT_S = 30.0  # the file lock: a first run builds the schema in a few seconds
REPAIR = "`tvr doctor --repair` moves it aside and rebuilds the runs from the results CSVs"
LEFTOVERS = {"-journal": "a hot journal (a writer was killed inside a transaction)",
             "-wal": "a write-ahead log not yet written back"}


@contextmanager
def store_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the file lock beside the store (`.NAME.lock`) that creation, checks and repairs
    take; LockTimeout (an OSError) after `timeout` seconds. Its holder removes the file on
    release (PathLock's rule, safe for waiters), so a finished run leaves no lock file."""
    lock = PathLock(lock_file(path), timeout=timeout)
    lock.acquire()
    try:
        yield
    finally:
        lock.release(remove=True)


def leftovers(path: Path) -> list[str]:
    """What a killed writer left beside the store (non-empty journal or WAL), described."""
    found = []
    for suffix, what in LEFTOVERS.items():
        part = path.with_name(path.name + suffix)
        if part.is_file() and part.stat().st_size > 0:
            found.append(f"{part.name}: {what}")
    return found


def sqlite_problem(path: Path) -> str | None:
    """Why an existing SQLite store cannot be used (not a regular file, not SQLite, locked,
    corrupt, half-built by an interrupted first run), or None; a missing file is no
    problem. A hot journal or WAL left by a killed writer is recovered here, in place."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    if stat.S_ISDIR(mode):
        return f"{path} is a folder, not the store's file; {REPAIR}"
    if not stat.S_ISREG(mode) or is_virtual(path):
        return f"{path} is not a regular file (a FIFO, a device, /proc?); use another store"
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        return f"{path} is not an SQLite database; {REPAIR}"
    try:
        with store_lock(path):
            return _open_problem(path)
    except LockTimeout:
        return (f"{path}: its lock file .{path.name}.lock stayed held for "
                f"{LOCK_TIMEOUT_S:.0f} s (another tvr creating or repairing it?)")
    except OSError as e:
        return f"{path}: cannot take its lock file ({e.strerror or e})"


def _open_problem(path: Path) -> str | None:
    """sqlite_problem's part that opens the file, read-write so that SQLite recovers it."""
    try:
        con = sqlite3.connect(path, timeout=LOCKED_WAIT_S)
        try:
            tables = {r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            check = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            return f"{path} is locked by another process (waited {LOCKED_WAIT_S:.0f} s)"
        return f"{path} cannot be opened ({e}); {REPAIR}"
    except sqlite3.DatabaseError as e:
        return f"{path} is corrupt ({e}); {REPAIR}"
    if any(t.startswith("_alembic_tmp_") for t in tables) or \
            (tables and "alembic_version" not in tables):
        return f"{path} is half-built (a first run was stopped while creating it); {REPAIR}"
    if check != "ok":
        # quick_check lists every damaged page ("*** in database main ***" first): one line
        found = [x for x in check.splitlines() if not x.startswith("***")]
        detail = f"{found[0][:120]}, and {len(found) - 1} more" if found else check
        return f"{path} is corrupt ({detail}); {REPAIR}"
    return None


def sqlite_uri(path: Path) -> str:
    """sqlite:/// URI of a file, percent-encoded: SQLAlchemy decodes %XX and splits at "?",
    so a folder named "a%20b" or "q?x=1" would otherwise send the store elsewhere."""
    return "sqlite:///" + urllib.parse.quote(resolved(path, "SQLite store").as_posix(), safe="/")


def create_sqlite(path: Path, build: Callable[[Path], None]) -> None:
    """Create the store at `path` if it is missing, never half: `build(file)` builds the
    schema in a temporary file, which replaces `path` only once complete, under the file lock
    so that two first runs build it once. A build interrupted by a kill leaves only the
    temporary file, which the next creation removes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with store_lock(path):
        if path.exists():
            return
        for stale in path.parent.glob(f".{path.name}.*.building*"):
            stale.unlink(missing_ok=True)  # a killed build's leftovers: no one else builds
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.time_ns()}.building")
        try:
            build(tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def move_aside(db: Path) -> Path:
    """Rename a broken SQLite store (file or folder, and its journal files) to a dated
    backup, under the file lock so no first run builds it meanwhile."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = db.with_name(f"{db.name}.broken-{stamp}")
    with store_lock(db):
        for suffix in ("", "-wal", "-shm", "-journal"):
            part = db.with_name(db.name + suffix)
            if part.exists():
                part.rename(backup.with_name(backup.name + suffix))
    return backup
