"""Inputs checked before they are read, each with a bound: a path names a regular file of at
most a given size (never a FIFO, which blocks the read forever, a device such as /dev/zero,
which never ends, or a file of /proc or /sys, whose size says nothing of its content), and
a text from the command line (a path, a URI) holds no NUL byte, no undecodable byte and no
more characters than a file system takes; a path the system refuses (a loop of links, a
name too long, no permission, a read-only file system, a file where a folder should be) is
one line of bad input, wherever it shows."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from harness.errors import BadInput

MAX_PATH_CHARS = 4096  # Linux's PATH_MAX: a longer path fails in every system call
MAX_NAME_BYTES = 255  # NAME_MAX: the longest file or folder name
_VIRTUAL = ("/proc", "/sys", "/dev")  # file systems whose files are not stored data


def check_text(text: str, what: str) -> str:
    """`text` (a path or URI from the command line) as given; BadInput for a NUL byte, a
    byte that is not UTF-8 (Python keeps it as a lone surrogate), or an overlong text."""
    shown = _shown(text, 60)
    if "\0" in text:
        raise BadInput(f"{what} {shown!r}: holds a NUL byte")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{what} {shown!r}: holds a byte that is not UTF-8 text") from None
    if len(text) > MAX_PATH_CHARS:
        raise BadInput(f"{what} {shown!r}: {len(text):,} characters; at most "
                       f"{MAX_PATH_CHARS:,}")
    return text


def _shown(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, printable whatever bytes it holds."""
    shown = text[:limit].encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    return shown + ("..." if len(text) > limit else "")


def check_path(path: str | os.PathLike, what: str) -> Path:
    """check_text, plus no name in the path longer than NAME_MAX bytes."""
    text = check_text(os.fspath(path), what)
    for part in Path(text).parts:
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise BadInput(f"{what} {text[:60]!r}...: a name of {len(part.encode()):,} bytes; "
                           f"a file system takes at most {MAX_NAME_BYTES}")
    return Path(text)


def folder_name(name: str, what: str) -> str:
    """`name` as one folder right under --out (a suite's results folder); BadInput for a name
    that would lead elsewhere: a path separator, '.' or '..', an absolute path, nothing."""
    check_text(name, what)
    separators = {"/", "\\", os.sep, os.altsep or "/"}
    if not name.strip() or name in (".", "..") or any(s in name for s in separators) or \
            os.path.isabs(name):
        raise BadInput(f"{what} {_shown(name, 60)!r}: not a folder name under --out (one name: "
                       "no '/' or '\\', not '.' or '..', not an absolute path)")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise BadInput(f"{what} {_shown(name, 60)!r}: too long, a name of "
                       f"{len(name.encode()):,} bytes; a file system takes at most "
                       f"{MAX_NAME_BYTES}")
    return name


# What the system says of a path itself, not of the data in it: bad input, one line
PATH_ERRNOS = frozenset({errno.ELOOP, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM,
                         errno.EROFS, errno.ENOTDIR, errno.EISDIR})


def path_error(exc: OSError, what: str = "") -> BadInput:
    """One line for an OSError a path gave: the path (both, for a rename) and the system's
    words, with what to do for a permission or a read-only file system."""
    names = [os.fsdecode(n) for n in (exc.filename, exc.filename2) if n is not None]
    shown = " -> ".join(_shown(n, 200) for n in names) or "a path"
    hint = {errno.EACCES: "; check its permissions and its folders'",
            errno.EPERM: "; check its permissions and attributes (chattr)",
            errno.EROFS: "; choose a writable place"}.get(exc.errno, "")
    return BadInput(f"{what + ' ' if what else ''}{shown}: {exc.strerror or exc}{hint}")


def check_lookup(path: str | os.PathLike, what: str) -> Path:
    """check_path, plus BadInput where the system cannot look the path up at all (a loop of
    links, no permission on a folder on its way); a path that does not exist, or lies under
    a file and so cannot, passes: whether it must exist is the caller's to say."""
    p = check_path(path, what)
    try:
        os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise path_error(exc, what) from None
    return p


def resolved(path: str | os.PathLike, what: str) -> Path:
    """check_path, then the absolute path with its links followed; a loop of links is bad
    input (Python 3.11's pathlib raises RuntimeError for one)."""
    p = check_path(path, what)
    try:
        return p.resolve()
    except RuntimeError:
        raise BadInput(f"{what} {p}: a loop of symbolic links") from None
    except OSError as exc:
        raise path_error(exc, what) from None


def is_virtual(path: Path) -> bool:
    """Whether `path` lies in /proc, /sys or /dev (after resolving links)."""
    resolved = Path(os.path.realpath(path)).as_posix()
    return any(resolved == v or resolved.startswith(v + "/") for v in _VIRTUAL)


def regular_file(path: str | os.PathLike, limit: int, what: str) -> Path:
    """`path` checked as a regular, stored file of at most `limit` bytes, without opening it
    (opening a FIFO blocks); BadInput naming `what` and the bound otherwise."""
    p = check_path(path, what)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise BadInput(f"{what} {p}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode) or is_virtual(p):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device"
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a folder"
                if stat.S_ISDIR(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a file of a virtual file system")
        raise BadInput(f"{what} {p}: {kind}, not a regular file")
    if st.st_size > limit:
        raise BadInput(f"{what} {p}: {st.st_size:,} bytes; at most {limit:,} are read")
    return p


def read_bounded(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (regular_file), opened without
    blocking and checked again once open (a FIFO put in its place meanwhile stays refused),
    and read with the bound itself: a file that grows while it is read stops there."""
    p = regular_file(path, limit, what)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise BadInput(f"{what} {p}: not a regular file")
            data = f.read(limit + 1)
    except OSError as exc:
        raise BadInput(f"{what} {p}: cannot be read ({exc.strerror})") from None
    if len(data) > limit:
        raise BadInput(f"{what} {p}: over {limit:,} bytes; at most {limit:,} are read")
    return data


def check_table(path: Path, frame: Any) -> None:
    """BadInput for a results file read into `frame` (pandas) that is not whole: a row with
    more fields than the header (pandas would make the extra ones an index), a last line cut
    short (every row the harness writes ends its line). A bad cell (a status no run writes,
    a number that is not one) is the reader's to skip (harness.results)."""
    import pandas as pd

    if not isinstance(frame.index, pd.RangeIndex):
        raise BadInput(f"{path}, line 2: more fields than the header; fix or remove that row")
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                raise BadInput(f"{path}, line {len(frame) + 1}: cut short (no line end: a "
                               "copy or an editor stopped mid-row); fix or remove that row")
