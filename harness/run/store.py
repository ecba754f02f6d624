"""Where MLflow tracking goes: the tracking URI chosen and checked before any point runs.

A server, database host or SQLite file that cannot work is reported as bad input up front,
in one line, instead of as a traceback (or minutes of MLflow's own retries) mid-sweep.
"""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.request
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
    return None if path in ("", ":memory:") else Path(path)


def resolve_tracking_uri(out_dir: Path, uri: str | None) -> str | None:
    """The tracking URI to use, validated; None means tracking is off ("none").

    Precedence: `uri` (--tracking-uri), then $MLFLOW_TRACKING_URI, then a SQLite file
    `<out>/mlflow.db`. Raises BadInput for an unknown scheme, an unreachable server or a
    SQLite file that cannot be created, a database without its driver or whose host does not
    answer. Databricks URIs are accepted unchecked: their credentials live in ~/.databrickscfg.
    """
    chosen = uri or os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{Path(out_dir).resolve().as_posix()}/mlflow.db"
    if chosen.strip().lower() == DISABLED:
        return None
    scheme = _scheme(chosen)
    if scheme in ("", "file"):
        # MLflow 3 refuses the file store ("maintenance mode") unless explicitly allowed.
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("1", "true"):
            raise BadInput(f"tracking URI {chosen!r} is a file store, which MLflow refuses: "
                           f"use sqlite:///PATH/mlflow.db (allowed: {_ALLOWED})")
    elif scheme in _SERVERS:
        _probe(chosen)
    elif scheme == "sqlite":
        chosen = _check_sqlite(chosen)
    elif scheme in _DATABASES:
        _check_database(chosen)
    elif scheme != DATABRICKS:
        raise BadInput(f"unknown tracking URI scheme {scheme!r} in {chosen!r}; "
                       f"allowed: {_ALLOWED}")
    return chosen


def _probe(uri: str) -> None:
    """Fail fast on a server that does not answer: MLflow's own client retries for minutes."""
    url = uri.rstrip("/") + "/health"
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


def _check_database(uri: str) -> None:
    """Fail fast on a database server that does not answer or whose driver is missing.

    MLflow would otherwise crash with ModuleNotFoundError, or retry the connection for
    minutes. A plain TCP connect checks the host without needing the driver; the password
    is masked in every message.
    """
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError
    except ImportError as e:
        raise BadInput(f"tracking URI {uri.split('://')[0]}://...: MLflow (with SQLAlchemy) "
                       "is not installed here; install it or pass --tracking-uri none") from e
    try:
        url = make_url(uri)
    except (ArgumentError, ValueError) as e:
        raise BadInput(f"tracking URI {uri.split('://')[0]}://... is malformed ({e})") from e
    shown = url.render_as_string(hide_password=True)
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError as e:
        raise BadInput(f"tracking URI {shown}: unknown database driver {url.drivername!r}; "
                       f"allowed: {_ALLOWED}") from e
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
        return uri
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
    return f"sqlite:///{path.as_posix()}" + (f"?{query}" if query else "")

