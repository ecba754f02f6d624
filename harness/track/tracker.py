"""MLflow tracking: one experiment per suite, a parent run per invocation, a nested run per point.

Everything goes through one `MlflowClient` per Tracker (never the fluent API and its global
active run), so two trackers, or two tests, share no state. `mlflow` is imported lazily: it
costs about a second, which `tvr --help` should not pay.

The results CSV is the record and MLflow a view of it: a store that cannot be opened or
fails mid-run turns tracking off with one warning line, and `Tracker.sync` later logs the
rows the store lacks (keyed by point id and machine).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from harness.console import say
from harness.machines import this_machine
from harness.results import read_config, results_path
from harness.schema import config_key_of
from harness.track.client import (
    alive,
    build_schema,
    client_uri,
    first_line,
    hide_default,
    note_outcome,
    noted_outcome,
    quiet_mlflow,
    tracking_errors,
)
from harness.track.names import RUN_NAME_LIMIT, run_name, run_names
from harness.track.sqlitefile import create_sqlite
from harness.track.store import is_remote, mask, problem, sqlite_path, store_write
from harness.track.values import (
    context_tags,
    fact_tags,
    flatten,
    metrics_batch,
    row_series,
    row_times,
    split_row,
)

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient
    from mlflow.entities import Metric

log = logging.getLogger(__name__)
EXPERIMENT_KIND_TAG, TRAINING_KIND = "mlflow.experimentKind", "custom_model_development"
NOTE_TAG = "mlflow.note.content"  # the description the UI shows on a run or an experiment
CONFIG_ARTIFACT = "config.json"  # a point's run: its resolved configuration


class Tracker:
    """Context manager that records one invocation of a suite in MLflow.

    With `uri=None` ("--tracking-uri none") every method does nothing, by design; a store
    that fails mid-run (locked, gone, full) turns tracking off with one warning. Every method
    that touches a database store (SQLite, PostgreSQL) is a `store_write`.
    """

    def __init__(self, uri: str | None, suite: str, out_dir: Path,
                 params: Mapping[str, Any] | None = None, description: str = "",
                 facts: Mapping[str, Any] | None = None, name: str = "",
                 tags: Mapping[str, str] | None = None,
                 span: tuple[int, int] | None = None, keep_note: bool = False) -> None:
        """`name`, `tags` and `span` (start and end, ms) describe rows measured elsewhere
        (the reference: harness.track.sync): its parent run's name, tags over this
        process's own on every run, and when its rows were measured. With `keep_note` the
        description goes only on an experiment that has none."""
        self.uri = uri
        self.suite = suite
        self.out_dir = Path(out_dir)
        self.params = dict(params or {})
        self.description = description  # the experiment's note in the UI
        self.keep_note = keep_note
        self.name = name
        self.given = dict(tags or {})
        self.span = span
        self.tags = {**context_tags(suite), **fact_tags(facts or {}), **self.given}  # every run
        self.names: dict[str, str] = {}  # point_id -> run name (run_names over the suite)
        self._in_flight: str | None = None  # the point run started and not yet ended
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
        try:
            return self._enter()
        except KeyboardInterrupt as stop:  # a stop while opening, raised where its store
            self.__exit__(type(stop), stop, stop.__traceback__)  # writes ended: out of the
            raise  # with statement itself, which calls no __exit__ then

    @store_write
    def _enter(self) -> Tracker:
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
            self._off(f"{type(e).__name__}: {first_line(e)}")
            self._terminate(self.parent_run_id, "FAILED")
            self._client = None
        return self

    def _open(self) -> None:
        from mlflow import MlflowClient

        db = sqlite_path(self.uri or "")
        if db is not None:
            create_sqlite(db, build_schema)
        self._errors = tracking_errors()
        self._client = MlflowClient(tracking_uri=client_uri(self.uri or ""))
        self.experiment_id = self._experiment()
        self.close_orphans()
        self.name = self.name or f"{self.suite} {time.strftime('%Y-%m-%d %H:%M:%S')}"
        run = self._client.create_run(
            self.experiment_id,
            run_name=self.name,
            start_time=self.span[0] if self.span else None,
            tags={"torch_version": version("torch"), **self.tags, "suite": self.suite,
                  "host": socket.gethostname(), "pid": str(os.getpid()),
                  "machine": this_machine(), **self.given})
        self.parent_run_id = run.info.run_id
        self._log_batch(self.parent_run_id, params=flatten(self.params))

    @store_write
    def close_orphans(self) -> int:
        """Mark KILLED the runs of this suite that a killed process left RUNNING on this
        machine (its pid is gone), and their children; returns how many. A child that never
        got its point id (the point in flight, dropped) is deleted: it holds nothing, and the
        point is measured again. Machines, not host names: containers sharing a server store
        often share a host name too."""
        assert self._client is not None and self.experiment_id is not None
        machine = this_machine().replace("'", "")
        running = self._client.search_runs(
            [self.experiment_id],
            f"attributes.status = 'RUNNING' and tags.machine = '{machine}'", max_results=1000)
        dead = {r.info.run_id for r in running if r.data.tags.get("pid", "").isdigit()
                and not alive(int(r.data.tags["pid"]))}
        children = self._client.search_runs(
            [self.experiment_id], "attributes.status = 'RUNNING'", max_results=1000)
        orphans = [r for r in children if r.data.tags.get("mlflow.parentRunId") in dead]
        dropped = {r.info.run_id for r in orphans if "point_id" not in r.data.tags}
        dead |= {r.info.run_id for r in orphans} - dropped
        suite_dir = results_path(self.out_dir, self.suite).parent
        for run_id in dead:  # as the run itself ended, if it said so while the store was down
            self._client.set_terminated(run_id, noted_outcome(suite_dir, run_id) or "KILLED")
        for run_id in dropped:
            self._client.set_terminated(run_id, "KILLED")
            self._client.delete_run(run_id)
        return len(dead) + len(dropped)

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
                self._mark_training_experiment(experiment_id, noted=False)
                return experiment_id
            except MlflowException as e:
                if e.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                found = self._client.get_experiment_by_name(self.suite)  # created concurrently
                assert found is not None
        if found.lifecycle_stage == "deleted":
            # Deleted in the UI but still holding the name: bring it back rather than fail.
            self._client.restore_experiment(found.experiment_id)
        self._mark_training_experiment(found.experiment_id, NOTE_TAG in found.tags)
        return found.experiment_id

    def _experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        """Set an experiment tag; two sweeps starting at once may both insert it (the store
        answers a UNIQUE constraint error to the later one), so a failed set is tried again,
        which then updates the tag the other wrote."""
        from mlflow.exceptions import MlflowException

        assert self._client is not None
        for attempt in range(3):
            try:
                self._client.set_experiment_tag(experiment_id, key, value)
                return
            except MlflowException as e:
                if attempt == 2 or "UNIQUE constraint" not in str(e) \
                        and "duplicate key" not in str(e):
                    raise

    def _mark_training_experiment(self, experiment_id: str, noted: bool) -> None:
        """MLflow 3's UI opens an experiment of unknown kind on its GenAI overview (traces),
        which shows none of these runs; this tag makes it open on the runs table. The note
        is the experiment's description."""
        assert self._client is not None
        self._experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, TRAINING_KIND)
        if self.description and not (noted and self.keep_note):
            self._experiment_tag(experiment_id, NOTE_TAG, self.description)
        if sqlite_path(self.uri or "") is not None:
            hide_default(self._client)

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

    @store_write
    def start_point(self, point_id: str, params: Mapping[str, Any], machine: str = "",
                    device: str = "", started_ms: int | None = None,
                    tags: Mapping[str, str] | None = None) -> str | None:
        """Open the point's nested run as the point starts (so the run lasts what the point
        did); returns its id, None when not tracking. log_point ends it and tags its point id
        last: a run without one (a point dropped by a kill) never counts as logged."""
        if self._client is None or self.error is not None:
            return None
        assert self.parent_run_id is not None and self.experiment_id is not None
        tags = {**self.tags, **(tags or {}), "mlflow.parentRunId": self.parent_run_id,
                "suite": self.suite, "machine": machine, "device": device,
                NOTE_TAG: point_id}  # the run's description: the point's id
        name = self.names.get(point_id) or run_name(flatten(params), point_id)
        try:
            run = self._client.create_run(self.experiment_id, start_time=started_ms,
                                          run_name=name, tags=tags)
        except self._errors as e:
            self._give_up(e)
            return None
        self._in_flight = run.info.run_id
        return self._in_flight

    @store_write
    def log_point(self, point_id: str, params: Mapping[str, Any],
                  metrics: Mapping[str, Any], status: str, message: str = "",
                  series: Mapping[str, list[tuple[int, float]]] | None = None,
                  machine: str = "", device: str = "", run_id: str | None = None,
                  started_ms: int | None = None, ended_ms: int | None = None,
                  tags: Mapping[str, str] | None = None,
                  config: Mapping[str, Any] | None = None) -> None:
        """Record one point in its nested run (`run_id` from start_point, else a new one
        started at `started_ms`), ended at `ended_ms` (default now): FINISHED when status is
        "ok", FAILED otherwise. `config`, the point's resolved configuration (its
        configs/<point_id>.json beside the rows), goes with it as the artifact config.json.

        A non-numeric metric raises TypeError (a bug in the caller); a failing store turns
        tracking off (see the class docstring).
        """
        if self._client is None:
            return
        # Checked first, so a bad metric leaves no run and stays loud after tracking stopped.
        batch = metrics_batch(metrics, series)
        if self.error is not None:
            return
        try:
            run_id = run_id or self.start_point(point_id, params, machine, device, started_ms,
                                                tags)
            if run_id is None:
                return
            self._log_batch(run_id, params=flatten(params), metrics=batch,
                            tags={"status": status, **({"message": message} if message else {})})
            if config is not None:
                self._client.log_text(run_id, json.dumps(dict(config), indent=1, default=str),
                                      CONFIG_ARTIFACT)
            self._client.set_tag(run_id, "point_id", point_id)  # last: the run is complete
            self._client.set_terminated(run_id, "FINISHED" if status == "ok" else "FAILED",
                                        end_time=ended_ms)
            self._in_flight = None
        except self._errors as e:
            self._give_up(e)
            self._terminate(run_id, "FAILED")  # never leave a run RUNNING, if the store lets us
        except BaseException:
            self._terminate(run_id, "FAILED")
            raise

    @store_write
    def log_summary(self, metrics: Mapping[str, float],
                    tags: Mapping[str, str] | None = None) -> None:
        """The parent run's summary metrics (points per status, wall time, headline numbers)
        and tags (claim verdicts)."""
        if self._client is None or self.error is not None or self.parent_run_id is None:
            return
        try:
            self._log_batch(self.parent_run_id, metrics=metrics_batch(metrics, None),
                            tags=tags)
        except self._errors as e:
            self._give_up(e)

    @store_write
    def rename(self, name: str) -> None:
        """Name the parent run anew (what the invocation did, once it is known), within the
        length a PostgreSQL store takes."""
        if self._client is None or self.error is not None or self.parent_run_id is None:
            return
        name = name[:RUN_NAME_LIMIT]
        try:
            self._client.update_run(self.parent_run_id, name=name)
            self.name = name
        except self._errors as e:
            self._give_up(e)

    @store_write
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
        self._off(f"{type(error).__name__}: {first_line(error)}", error)

    def _off(self, reason: str, error: BaseException | None = None) -> None:
        if self.error is not None:
            return
        self.error = error or RuntimeError(reason)
        csv = results_path(self.out_dir, self.suite)
        say(f"warning: tracking off for this run: {mask(first_line(reason, 300))}; results "
            f"go to {csv}; `tvr sync {self.suite}` logs them later")

    @store_write
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
        """Log every row the store lacks (by point id and machine; a run of older code
        carries the row's config_key as its id) as a nested run of this invocation, with
        its curves and its saved configuration; returns how many were logged."""
        if self._client is None or self.error is not None or rows.empty:
            return 0
        try:
            seen = self.logged()
        except self._errors as e:
            self._give_up(e)
            return 0
        count = 0
        csv = results_path(self.out_dir, self.suite)
        records = rows.to_dict("records")
        self.names = run_names(records) | self.names  # a live sweep's names stand
        for row in records:
            point, machine = str(row["point_id"]), str(row.get("machine") or "")
            device = str(row.get("device") or "")
            ids = {point, config_key_of(row)}
            if {(i, m, d) for i in ids for m, d in ((machine, device), ("*", "*"))} & seen:
                continue
            params, metrics, tags = split_row(row)  # the commit that measured it, not today's
            started, ended = row_times(row)
            self.log_point(point, params, metrics, str(row["status"]),
                           str(row.get("message") or ""), row_series(series, point, machine),
                           machine=machine, device=device, started_ms=started, ended_ms=ended,
                           tags=tags, config=read_config(csv, point))
            count += self.error is None
        return count

    @store_write
    def discard(self) -> None:
        """Delete this invocation's parent run (a sync that found nothing to add): a re-sync
        leaves the runs table as it was."""
        if self._client is None or self.parent_run_id is None or self.error is not None:
            return
        self._terminate(self.parent_run_id, "FINISHED")
        self._delete(self.parent_run_id)
        self.parent_run_id = None

    def _delete(self, run_id: str) -> None:
        """Delete a run (MLflow keeps it recoverable); a store failure here is logged only."""
        assert self._client is not None
        try:
            self._client.delete_run(run_id)
        except self._errors as e:
            log.debug("could not delete run %s: %s", run_id, e)

    def _terminate(self, run_id: str | None, status: str, end_ms: int | None = None) -> None:
        """Set a run's final status (and its end, default now); a store failure here turns
        tracking off, never raises."""
        if self._client is None or run_id is None:
            return
        try:
            self._client.set_terminated(run_id, status, end_time=end_ms)
        except self._errors as e:
            if self.error is None:
                self._give_up(e)
            else:  # the store already failed and the user was told; a second line adds nothing
                log.debug("could not mark run %s %s: %s", run_id, status, e)

    @store_write
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._client is None or self.parent_run_id is None:
            return
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            status = "KILLED"
        else:  # FAILED too for a run whose tracking stopped early: it is missing points
            status = "FAILED" if exc_type is not None or self.error is not None else "FINISHED"
        if self._in_flight is not None:  # the point a signal or a crash dropped: no data
            self._terminate(self._in_flight, "KILLED" if status == "KILLED" else "FAILED")
            self._delete(self._in_flight)
        if self.error is not None:  # the store may miss this: the next sync closes the run
            note_outcome(results_path(self.out_dir, self.suite).parent, self.parent_run_id,
                         status)
        self._terminate(self.parent_run_id, status, self.span[1] if self.span else None)
