"""Where MLflow tracking goes: the tracking URI chosen, checked and (SQLite) safely created.

A URI that cannot mean a store (unknown scheme, malformed, in-memory) is bad input. A store
that exists but cannot work now (a server that stopped answering, a database without its
driver, a locked, foreign or half-built SQLite file) is a `problem`: the sweep measures on
without tracking and says so in one line, since the results CSV needs no MLflow. Every
check ends within a few seconds, and passwords never appear in a message (`mask`). A
tracking server asked for that does not answer at the start is bad input (`check_reachable`):
`tvr run` and `tvr sync` refuse it before any work. A stop signal waits for a database
write of this process to end (`store_write`).
"""

from __future__ import annotations

import functools
import http.client
import os
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import BadInput
from harness.inputs import check_text, is_virtual, resolved
from harness.signals import uncut
from harness.track.sqlitefile import sqlite_problem, sqlite_uri

DISABLED = "none"
T = TypeVar("T")
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


def mask(text: str) -> str:
    """`text` (a URI, or a message quoting one) with any password replaced by ***.

    Not a URI parser's reading, which a malformed URI defeats: a password may hold "@", "/"
    or ":" (raw or percent-encoded), and the scheme may lack its colon ("postgresql//u:pw@h").
    So everything from the colon after the user name (the first run of characters after a
    "//", or from the start, without "/", "@" or blanks) up to the text's last "@" goes,
    masking too much at worst, never too little."""
    span = _password_span(text)
    return text if span is None else text[:span[0]] + "***" + text[span[1]:]


def _password_span(text: str) -> tuple[int, int] | None:
    """Where mask's password lies in `text` (start, end), or None."""
    at = text.rfind("@")
    for start in (*(m.end() for m in re.finditer("//", text)), 0):
        user = re.match(r"[^/@:\s'\"]*:", text[start:])
        if user is not None and start + user.end() <= at:
            return start + user.end(), at
    return None


def _check_credentials(uri: str) -> None:
    """BadInput for a user or password holding "@", "/", "?", "#" or a blank unescaped: every
    parser then cuts the URI elsewhere than meant, and quotes a piece of the password as a
    host or a port in its errors."""
    span = _password_span(uri)
    if span is not None and _scheme(uri) not in ("sqlite", "file") and \
            re.search(r"[@/?#\s]", uri[span[0]:span[1]]):
        raise BadInput(f"tracking URI {mask(uri)!r}: its user or password holds '@', '/', '?', "
                       "'#' or a blank unescaped; percent-encode them (%40, %2F, %3F, %23, %20)")


def _hide(text: str, uri: str) -> str:
    """`text` (a driver's message about `uri`) masked, and without the URI's password in any
    spelling (raw, decoded, encoded)."""
    span = _password_span(uri)
    text = mask(text)
    if span is not None and span[1] > span[0]:
        raw = uri[span[0]:span[1]]
        for form in {raw, urllib.parse.unquote(raw), urllib.parse.quote(raw, safe="")}:
            text = text.replace(form, "***")
    return text


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
    check_text(chosen, "tracking URI")
    _check_credentials(chosen)
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
    """BadInput, within a few PROBE_TIMEOUT_S, when `uri` names a store on a server (an
    MLflow server, a database) that cannot be reached or does not speak its protocol: asking
    for a shared store and silently measuring without it is a mistake the user should hear
    of before any point runs, whatever the scheme. A server that goes away later is
    `problem`'s case (the sweep measures on; `tvr sync` catches up); a SQLite file is on
    this machine, not reached (a locked or foreign one is `problem`'s)."""
    scheme = _scheme(uri)
    if scheme in _SERVERS:
        _probe(uri)
    elif scheme in _DATABASES and scheme != "sqlite":
        _check_database(uri)


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
    except http.client.HTTPException as e:  # something answered, but not in HTTP (SSH...)
        said = str(e).strip().splitlines()[0][:80] if str(e).strip() else ""
        raise BadInput(f"tracking URI {uri} answers, but not as an HTTP server "
                       f"({type(e).__name__}{': ' + repr(said) if said else ''}); pass the "
                       "MLflow server's address, another --tracking-uri, or 'none' to turn "
                       "tracking off") from e
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
    _connect(url, shown, uri)


# The driver's own connect timeout, by database: MLflow's engine would wait for the system's
# TCP timeout (minutes) on a server that accepts and never answers, and retry on top.
_TIMEOUT_ARGS = {"postgresql": "connect_timeout", "mysql": "connect_timeout"}


def _connect(url, shown: str, uri: str) -> None:  # noqa: ANN001 -- a sqlalchemy URL
    """One real connection, bounded by PROBE_TIMEOUT_S: a Unix socket that is not there, a
    database that does not exist, a wrong password or a silent server is said in seconds."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    key = _TIMEOUT_ARGS.get(url.get_backend_name())
    if key is None:
        return
    engine = create_engine(url, poolclass=NullPool,
                           connect_args={key: max(1, int(PROBE_TIMEOUT_S))})
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as e:
        cause = getattr(e, "orig", None) or e
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0][:200]
        raise BadInput(f"tracking URI {shown}: cannot connect ({_hide(first, uri)}); start the "
                       "database or create it, pass another --tracking-uri, or 'none'") from None
    finally:
        engine.dispose()


def _check_sqlite(uri: str) -> str:
    """Check the database file can be created; return the URI with an absolute path.

    The absolute path keeps `tvr ui` and a later run on the same file whatever their cwd.
    """
    if not re.match(r"sqlite(\+\w+)?://", uri, re.I):  # else SQLAlchemy makes a file "sqlite:x"
        raise BadInput(f"tracking URI {uri!r}: write sqlite:///PATH (three slashes: "
                       "sqlite:///relative.db, sqlite:////absolute.db)")
    path = sqlite_path(uri)
    if path is None:
        raise BadInput(f"tracking URI {uri!r} is an in-memory store: its runs vanish when "
                       "the run ends; use sqlite:///PATH/mlflow.db, or 'none'")
    query = uri.partition("?")[2]
    if re.search(r"(^|&)(mode=ro|immutable=1)", query):
        raise BadInput(f"tracking URI {uri!r}: a read-only store cannot record runs; drop "
                       f"?{query}, or pass --tracking-uri none")
    path = resolved(path, "tracking URI")
    if is_virtual(path):
        raise BadInput(f"tracking URI {uri!r}: {path} is in a virtual file system (/proc, "
                       "/sys, /dev), not on a disk")
    existing = path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise BadInput(f"tracking URI {uri}: {existing} is not a directory")
    target = path if path.exists() else existing
    if not os.access(target, os.W_OK):
        raise BadInput(f"tracking URI {uri}: {target} is not writable")
    return sqlite_uri(path) + (f"?{query}" if query else "")


def store_write(method: Callable[..., T]) -> Callable[..., T]:
    """A method (of an object with a `uri`) that a stop signal does not cut where this process
    writes the database itself (harness.signals.uncut: a transaction cut halfway can keep the
    store locked, and every later write of the process fails). Not for a tracking server: its
    writes are its own, and a stop should not wait out an unanswering server's timeouts."""

    @functools.wraps(method)
    def whole(self: Any, *args: Any, **kwargs: Any) -> T:
        with uncut() if self.uri is not None and not is_remote(self.uri) else nullcontext():
            return method(self, *args, **kwargs)

    return whole
