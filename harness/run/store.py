"""Where MLflow tracking goes: the tracking URI chosen, checked and (SQLite) safely created.

A URI that cannot mean a store (unknown scheme, malformed, in-memory) is bad input. A store
that exists but cannot work now (a server that stopped answering, a database without its
driver, a locked, foreign or half-built SQLite file) is a `problem`: the sweep measures on
without tracking and says so in one line, since the results CSV needs no MLflow. Every
check ends within a few seconds, and passwords never appear in a message (`mask`). A
tracking server asked for that does not answer at the start is bad input (`check_reachable`):
`tvr run` and `tvr sync` refuse it before any work.
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from harness.errors import BadInput

DISABLED = "none"
PROBE_TIMEOUT_S = 3.0
_DATABASES = ("sqlite", "postgresql", "mysql", "mssql")  # MLflow's SQLAlchemy stores
_SERVERS = ("http", "https")
DATABRICKS = "databricks"  # "databricks" or "databricks://PROFILE": a remote workspace
# Ports the database servers listen on when the URI names none.
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
# The pip package that provides each DB-API module SQLAlchemy may ask for.
_DRIVER_PACKAGES = {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary",
                    "pg8000": "pg8000", "asyncpg": "asyncpg", "MySQLdb": "mysqlclient",
                    "pymysql": "PyMySQL", "mysql": "mysql-connector-python",
                    "pyodbc": "pyodbc", "pymssql": "pymssql"}
_ALLOWED = "sqlite:///PATH, postgresql://..., mysql://..., mssql://..., http(s)://HOST:PORT, " \
           "databricks[://PROFILE], or 'none'"


def mask(uri: str) -> str:
    """The URI with its password, if any, replaced by ***."""
    return re.sub(r"(://[^/:@]*):[^/]*@", r"\1:***@", uri)


def without_credentials(uri: str) -> tuple[str, str | None, str | None]:
    """A server URI as (URI without user and password, user, password). MLflow takes a
    server's credentials from $MLFLOW_TRACKING_USERNAME/PASSWORD; a URI that carries them
    would be echoed by MLflow's own messages, password included."""
    if _scheme(uri) not in _SERVERS:
        return uri, None, None
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri, None, None
    netloc = parts.hostname or ""
    netloc = f"[{netloc}]" if ":" in netloc else netloc
    netloc += f":{parts.port}" if parts.port else ""
    plain = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query,
                                     parts.fragment))
    unquote = urllib.parse.unquote
    return (plain, unquote(parts.username or ""),
            None if parts.password is None else unquote(parts.password))


def sqlite_uri(path: Path) -> str:
    """sqlite:/// URI of a file, percent-encoded: SQLAlchemy decodes %XX and splits at "?",
    so a folder named "a%20b" or "q?x=1" would otherwise send the store elsewhere."""
    return "sqlite:///" + urllib.parse.quote(Path(path).resolve().as_posix(), safe="/")


def _scheme(uri: str) -> str:
    """'postgresql+psycopg2://...' -> 'postgresql'; 'databricks' -> 'databricks'; a bare
    path -> ''."""
    if uri.strip().lower() == DATABRICKS:  # MLflow's only scheme that needs no colon
        return DATABRICKS
    head, sep, _ = uri.partition(":")
    return head.split("+")[0].lower() if sep else ""


def is_remote(uri: str) -> bool:
    """Whether the store keeps artifacts itself (a server or Databricks), not on local disk."""
    return _scheme(uri) in (*_SERVERS, DATABRICKS)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a sqlite:/// URI (None for other URIs and in-memory databases)."""
    if _scheme(uri) != "sqlite":
        return None
    rest = uri.split("://", 1)[-1].split("?", 1)[0]
    path = rest[1:] if rest.startswith("/") else rest  # sqlite:///rel.db, sqlite:////abs.db
    path = urllib.parse.unquote(path)
    return None if path in ("", ":memory:") else Path(path)


def resolve_tracking_uri(out_dir: Path, uri: str | None) -> str | None:
    """The tracking URI to use, validated as a URI; None means tracking is off ("none").

    Precedence: `uri` (--tracking-uri), then $MLFLOW_TRACKING_URI, then a SQLite file
    `<out>/mlflow.db`. Raises BadInput for an unknown scheme, a malformed URI, an in-memory
    SQLite store (its runs would vanish with the process) or a SQLite file that cannot be
    created. Whether the store works now is `problem`'s question.
    """
    chosen = uri or os.environ.get("MLFLOW_TRACKING_URI") or \
        sqlite_uri(Path(out_dir) / "mlflow.db")
    if chosen.strip().lower() == DISABLED:
        return None
    scheme = _scheme(chosen)
    if scheme in ("", "file"):
        # MLflow 3 refuses the file store ("maintenance mode") unless explicitly allowed.
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("1", "true"):
            raise BadInput(f"tracking URI {mask(chosen)!r} is a file store, which MLflow "
                           f"refuses: use sqlite:///PATH/mlflow.db (allowed: {_ALLOWED})")
    elif scheme in _SERVERS:
        _server_url(chosen)
    elif scheme == "sqlite":
        chosen = _check_sqlite(chosen)
    elif scheme in _DATABASES:
        _database_url(chosen)
    elif scheme != DATABRICKS:
        raise BadInput(f"unknown tracking URI scheme {scheme!r} in {mask(chosen)!r}; "
                       f"allowed: {_ALLOWED}")
    return chosen


def problem(uri: str) -> str | None:
    """Why the store behind a resolved URI cannot be used right now, or None if it can."""
    scheme = _scheme(uri)
    try:
        if scheme in _SERVERS:
            _probe(uri)
        elif scheme == "sqlite":
            path = sqlite_path(uri)
            return sqlite_problem(path) if path is not None else None
        elif scheme in _DATABASES:
            _check_database(uri)
    except BadInput as e:
        return str(e)
    return None


def check_reachable(uri: str) -> None:
    """BadInput, within PROBE_TIMEOUT_S, when `uri` names a tracking server that does not
    answer: asking for a shared server and silently measuring without it is a mistake the
    user should hear of before any point runs. A server that goes away later is `problem`'s
    case (the sweep measures on; `tvr sync` catches up)."""
    if _scheme(uri) in _SERVERS:
        _probe(uri)


def _server_url(uri: str) -> urllib.parse.SplitResult:
    """The server URI split, credentials included; BadInput if it is malformed."""
    try:
        parts = urllib.parse.urlsplit(uri)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError as e:
        raise BadInput(f"tracking URI {mask(uri)!r} is malformed ({e})") from None
    if not parts.hostname:
        raise BadInput(f"tracking URI {mask(uri)!r} names no host")
    return parts


def _probe(uri: str) -> None:
    """Fail fast on a server that does not answer: MLflow's own client retries for minutes.
    The probe goes to /health without the URI's credentials (urllib reads "user:pass@host"
    as the host)."""
    parts = _server_url(uri)
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") + "/health",
                                   "", ""))
    uri = mask(uri)
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        return  # it answered; a 404/401 here is the server's business, not unreachability
    except ValueError as e:  # urllib's InvalidURL and urlparse's errors are ValueErrors
        raise BadInput(f"tracking URI {uri!r} is malformed ({e})") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise BadInput(f"tracking URI {uri} is unreachable ({reason}); start the server, "
                       "pass another --tracking-uri, or 'none' to turn tracking off") from e


def _database_url(uri: str):  # noqa: ANN202 -- a sqlalchemy URL, imported lazily
    """The database URI parsed by SQLAlchemy; BadInput if it is malformed."""
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError
    except ImportError as e:
        raise BadInput(f"tracking URI {uri.split('://')[0]}://...: MLflow (with SQLAlchemy) "
                       "is not installed here; install it or pass --tracking-uri none") from e
    from sqlalchemy.exc import NoSuchModuleError

    try:
        url = make_url(uri)
    except (ArgumentError, ValueError) as e:
        raise BadInput(f"tracking URI {mask(uri)} is malformed ({e})") from None
    try:
        url.get_dialect()
    except NoSuchModuleError as e:
        raise BadInput(f"tracking URI {url.render_as_string(hide_password=True)}: unknown "
                       f"database driver {url.drivername!r}; allowed: {_ALLOWED}") from e
    return url


def _check_database(uri: str) -> None:
    """Fail fast on a database server that does not answer or whose driver is missing.

    MLflow would otherwise crash with ModuleNotFoundError, or retry the connection for
    minutes. A plain TCP connect checks the host without needing the driver; the password
    is masked in every message.
    """
    url = _database_url(uri)
    shown = url.render_as_string(hide_password=True)
    dialect = url.get_dialect()
    if url.host:  # None: a local Unix socket, which the driver finds by itself
        port = url.port or _DEFAULT_PORTS[_scheme(uri)]
        try:
            with socket.create_connection((url.host, port), timeout=PROBE_TIMEOUT_S):
                pass
        except OSError as e:
            raise BadInput(f"tracking URI {shown} is unreachable ({url.host}:{port}: {e}); "
                           "start the database, pass another --tracking-uri, or 'none' to "
                           "turn tracking off") from e
    try:
        dialect.import_dbapi()
    except ImportError as e:
        module = (e.name or "").split(".")[0]
        package = _DRIVER_PACKAGES.get(module, module or "its DB-API driver")
        raise BadInput(f"tracking URI {shown}: database driver {module or '?'} is not "
                       f"installed; pip install '{package}', or pass --tracking-uri none") from e


def _check_sqlite(uri: str) -> str:
    """Check the database file can be created; return the URI with an absolute path.

    The absolute path keeps `tvr ui` and a later run on the same file whatever their cwd.
    """
    path = sqlite_path(uri)
    if path is None:
        raise BadInput(f"tracking URI {uri!r} is an in-memory store: its runs vanish when "
                       "the run ends; use sqlite:///PATH/mlflow.db, or 'none'")
    path = path.resolve()
    existing = path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise BadInput(f"tracking URI {uri}: {existing} is not a directory")
    target = path if path.exists() else existing
    if not os.access(target, os.W_OK):
        raise BadInput(f"tracking URI {uri}: {target} is not writable")
    query = uri.partition("?")[2]
    return sqlite_uri(path) + (f"?{query}" if query else "")


# ---------------------------------------------------------------- the SQLite file

SQLITE_MAGIC = b"SQLite format 3\x00"
LOCKED_WAIT_S = 5.0  # how long a check waits for another writer's lock before saying so
REPAIR = "`tvr doctor --repair` moves it aside and rebuilds the runs from the results CSVs"


def sqlite_problem(path: Path) -> str | None:
    """Why an existing SQLite store cannot be used (not a file, not SQLite, locked, corrupt,
    half-built by an interrupted first run), or None; a missing file is no problem."""
    if not path.exists():
        return None
    if not path.is_file():
        return f"{path} is not a file"
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        return f"{path} is not an SQLite database; {REPAIR}"
    try:
        con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=LOCKED_WAIT_S)
        try:
            tables = {r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            check = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError as e:
        if "locked" in str(e):
            return f"{path} is locked by another process (waited {LOCKED_WAIT_S:.0f} s)"
        return f"{path} cannot be read ({e}); {REPAIR}"
    except sqlite3.DatabaseError as e:
        return f"{path} is corrupt ({e}); {REPAIR}"
    if any(t.startswith("_alembic_tmp_") for t in tables) or \
            (tables and "alembic_version" not in tables):
        return f"{path} is half-built (a first run was stopped while creating it); {REPAIR}"
    if check != "ok":
        return f"{path} is corrupt ({check}); {REPAIR}"
    return None


def create_sqlite(path: Path, build: Callable[[str], None]) -> None:
    """Create the store at `path` if it is missing, never half: `build(uri)` builds the
    schema in a temporary file, which replaces `path` only once complete, under a file lock
    so that two first runs build it once. A build interrupted by a kill leaves only the
    temporary file, which the next creation removes."""
    from filelock import FileLock

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(f".{path.name}.lock")):
        if path.exists():
            return
        for stale in path.parent.glob(f".{path.name}.*.building*"):
            stale.unlink(missing_ok=True)  # a killed build's leftovers: no one else builds
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.time_ns()}.building")
        try:
            build(sqlite_uri(tmp))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

