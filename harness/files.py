"""Files written so that a crash never leaves half of one: whole-file atomic writes, files
of lines, and the lock two processes take to rewrite one file."""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

from filelock import FileLock


def write_lines(path: Path, lines: list[str]) -> None:
    """One line per item (hypotheses, references), written atomically; a line break inside
    an item would shift every later line, so none may hold one."""
    if any("\n" in line or "\r" in line for line in lines):
        raise ValueError(f"{path.name}: an item holds a line break")
    write_atomic(path, "".join(line + "\n" for line in lines))


def read_lines(path: Path) -> list[str]:
    """What write_lines wrote."""
    text = Path(path).read_text(encoding="utf-8")
    return text.split("\n")[:-1] if text else []


def write_atomic(path: Path, text_or_bytes: str | bytes) -> None:
    """Write a whole file so readers see the old content or the new one, never a mix.

    The data goes to a temp file in the same directory (os.replace is atomic only within one
    filesystem), is fsynced, then renamed over `path`; on any failure the temp file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else text_or_bytes
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as a plain open() would;
    # tempfile.mkstemp would leave results readable by the owner only.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself; without this a power cut can undo os.replace."""
    if os.name != "posix":  # Windows cannot open a directory; its rename is durable enough
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})  # no space left, or no quota left
# How a database says so in its message (SQLite's SQLITE_FULL; a server's strerror)
_FULL_WORDS = ("database or disk is full", os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))


def disk_full(exc: BaseException) -> tuple[str, str | None] | None:
    """(what says so, the file if known) when `exc`, or an exception it was raised from or
    while handling (a driver's error wrapped by SQLAlchemy, then by a one-line BadInput),
    says the disk is full; else None."""
    chain: list[BaseException] = []
    todo: list[object] = [exc]
    while todo:
        e = todo.pop()
        if isinstance(e, BaseException) and all(e is not c for c in chain):
            chain.append(e)
            todo += [e.__cause__, e.__context__, getattr(e, "orig", None)]
    for e in chain:  # the system's own error first: it names the file
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            name = e.filename if e.filename is None else os.fsdecode(e.filename)
            return e.strerror or os.strerror(e.errno), name
    for e in chain:
        said = next((w for w in _FULL_WORDS if w in str(e)), None)
        if said is not None:
            return said, None
    return None


def locked(path: Path) -> FileLock:
    """An inter-process lock for a read-modify-write of `path`: two sweeps writing into one
    folder would otherwise each rewrite the file from what they read, losing the other's
    rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path.with_name(f".{path.name}.lock"))


def user_cache() -> Path:
    """tvr-bench's folder in the user's cache: ~/.cache/tvr-bench, or under $XDG_CACHE_HOME."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tvr-bench"
