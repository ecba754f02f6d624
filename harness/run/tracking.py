"""MLflow tracking: one experiment per suite, a parent run per invocation, a nested run per point.

Everything goes through one `MlflowClient` per Tracker (never the fluent API and its global
active run), so two trackers, or two tests, share no state. `mlflow` is imported lazily: it
costs about a second, which `tvr --help` should not pay.

The results CSV is the record and MLflow a view of it: a store that cannot be opened or
fails mid-run turns tracking off with one warning line, and `Tracker.sync` later logs the
rows the store lacks (keyed by point id and machine).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from harness.results import results_path, this_machine
from harness.run.store import (
    create_sqlite,
    is_remote,
    mask,
    problem,
    sqlite_path,
    without_credentials,
)
from harness.run.sync import row_series, split_row

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient
    from mlflow.entities import Metric

log = logging.getLogger(__name__)
EXPERIMENT_KIND_TAG, TRAINING_KIND = "mlflow.experimentKind", "custom_model_development"


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


def _build_schema(uri: str) -> None:
    """Create MLflow's tables in the SQLite file of `uri` (opening a store migrates it)."""
    from mlflow import MlflowClient

    MlflowClient(tracking_uri=uri).search_experiments(max_results=1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


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
        quiet_mlflow()
        reason = problem(self.uri)
        if reason is not None:
            self._off(reason)
            return self
        try:
            self._open()
        except Exception as e:  # the store is optional: any failure to open it is a warning
            self._off(f"{type(e).__name__}: {_first_line(e)}")
            self._terminate(self.parent_run_id, "FAILED")
            self._client = None
        return self

    def _open(self) -> None:
        from mlflow import MlflowClient

        db = sqlite_path(self.uri or "")
        if db is not None:
            create_sqlite(db, _build_schema)
        self._errors = _tracking_errors()
        self._client = MlflowClient(tracking_uri=_client_uri(self.uri or ""))
        self.experiment_id = self._experiment()
        self.close_orphans()
        run = self._client.create_run(
            self.experiment_id, run_name=f"{self.suite}-{time.strftime('%Y%m%d-%H%M%S')}",
            tags={"suite": self.suite, "host": socket.gethostname(), "pid": str(os.getpid()),
                  "machine": this_machine(), "torch_version": version("torch")})
        self.parent_run_id = run.info.run_id
        self._log_batch(self.parent_run_id, params=flatten(self.params))

    def close_orphans(self) -> int:
        """Mark KILLED the runs of this suite that a killed process left RUNNING on this
        machine (its pid is gone), and their children; returns how many. Machines, not host
        names: containers sharing a server store often share a host name too."""
        assert self._client is not None and self.experiment_id is not None
        machine = this_machine().replace("'", "")
        running = self._client.search_runs(
            [self.experiment_id],
            f"attributes.status = 'RUNNING' and tags.machine = '{machine}'", max_results=1000)
        dead = {r.info.run_id for r in running if r.data.tags.get("pid", "").isdigit()
                and not _alive(int(r.data.tags["pid"]))}
        children = self._client.search_runs(
            [self.experiment_id], "attributes.status = 'RUNNING'", max_results=1000)
        dead |= {r.info.run_id for r in children
                 if r.data.tags.get("mlflow.parentRunId") in dead}
        for run_id in dead:
            self._client.set_terminated(run_id, "KILLED")
        return len(dead)

    def _experiment(self) -> str:
        """The suite's experiment id, created (with artifacts under <out>/mlartifacts) if new."""
        from mlflow.exceptions import MlflowException

        assert self._client is not None
        found = self._client.get_experiment_by_name(self.suite)
        if found is None:
            # A tracking server stores artifacts itself; a database store needs a local root.
            remote = is_remote(self.uri or "")
            root = None if remote else \
                (self.out_dir / "mlartifacts" / self.suite).resolve().as_uri()
            try:
                experiment_id = self._client.create_experiment(self.suite,
                                                               artifact_location=root)
                self._mark_training_experiment(experiment_id)
                return experiment_id
            except MlflowException as e:
                if e.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                found = self._client.get_experiment_by_name(self.suite)  # created concurrently
                assert found is not None
        if found.lifecycle_stage == "deleted":
            # Deleted in the UI but still holding the name: bring it back rather than fail.
            self._client.restore_experiment(found.experiment_id)
        self._mark_training_experiment(found.experiment_id)
        return found.experiment_id

    def _mark_training_experiment(self, experiment_id: str) -> None:
        """MLflow 3's UI opens an experiment of unknown kind on its GenAI overview (traces),
        which shows none of these runs; this tag makes it open on the runs table."""
        assert self._client is not None
        self._client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, TRAINING_KIND)

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
                  series: Mapping[str, list[tuple[int, float]]] | None = None,
                  machine: str = "", device: str = "") -> None:
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
        tags = {"suite": self.suite, "machine": machine, "device": device,
                "status": status} | ({"message": message} if message else {})
        run_id: str | None = None
        try:
            run_id = self._client.create_run(
                self.experiment_id, run_name=_run_name(point_id),
                tags={"mlflow.parentRunId": self.parent_run_id}).info.run_id
            self._log_batch(run_id, params=flatten(params), metrics=batch, tags=tags)
            # point_id last: a store failing mid-point leaves no run `sync` takes for logged
            self._client.set_tag(run_id, "point_id", point_id)
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
        self._off(f"{type(error).__name__}: {_first_line(error)}", error)

    def _off(self, reason: str, error: BaseException | None = None) -> None:
        if self.error is not None:
            return
        self.error = error or RuntimeError(reason)
        csv = results_path(self.out_dir, self.suite)
        print(f"warning: tracking off for this run: {mask(reason)}; results go to {csv}; "
              f"`tvr sync {self.suite}` logs them later", file=sys.stderr, flush=True)

    def logged(self) -> set[tuple[str, str, str]]:
        """(point_id, machine, device) of every point run in this suite's experiment; runs
        logged before runs named their machine count for every machine ("*")."""
        assert self._client is not None and self.experiment_id is not None
        seen: set[tuple[str, str, str]] = set()
        token = None
        while True:
            page = self._client.search_runs([self.experiment_id], "tags.point_id != ''",
                                            max_results=10000, page_token=token)
            seen |= {(r.data.tags["point_id"], r.data.tags.get("machine", "*"),
                      r.data.tags.get("device", "*")) for r in page}
            token = page.token
            if not token:
                return seen

    def sync(self, rows: pd.DataFrame, series: pd.DataFrame | None = None) -> int:
        """Log every row the store lacks (by point id and machine) as a nested run of this
        invocation, with its curves; returns how many were logged."""
        if self._client is None or self.error is not None or rows.empty:
            return 0
        try:
            seen = self.logged()
        except self._errors as e:
            self._give_up(e)
            return 0
        count = 0
        for row in rows.to_dict("records"):
            point, machine = str(row["point_id"]), str(row.get("machine") or "")
            device = str(row.get("device") or "")
            if {(point, machine, device), (point, "*", "*")} & seen:
                continue
            params, metrics = split_row(row)
            self.log_point(point, params, metrics, str(row["status"]),
                           str(row.get("message") or ""), row_series(series, point, machine),
                           machine=machine, device=device)
            count += self.error is None
        return count

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


RUN_NAME_LIMIT = 250  # the runs table's name column: PostgreSQL refuses longer, SQLite not


def _run_name(point_id: str) -> str:
    """The point id, or when longer than a run name may be, its head and a hash of it (the
    full id is the run's point_id tag)."""
    if len(point_id) <= RUN_NAME_LIMIT:
        return point_id
    digest = hashlib.sha1(point_id.encode()).hexdigest()[:12]
    return f"{point_id[:RUN_NAME_LIMIT - 14]}~{digest}"


def _client_uri(uri: str) -> str:
    """The URI MLflow's client gets: a server's user and password go to the environment
    variables MLflow reads them from, so none of its messages can show them."""
    plain, user, password = without_credentials(uri)
    if user:
        os.environ["MLFLOW_TRACKING_USERNAME"] = user
    if password is not None:
        os.environ["MLFLOW_TRACKING_PASSWORD"] = password
    return plain


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

