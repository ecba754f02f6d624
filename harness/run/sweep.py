"""Run a suite's points; every point ends as exactly one row with a status.

A failing point never stops the sweep (harness.run.point turns every failure into a
status). Rows are written atomically after each point, so a killed run loses
at most the points in flight, and --resume skips the points already "ok". Where the points
run is the executor's business (harness.run.executor: here one by one, or on a Ray cluster);
this module is the one writer of their rows, whichever executor measured them, and feeds
each to the tracking stage (harness.track), which imports nothing of it.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from experiments.spec import Point, TranslateOptions
from harness import signals
from harness.errors import BadInput
from harness.files import write_lines
from harness.machines import this_machine
from harness.measure.machine import BUSY_SHARE, environment_report, usable_cpus
from harness.results import (
    SERIES_FILE,
    append_row,
    append_series,
    finished_rows,
    read_results,
    read_series,
    results_path,
    write_config,
)
from harness.run.executor import LocalExecutor, RayExecutor
from harness.run.point import Measured
from harness.run.point_locks import Claims, claim_or_skip, sync_lock, tidy
from harness.run.progress import label, logs_to, progress_bar
from harness.runner import Context, Result
from harness.schema import Parts
from harness.track.names import run_names
from harness.track.tracker import Tracker
from harness.track.values import code_facts
from harness.train.train_runner import trained_width
from harness.train.translation.translate_runner import split_of


@dataclass
class SweepSummary:
    suite: str
    results: Path
    statuses: Counter = field(default_factory=Counter)
    resumed: int = 0  # points this machine had already done (ok or diverged), skipped
    wall_s: float = 0.0
    synced: int = 0  # stored rows logged to MLflow late (written before a kill)
    tracking_off: str | None = None  # why tracking stopped, if it did
    elsewhere: int = 0  # points another sweep on the same folder was measuring
    timed: int = 0  # points whose numbers are times
    busy: list[tuple[float, float]] = field(default_factory=list)  # (load, CPU share) each

    def line(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items())) or "nothing run"
        resumed = (f"; {self.resumed} already done on this machine, skipped (--no-resume "
                   "reruns them)") if self.resumed else ""
        elsewhere = (f"; {self.elsewhere} measured by another sweep on this folder"
                     if self.elsewhere else "")
        synced = f"; {self.synced} stored rows logged to MLflow late" if self.synced else ""
        return (f"{self.suite}: {counts}{resumed}{elsewhere}{synced} in {self.wall_s:.1f} s "
                f"-> {self.results}")

    def count(self, result: Result) -> None:
        """One more point finished: its status, and how busy the machine was if timed."""
        self.statuses[result.status] += 1
        if "busy" in result.values:
            self.timed += 1
            if result.values["busy"]:
                self.busy.append((result.values["load_avg"], result.values["cpu_share"]))

    def busy_warning(self, rerun: str = "") -> str | None:
        """One line when any timed point ran on a busy machine (column `busy`), else None;
        `rerun` is the command that measures them again (default: the suite's)."""
        if not self.busy:
            return None
        load = max(load for load, _ in self.busy)
        share = min(share for _, share in self.busy)
        return (f"warning: {len(self.busy)} of {self.timed} timed points ran on a busy machine "
                f"(load average up to {load:g} on {usable_cpus()} usable CPUs, CPU share down "
                f"to {share:g}; busy: load above the CPUs or share below {BUSY_SHARE}): "
                "flagged in column `busy`, their times do not compare; rerun on an idle "
                f"machine with `{rerun or f'tvr run {self.suite} --no-resume'}`")


def _record(done: Measured, path: Path, device: torch.device, facts: dict[str, Any],
            tracker: Tracker) -> None:
    """Write the point's row to `path` (curves, traceback and resolved configuration beside
    it), then its MLflow run, which spans the time the point took."""
    point, result, trace = done.point, done.result, done.trace
    if trace:  # the row keeps one line; the whole story goes beside it
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / "errors.log", "a", encoding="utf-8") as log:
            log.write(f"=== {point.point_id}\n{trace}\n")
    fields, columns = point.fields(), point.columns()
    row = {**fields, "point_id": point.point_id, "device": device.type,
           "status": result.status, **columns, **result.values, **facts,
           "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "message": result.message, "config_key": point.config_key}
    config = {**point.to_config(), "machine": facts["machine"], "device": device.type}
    write_config(path, point.point_id, config)  # before the row, as the curves
    for name, lines in result.files.items():  # before the row, as the curves
        target = (path.parent / name).resolve()
        if not target.is_relative_to(path.parent.resolve()):  # a bug in the runner
            raise ValueError(f"point {point.point_id}: file {name!r} is outside its suite")
        write_lines(target, lines)
    if result.series:  # before the row: a row marked done always has its curves
        append_series(path.parent / SERIES_FILE, point.point_id, result.series,
                      facts["machine"])
    append_row(path, row)
    parts = Parts.of_point(fields, columns, result.values, facts)  # as a synced row's
    tracker.log_point(point.point_id, parts.mlflow_params(), parts.metrics,
                      result.status, result.message, result.series, facts["machine"],
                      device.type, started_ms=done.started_ms, ended_ms=done.ended_ms,
                      config=config)


def _named(p: Point) -> dict[str, Any]:
    """A point's columns as its row will record them (a matched model's trained width), for
    its run name before it runs."""
    return {**p.fields(), **p.columns(), "point_id": p.point_id, "config_key": p.config_key,
            "d_model": trained_width(p)}


def run_suite(suite: str, points: list[Point], device: torch.device, out_dir: Path,
              tracking_uri: str | None, resume: bool = True, max_memory: int | None = None,
              min_run_time: float = 0.2, progress: bool = True, description: str = "",
              outputs: Callable[[], Iterable[Path]] | None = None,
              executor: LocalExecutor | RayExecutor | None = None,
              headline: Callable[[], tuple[dict[str, float], dict[str, str]]] | None = None,
              keep_checkpoints: bool = False,
              prune: Callable[[Point, int, Any], bool] | None = None,
              redo: frozenset[str] = frozenset(),
              expected: Mapping[str, float] | None = None) -> SweepSummary:
    """Measure every point not already done on this device of this machine; one results row
    and one MLflow child run each. The executor (default: this process, one point after
    another) decides where points run; rows are written here, as each point finishes. The
    parent run gets the summary metrics, the results files, this machine's environment
    report and `outputs()` (tables, figures) as artifacts, `headline()`'s metrics and tags
    (n*, exponents, verdicts); `description` is the experiment's note. The points in `redo`
    are measured again though done (a search's trial pruned by an older rule), resuming
    from a checkpoint of their own as any point does. `expected` (point id -> expected
    seconds) makes the progress bar count those rather than points."""
    executor = executor or LocalExecutor()
    path = results_path(out_dir, suite)
    summary = SweepSummary(suite, path)
    machine = this_machine()
    done, redo = skipped(path, points, device.type, machine, resume, redo)
    todo = [p for p in points if p.point_id not in done]
    summary.resumed = len(points) - len(todo)
    facts = {"machine": machine, **executor.facts(device), **code_facts()}
    started = time.perf_counter()
    params = {"suite": suite, "device": str(device), "points": len(points), "min_run_time":
              min_run_time, "max_memory": max_memory, "executor": executor.name,
              **executor.params(), **facts}
    ctx = Context(device, min_run_time, out_dir, machine, keep_checkpoints, prune=prune,
                  resume=resume)
    claims = Claims(path, device.type, machine)
    with logs_to(path.parent / "errors.log", tracking_uri is not None), \
            Tracker(tracking_uri, suite, out_dir, params, description, facts) as tracker:
        tracker.names = run_names([_named(p) for p in points])
        summary.synced = _sync_mine(tracker, path, claims)
        weights = [(expected or {}).get(p.point_id, 0.0) for p in todo]
        counted = expected if sum(weights) > 0 else None  # else the bar counts points
        bar = progress_bar(todo, suite, enabled=progress, seconds=weights if counted else None)
        # closed on any exit, a stop signal's included: its line ends before the next message
        try:
            with closing(bar), closing(executor.run(todo, ctx, max_memory, _skipper(
                    claims, summary, resume, redo))) as finished:
                for done in signals.checked(finished):  # a stop a library swallowed
                    bar.set_postfix_str(label(done.point, trained_width(done.point)), False)
                    bar.update(counted.get(done.point.point_id, 0.0) if counted else 1)
                    # the node's facts (Ray) override the driver's; `machine` stays the driver's
                    _record(done, path, device, facts | done.facts | {"machine": machine},
                            tracker)
                    claims.release(done.point.point_id)  # written and logged: done
                    summary.count(done.result)
        finally:
            claims.release_all()  # the points in flight when stopped: free for the next sweep
        summary.wall_s = time.perf_counter() - started
        _finish(tracker, summary, path, outputs, headline)
    tidy(path)  # a clean end: its empty claims folder and the lock files no one holds go
    return summary


def skipped(path: Path, points: list[Point], device: str, machine: str, resume: bool,
            redo: frozenset[str] = frozenset()) -> tuple[set[str], frozenset[str]]:
    """The ids among `points` a sweep skips, those finished on `device` of `machine` (with
    `resume`), and those it measures again though finished: the ones in `redo` and the
    ones trained on another split (of_another_split). Rows naming these points by the ids of
    older runs (their config keys) are bad input: rerunning them would take hours, and `tvr
    migrate-ids` names them as today's."""
    if not resume:
        return set(), redo
    finished = finished_rows(path, device, machine)
    done = set(finished["point_id"].astype(str))
    old = sum(p.config_key in done for p in points)
    if old:
        raise BadInput(f"{path}: {old} finished rows name their point by the long id of older "
                       "runs; `tvr migrate-ids --out FOLDER` (the results folder) gives them "
                       "today's ids, then resume finds them")
    redo = redo | of_another_split(finished, [p for p in points if p.point_id in done])
    return done - redo, redo


def of_another_split(rows: pd.DataFrame, points: list[Point]) -> set[str]:
    """The translation points among `points` whose finished row in `rows` (this device's
    and machine's: results.finished_rows) was trained or scored on another split than the
    one they would load now, or names none (a row from before rows named their split): the
    corpus, its split or its filters changed since, so the row is not this point's result,
    and the point runs again (its new row replaces the old)."""
    translate = [p for p in points if isinstance(p.options, TranslateOptions)]
    if not translate:
        return set()
    recorded = (rows.groupby("point_id")["corpus_split"].agg(lambda s: set(s.astype(str)))
                if "corpus_split" in rows else {})
    digests: dict[Any, str] = {}  # one digest per distinct corpus
    stale = set()
    for p in translate:
        key = (p.options.bitext, p.options.reverse)
        if key not in digests:
            digests[key] = split_of(p)
        if recorded.get(p.point_id, set()) != {digests[key]}:
            stale.add(p.point_id)
    return stale


def _skipper(claims: Claims, summary: SweepSummary, resume: bool,
             redo: frozenset[str] = frozenset()) -> Callable[[Point], bool]:
    """Whether to skip a point: a sweep beside this one in the same folder may have measured
    it meanwhile, or be measuring it now (its claim); else this sweep claims it."""

    def measured_meanwhile(point: Point) -> bool:
        skip = claim_or_skip(claims, point.point_id, resume and point.point_id not in redo)
        summary.resumed += skip == "done"
        summary.elsewhere += skip == "elsewhere"
        return skip is not None

    return measured_meanwhile


def _finish(tracker: Tracker, summary: SweepSummary, path: Path,
            outputs: Callable[[], Iterable[Path]] | None,
            headline: Callable[[], tuple[dict[str, float], dict[str, str]]] | None) -> None:
    """The parent run's name (what this invocation measured), summary metrics and artifacts;
    a failed store is noted in summary. An invocation that measured nothing and logged
    nothing (a resume of a finished suite) leaves no parent run; one that measured nothing
    gets no headline numbers (they are the suite's, which earlier parents carry)."""
    measured = sum(summary.statuses.values())
    if tracker.enabled and tracker.error is None and not measured and not summary.synced:
        tracker.discard()
    elif tracker.enabled and tracker.error is None:
        did = [f"{measured} point{'s' if measured != 1 else ''} measured" if measured else "",
               f"{summary.synced} stored rows logged" if summary.synced else "",
               f"{summary.resumed} done before" if summary.resumed else ""]
        tracker.rename(f"{tracker.name} · {', '.join(d for d in did if d)}")
        numbers, tags = headline() if headline is not None and measured and path.exists() \
            else ({}, {})
        tracker.log_summary({**{f"points_{s}": n for s, n in summary.statuses.items()},
                             "points_resumed": summary.resumed, "wall_s": summary.wall_s,
                             **numbers}, tags)
        files = [path, path.parent / SERIES_FILE, path.parent / "errors.log",
                 *(outputs() if outputs is not None and path.exists() else ())]
        for file in files:
            if file.is_file():
                tracker.log_artifact(file)
        with tempfile.TemporaryDirectory() as tmp:  # the artifact store keeps its own copy
            report = Path(tmp) / "environment.txt"
            report.write_text(environment_report(), encoding="utf-8")
            tracker.log_artifact(report)
    summary.tracking_off = None if tracker.error is None else str(tracker.error)


def _sync_mine(tracker: Tracker, path: Path, claims: Claims) -> int:
    """Log to MLflow this machine's rows that a killed run wrote but never logged (not those
    a live sweep beside this one is logging: it holds their claims)."""
    if tracker.error is not None or not tracker.enabled or not path.exists():
        return 0
    with sync_lock(path):
        rows = read_results(path)
        mine = rows[(rows["machine"].astype(str) == claims.machine)
                    & (rows["device"] == claims.device)]
        series = read_series(path.parent.parent, path.parent.name) \
            if (path.parent / SERIES_FILE).exists() else None
        return tracker.sync(claims.unclaimed(mine), series)
