"""MLflow's client as the tracker opens it: quiet logs, the errors that mean a failing store,
the schema of a new SQLite store, credentials kept off URIs, and how a run ended when the
store could not be told."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import stat
import urllib.parse
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from harness.console import say
from harness.files import user_cache
from harness.inputs import is_virtual
from harness.track.sqlitefile import SQLITE_MAGIC, sqlite_uri
from harness.track.store import without_credentials

if TYPE_CHECKING:
    from mlflow import MlflowClient


def tracking_errors() -> tuple[type[BaseException], ...]:
    """What a failing store raises: MLflow's errors, SQLAlchemy's (SQLite "database is locked"
    while `tvr ui` holds the file) and OS errors (requests' network errors are OSErrors)."""
    from mlflow.exceptions import MlflowException

    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # mlflow-skinny has no database stores, so no SQLAlchemy errors
        return (MlflowException, OSError)
    return (MlflowException, SQLAlchemyError, OSError)


class _NoTraceback(logging.Filter):
    """MLflow's handlers print a message, never a traceback: the user gets one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def quiet_mlflow() -> None:
    """MLflow, Alembic and SQLAlchemy below ERROR stay silent (schema migrations announce
    themselves at INFO between progress bars), and no handler of theirs prints a traceback.
    MLflow's HTTP client retries for minutes by default: a few seconds is enough here."""
    import mlflow  # noqa: F401 -- importing it resets its logger's level: set ours after

    for name in ("mlflow", "alembic", "sqlalchemy"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.ERROR)
        for handler in logger.handlers:
            if not any(isinstance(f, _NoTraceback) for f in handler.filters):
                handler.addFilter(_NoTraceback())
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    # a "View run ... at URL" line per nested run (and a request to build it), on a server
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


TEMPLATE_ENV = "TVR_STORE_TEMPLATE"


def schema_template() -> Path:
    """Where the empty store new stores copy is kept: the empty store of this MLflow version
    in the user's cache (~/.cache/tvr-bench/, or under $XDG_CACHE_HOME)."""
    import mlflow

    return user_cache() / f"mlflow-{mlflow.__version__}-empty.db"


def build_schema(path: Path) -> None:
    """Create MLflow's tables in the new SQLite file `path`. Opening a new store runs MLflow's
    migrations (2-5 s on CPU, most of what tracking costs a short sweep), so the first store
    built per MLflow version is kept, empty, as a template, and later ones start as its copy.

    The template is only ever a file tvr-bench writes in its own cache, rebuilt there when it
    is not a sound empty store of this MLflow's schema (damaged, holding runs, an older
    schema), or the file $TVR_STORE_TEMPLATE names: used where it already is such a store,
    built there where nothing is, and otherwise refused in one line, never written."""
    from mlflow import MlflowClient

    template, writable = _chosen_template()
    if template.exists() and _template_problem(template) is None:
        shutil.copyfile(template, path)
        return
    hide_default(MlflowClient(tracking_uri=sqlite_uri(path)))
    if not writable:
        return
    tmp = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(path)) as src, closing(sqlite3.connect(tmp)) as dst:
            src.backup(dst)  # a consistent copy, whatever MLflow's engine still holds open
        os.replace(tmp, template)
    except (OSError, sqlite3.Error):
        # The template only saves time: where the cache cannot be written (a read-only home),
        # each new store is built by MLflow, as it was without one.
        tmp.unlink(missing_ok=True)


_refused: set[str] = set()  # the templates said refused in this process: said once


def _chosen_template() -> tuple[Path, bool]:
    """(the template to copy, whether it may be (re)written): $TVR_STORE_TEMPLATE where it is
    usable or names nothing yet, else the cache's."""
    cache = schema_template()
    named = os.environ.get(TEMPLATE_ENV)
    if not named:
        return cache, True
    path = Path(named)
    try:
        os.lstat(path)
    except FileNotFoundError:
        return path, True  # nothing there: the first store becomes it
    except OSError as e:
        reason: str | None = f"cannot be read ({e.strerror})"
    else:
        reason = _template_problem(path)
    if reason is None:
        return path, False
    if named not in _refused:
        _refused.add(named)
        say(f"warning: ${TEMPLATE_ENV}={named} {reason}: not used as the empty store's "
            f"template, nor written; the template is kept in {cache}")
    return cache, True


def _template_problem(path: Path) -> str | None:
    """Why `path` cannot be the template (not a regular SQLite file, not MLflow's, another
    schema than this MLflow's, holding runs), or None. Read only: opened read-only, never
    recovered or written."""
    try:
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode) or is_virtual(path):
            return "is not a regular file"
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if head != SQLITE_MAGIC:
        return "is not an SQLite database"
    try:
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=1.0)) as con:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            if not {"alembic_version", "runs", "experiments"} <= tables:
                return "is not an MLflow store"
            version = con.execute("SELECT version_num FROM alembic_version").fetchone()
            runs = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            experiments = con.execute("SELECT COUNT(*) FROM experiments "
                                      "WHERE experiment_id != 0").fetchone()[0]
    except sqlite3.Error as e:
        return f"cannot be read as an SQLite database ({first_line(e, 100)})"
    from mlflow.store.db.utils import _get_latest_schema_revision

    head_version = _get_latest_schema_revision()
    if version is None or version[0] != head_version:
        return (f"holds MLflow schema {version[0] if version else 'none'}, not this MLflow's "
                f"{head_version}")
    if runs or experiments:
        return f"is not empty ({runs} runs, {experiments} experiments)"
    return None


def hide_default(client: MlflowClient) -> None:
    """MLflow's database stores create an experiment "Default" (id 0) that no run of ours
    uses: delete it (a soft delete, which the UI's list hides) while it is empty. Only in
    stores this harness made: a shared server's Default belongs to its users."""
    from mlflow.exceptions import MlflowException

    try:
        default = client.get_experiment("0")
    except MlflowException:
        return
    if default.lifecycle_stage == "active" and default.name == "Default" \
            and not client.search_runs(["0"], max_results=1):
        client.delete_experiment("0")


def alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def first_line(error: BaseException, limit: int = 200) -> str:
    """The gist of an error for one stderr line (SQLAlchemy's run to a dozen lines)."""
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else ""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def client_uri(uri: str) -> str:
    """The URI MLflow's client gets: a server's user and password go to the environment
    variables MLflow reads them from, so none of its messages can show them."""
    plain, user, password = without_credentials(uri)
    if user:
        os.environ["MLFLOW_TRACKING_USERNAME"] = user
    if password is not None:
        os.environ["MLFLOW_TRACKING_PASSWORD"] = password
    return plain


OUTCOMES = ".outcomes"


def note_outcome(suite_dir: Path, run_id: str, status: str) -> None:
    """How a run ended (FINISHED, KILLED, FAILED) when the store could not be told: the
    next sync closes the run with it rather than as a run killed mid-way."""
    folder = Path(suite_dir) / OUTCOMES
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / run_id).write_text(status, encoding="utf-8")
    except OSError:
        pass  # a full or read-only disk: the run is closed as KILLED later, as before


def noted_outcome(suite_dir: Path, run_id: str) -> str | None:
    """The status note_outcome kept for `run_id`, if any (a run id is hex: no path tricks)."""
    if not run_id.isalnum():
        return None
    try:
        status = (Path(suite_dir) / OUTCOMES / run_id).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return status if status in ("FINISHED", "KILLED", "FAILED") else None
