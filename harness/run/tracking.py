"""MLflow tracking: one experiment per suite, a parent run per invocation, a nested run per point.

Everything goes through one `MlflowClient` per Tracker (never the fluent API and its global
active run), so two trackers, or two tests, share no state. `mlflow` is imported lazily: it
costs about a second, which `tvr --help` should not pay.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from harness.errors import BadInput

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Metric

log = logging.getLogger(__name__)

DISABLED = "none"
PROBE_TIMEOUT_S = 3.0
CTRL_C_GRACE_S = 5.0  # the UI server needs ~1 s to shut down after SIGINT
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


def _remote(uri: str) -> bool:
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


def flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """{"a": {"b": 1}} -> {"a.b": "1"}; MLflow params are flat strings."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def _tracking_errors() -> tuple[type[BaseException], ...]:
    """What a failing store raises: MLflow's errors, SQLAlchemy's (SQLite "database is locked"
    while `tvr ui` holds the file) and OS errors (requests' network errors are OSErrors)."""
    from mlflow.exceptions import MlflowException

    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # mlflow-skinny has no database stores, so no SQLAlchemy errors
        return (MlflowException, OSError)
    return (MlflowException, SQLAlchemyError, OSError)


def _first_line(error: BaseException, limit: int = 200) -> str:
    """The gist of an error for one stderr line (SQLAlchemy's run to a dozen lines)."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _finite(key: str, value: Any) -> float | None:
    """The metric as a float, or None when it is missing or not finite (MLflow plots NaN badly)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"metric {key!r} is not a number: {value!r}") from e
    return number if math.isfinite(number) else None


class Tracker:
    """Context manager that records one invocation of a suite in MLflow.

    With `uri=None` ("--tracking-uri none") every method does nothing, by design. A store that
    fails mid-run (locked, gone, full) turns tracking off for the rest of the run with one
    warning instead of ending the sweep: the results CSV is the record, MLflow only a view.
    """

    def __init__(self, uri: str | None, suite: str, out_dir: Path,
                 params: Mapping[str, Any] | None = None) -> None:
        self.uri = uri
        self.suite = suite
        self.out_dir = Path(out_dir)
        self.params = dict(params or {})
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self._client: MlflowClient | None = None
        self._errors: tuple[type[BaseException], ...] = ()
        self.error: BaseException | None = None  # the store failure that turned tracking off

    @property
    def enabled(self) -> bool:
        """False in the documented no-tracking mode."""
        return self.uri is not None

    def __enter__(self) -> Tracker:
        if self.uri is None:
            return self
        from mlflow import MlflowClient

        # MLflow announces schema creation/migration at INFO on stderr, between progress bars.
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        db = sqlite_path(self.uri)
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)  # SQLite makes the file, not the dir
        self._errors = _tracking_errors()
        self._client = MlflowClient(tracking_uri=self.uri)
        self.experiment_id = self._experiment()
        run = self._client.create_run(
            self.experiment_id, run_name=f"{self.suite}-{time.strftime('%Y%m%d-%H%M%S')}",
            tags={"suite": self.suite, "host": socket.gethostname(),
                  "torch_version": version("torch")})
        self.parent_run_id = run.info.run_id
        self._log_batch(self.parent_run_id, params=flatten(self.params))
        return self

    def _experiment(self) -> str:
        """The suite's experiment id, created (with artifacts under <out>/mlartifacts) if new."""
        from mlflow.exceptions import MlflowException

        assert self._client is not None
        found = self._client.get_experiment_by_name(self.suite)
        if found is None:
            # A tracking server stores artifacts itself; a database store needs a local root.
            remote = _remote(self.uri or "")
            root = None if remote else \
                (self.out_dir / "mlartifacts" / self.suite).resolve().as_uri()
            try:
                return self._client.create_experiment(self.suite, artifact_location=root)
            except MlflowException as e:
                if e.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                found = self._client.get_experiment_by_name(self.suite)  # created concurrently
                assert found is not None
        if found.lifecycle_stage == "deleted":
            # Deleted in the UI but still holding the name: bring it back rather than fail.
            self._client.restore_experiment(found.experiment_id)
        return found.experiment_id

    def _log_batch(self, run_id: str, params: Mapping[str, str] | None = None,
                   metrics: list[Metric] | None = None,
                   tags: Mapping[str, str] | None = None) -> None:
        """One log_batch call; MlflowClient.log_batch splits it at MLflow's per-request limits
        (100 params/tags, 1000 metrics), so large series need no chunking here."""
        from mlflow.entities import Param, RunTag
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH

        assert self._client is not None
        self._client.log_batch(
            run_id, metrics=metrics or [],
            params=[Param(k, v[:MAX_PARAM_VAL_LENGTH]) for k, v in (params or {}).items()],
            tags=[RunTag(k, v[:MAX_TAG_VAL_LENGTH]) for k, v in (tags or {}).items()])

    def log_point(self, point_id: str, params: Mapping[str, Any],
                  metrics: Mapping[str, Any], status: str, message: str = "",
                  series: Mapping[str, list[tuple[int, float]]] | None = None) -> None:
        """Record one point as a nested run: FINISHED when status is "ok", FAILED otherwise.

        A non-numeric metric raises TypeError (a bug in the caller); a failing store turns
        tracking off (see the class docstring).
        """
        if self._client is None:
            return
        # Checked first, so a bad metric leaves no run and stays loud after tracking stopped.
        batch = _metrics(metrics, series)
        if self.error is not None:
            return
        assert self.parent_run_id is not None and self.experiment_id is not None
        tags = {"mlflow.parentRunId": self.parent_run_id, "suite": self.suite,
                "point_id": point_id, "status": status}
        run_id: str | None = None
        try:
            run_id = self._client.create_run(self.experiment_id, run_name=point_id,
                                             tags=tags).info.run_id
            self._log_batch(run_id, params=flatten(params), metrics=batch,
                            tags={"message": message} if message else None)
            self._client.set_terminated(run_id, "FINISHED" if status == "ok" else "FAILED")
        except self._errors as e:
            self._give_up(e)
            self._terminate(run_id, "FAILED")  # never leave a run RUNNING, if the store lets us
        except BaseException:
            self._terminate(run_id, "FAILED")
            raise

    def log_artifact(self, path: Path) -> None:
        """Attach a file (the results CSV, a table) to the parent run."""
        if self._client is None:
            return
        if not Path(path).is_file():  # the caller's bug, not the store's: keep it loud
            raise FileNotFoundError(f"no file to attach: {path}")
        if self.error is not None:
            return
        assert self.parent_run_id is not None
        try:
            self._client.log_artifact(self.parent_run_id, str(path))
        except self._errors as e:
            self._give_up(e)

    def _give_up(self, error: BaseException) -> None:
        """Turn tracking off for the rest of the run, saying so once on stderr."""
        if self.error is not None:
            return
        self.error = error
        print(f"warning: MLflow tracking failed ({type(error).__name__}: {_first_line(error)}); "
              "tracking is off for the rest of this run (the results CSV is unaffected)",
              file=sys.stderr, flush=True)

    def _terminate(self, run_id: str | None, status: str) -> None:
        """Set a run's final status; a store failure here turns tracking off, never raises."""
        if self._client is None or run_id is None:
            return
        try:
            self._client.set_terminated(run_id, status)
        except self._errors as e:
            if self.error is None:
                self._give_up(e)
            else:  # the store already failed and the user was told; a second line adds nothing
                log.debug("could not mark run %s %s: %s", run_id, status, e)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._client is None or self.parent_run_id is None:
            return
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            status = "KILLED"
        elif exc_type is not None or self.error is not None:
            status = "FAILED"  # a run whose tracking stopped early is missing points
        else:
            status = "FINISHED"
        self._terminate(self.parent_run_id, status)


def _metrics(metrics: Mapping[str, Any],
             series: Mapping[str, list[tuple[int, float]]] | None) -> list[Metric]:
    """Finite scalar metrics at step 0 plus every finite point of each series.

    Raises TypeError for a value that is not a number.
    """
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = []
    for key, value in metrics.items():
        number = _finite(key, value)
        if number is not None:
            batch.append(Metric(key, number, now, 0))
    for key, points in (series or {}).items():
        for step, value in points:
            number = _finite(key, value)
            if number is not None:
                batch.append(Metric(key, number, now, int(step)))
    return batch


def _free(port: int) -> bool:
    """Whether 127.0.0.1:port can be bound right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ui_command(uri: str, out_dir: Path, port: int) -> tuple[list[str], dict[str, str]]:
    """argv and full environment for an MLflow server on 127.0.0.1 over the same store."""
    if _remote(uri):
        raise BadInput(f"tracking URI {uri} is a server already: open it in a browser")
    argv = [sys.executable, "-m", "mlflow", "server",
            "--backend-store-uri", uri,
            "--default-artifact-root", (Path(out_dir) / "mlartifacts").resolve().as_uri(),
            # Experiments keep file:// artifact locations; the proxy would only add an
            # ./mlartifacts folder in the cwd.
            "--no-serve-artifacts",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    # Job execution starts extra worker processes: the UI answers in ~4 s instead of 8-11 s
    # without it, and Ctrl-C stops everything.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    return argv, env


def serve_ui(uri: str | None, out_dir: Path, port: int) -> int:
    """Run the MLflow UI in the foreground until Ctrl-C; return its exit code (0 on Ctrl-C)."""
    if uri is None:
        raise BadInput("tracking is off (--tracking-uri none): there is no store to browse")
    if _remote(uri):
        print(f"MLflow tracking server: {uri}", flush=True)
        return 0
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        raise BadInput(f"no MLflow store at {db}: run `tvr run SUITE` first")
    if not 1 <= port <= 65535:
        raise BadInput(f"port {port} is not in 1..65535")
    if not _free(port):
        raise BadInput(f"port {port} on 127.0.0.1 is in use: pick another with --port")
    argv, env = ui_command(uri, out_dir, port)
    print(f"MLflow UI: http://127.0.0.1:{port}  (store {uri}; Ctrl-C stops it)", flush=True)
    proc = subprocess.Popen(argv, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        return 0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server after Ctrl-C: a terminal sent it the SIGINT too, so give it a moment to
    exit on its own (a second signal would cut its shutdown short); then SIGTERM, then SIGKILL."""
    for signal_it, wait_s in ((None, CTRL_C_GRACE_S), (proc.terminate, 10.0), (proc.kill, None)):
        if signal_it is not None:
            signal_it()
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
