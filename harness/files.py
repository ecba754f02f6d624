"""Files written so that a crash never leaves half of one: whole-file atomic writes, files
of lines, and the lock two processes take to rewrite one file."""

from __future__ import annotations

import errno
import os
import secrets
import time
from pathlib import Path

from filelock import FileLock

try:
    import fcntl
except ImportError:  # Windows: PathLock falls back to filelock's own lock
    fcntl = None  # type: ignore[assignment]


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


class LockTimeout(TimeoutError):
    """A lock another process held for longer than the caller would wait."""


class PathLock:
    """An inter-process lock: an exclusive flock on the file `lock_file`, which may be removed
    when no one needs it (remove_lock) without breaking the lock.

    The rule that makes removing it safe: a lock file is removed only by a process holding
    it, and every taker, once its flock succeeds, checks that the file it locked is still
    the one at the path (linked, same inode), and else opens the path again. A process that
    opened the file before it was removed and waited on it thus never counts that old file
    as the lock while another holds the new one. (A plain filelock.FileLock leaves its file
    for good: removing one under a waiting FileLock of an older filelock would let two
    processes in.) Where flock is missing (Windows), it is a filelock.FileLock, never removed.
    """

    POLL_S = 0.05

    def __init__(self, lock_file: Path, timeout: float = -1) -> None:
        self.lock_file, self.timeout = Path(lock_file), timeout
        self._fd: int | None = None
        self._fallback = FileLock(self.lock_file, timeout=timeout) if fcntl is None else None

    def acquire(self, timeout: float | None = None) -> bool:
        """Take the lock, waiting up to `timeout` s (negative: as long as it takes; 0: not at
        all); LockTimeout when it stays held."""
        timeout = self.timeout if timeout is None else timeout
        if self._fallback is not None:
            self._fallback.acquire(timeout=timeout)
            return True
        deadline = time.monotonic() + timeout
        while True:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                if timeout < 0:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # a stop signal still interrupts the wait
                else:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"{self.lock_file}: held by another process for more "
                                      f"than {timeout:g} s") from None
                time.sleep(self.POLL_S)
                continue
            except BaseException:
                os.close(fd)
                raise
            if self._current(fd):
                self._fd = fd
                return True
            os.close(fd)  # its holder removed it meanwhile: take the file at the path now

    def _current(self, fd: int) -> bool:
        """Whether the locked descriptor is the file at the path (not one removed since)."""
        held = os.fstat(fd)
        try:
            return held.st_nlink > 0 and os.path.samestat(held, os.stat(self.lock_file))
        except FileNotFoundError:
            return False

    def release(self, remove: bool = False) -> None:
        """Let the lock go; with `remove`, remove its file first, while still holding it."""
        if self._fallback is not None:
            self._fallback.release()
            return
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if remove:
                self.lock_file.unlink(missing_ok=True)
        finally:
            os.close(fd)  # closing the last descriptor of it lets the flock go

    def __enter__(self) -> PathLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_file(path: Path) -> Path:
    """The lock file of a read-modify-write of `path`: `.NAME.lock` beside it."""
    return Path(path).with_name(f".{Path(path).name}.lock")


def locked(path: Path) -> PathLock:
    """An inter-process lock for a read-modify-write of `path`: two sweeps writing into one
    folder would otherwise each rewrite the file from what they read, losing the other's
    rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return PathLock(lock_file(path))


def remove_lock(lock: Path) -> bool:
    """Remove the lock file `lock` if no process holds it now (PathLock's rule: only a holder
    removes one); True if it is gone. A held one stays for its holder, or the last of those
    waiting, to remove."""
    if not Path(lock).exists():
        return True
    taken = PathLock(Path(lock), timeout=0)
    try:
        taken.acquire()
    except LockTimeout:
        return False
    taken.release(remove=True)
    return True


def user_cache() -> Path:
    """tvr-bench's folder in the user's cache: ~/.cache/tvr-bench, or under $XDG_CACHE_HOME."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tvr-bench"
