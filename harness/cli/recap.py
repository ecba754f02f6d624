"""Runs trained under a FLOP cap that has since risen, carried over to today's points.

A translation point's `budget_flops` is part of its configuration, so raising a suite's cap
gives each of its points a new id, and resume would train them all again. A run that ended
before its cap (by patience, at its last step, or diverged) trained as it would have under
a higher one: the cap only ends training, and the schedule, the evaluations and the
stopping rule never read it. Such a run is carried over: its row (point_id, config_key,
budget_flops), its curves, its configuration file, its hypotheses and a kept checkpoint
(named by the point's digest, and holding its config_key) take today's point's names. So is
the checkpoint of a run still under way below its old cap: it resumes under the new one.

The others move to the suite's archive (harness.report.superseded), which no table, claim
or resume reads, and resume trains their points again under the new cap: a run its cap
ended (stopped_by "budget"), one that failed or was pruned, one whose point already has a
row of today's on the same device and machine (today's stays), and their checkpoints
(`archive/checkpoints/`: left in place, one would count as a run in flight).

Each run's files are renamed before its row, the row last (results.csv rewritten whole):
killed part-way, running it again finishes the job. Run it, as `tvr migrate-ids` (which
calls it), once no sweep writes the folder: a sweep holds its point's old key in memory
and would write the old checkpoint again.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from experiments.spec import Point

# a config_key's budget: up to the next option, or to the key's tail (-n<seq>-d<d>-b<batch>-)
_BUDGET = re.compile(r"-budget_flops=(.+?)(?=-[A-Za-z_]\w*=|-n\d+-d\d+-b\d+-)")
CARRIED = ("patience", "")  # how a run carried over ended: its stopping rule, or its last step


@dataclass
class Recapped:
    """What carrying over changed: runs given today's ids (rows, checkpoints of runs under
    way), rows and checkpoints archived, and checkpoints that could not be read."""

    rows: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # checkpoints: left as they are

    def __bool__(self) -> bool:
        return bool(self.rows or self.checkpoints or self.archived or self.unreadable)

    def line(self) -> str:
        return (f"{len(self.rows)} rows and {len(self.checkpoints)} checkpoints of runs that "
                "ended below a FLOP cap since raised carried over to today's points; "
                f"{len(self.archived)} runs their cap ended (or that failed, or that today's "
                "replaced) archived, resume trains them again"
                + (f"; {len(self.unreadable)} checkpoints unreadable, left as they are: "
                   f"{', '.join(self.unreadable)}" if self.unreadable else ""))


@contextmanager
def held(path: Path) -> Iterator[None]:
    """The lock the writers of `path` take (harness.files.locked), its file removed by us
    as its holder once done, as a sweep's tidy-up removes it."""
    from harness.files import locked

    lock = locked(path)
    lock.acquire()
    try:
        yield
    finally:
        lock.release(remove=True)


def recap(out_dir: Path, known: dict[tuple[str, str], Point]) -> Recapped:
    """Carry over every suite's runs under `out_dir` whose FLOP cap rose since (module
    docstring); `known` maps (suite, config_key) to today's points (migrate.known_points)."""
    from harness.results import results_path

    done = Recapped()
    capped: dict[str, list[Point]] = {}
    for (suite, _), point in known.items():
        if getattr(point.options, "budget_flops", 0) > 0:
            capped.setdefault(suite, []).append(point)
    for suite, points in sorted(capped.items()):
        path = results_path(out_dir, suite)
        if path.is_file():
            _rows(path, points, done)
        _checkpoints(path.parent, points, done)
    return done


def _budget(config_key: str) -> float | None:
    found = _BUDGET.search(config_key)
    try:
        return float(found[1]) if found else None
    except ValueError:
        return None


def _today(config_key: str, subject: str, seed: int,
           points: list[Point]) -> tuple[Point, Point] | None:
    """Today's point that is the point of `config_key` with its FLOP cap raised, and that
    point as it was (its old cap), if any."""
    budget = _budget(config_key)
    if budget is None:
        return None
    for point in points:
        if (point.subject, point.seed) != (subject, seed) \
                or point.options.budget_flops <= budget:
            continue
        older = replace(point, options=replace(point.options, budget_flops=budget))
        if older.config_key == config_key:
            return point, older
    return None


def _below(row: pd.Series, older: Point) -> bool:
    """Whether the run of `row` ended below its cap, that of `older`, by its stopping rule
    or its last step (or diverged), not by the cap, a pruner or a failure."""
    try:
        flops = float(row.get("train_flops", "nan"))
    except ValueError:
        return False
    ended = str(row.get("status")) == "diverged" or (
        str(row.get("status")) == "ok" and str(row.get("stopped_by", "")) in CARRIED)
    return ended and math.isfinite(flops) and flops < older.options.budget_flops


def _rows(path: Path, points: list[Point], done: Recapped) -> None:
    """Carry over or archive the rows of results file `path` (module docstring)."""
    import pandas as pd

    from harness.files import write_atomic
    from harness.schema import CONFIG_KEY, KEY, config_key_of

    today = {p.config_key for p in points}
    with held(path):
        rows = pd.read_csv(path, dtype=str, keep_default_na=False)
        if not {"runner", "model", "seed", *KEY} <= set(rows):
            return
        have = set(zip(*(rows[k] for k in KEY), strict=True))
        moves, carried = {}, {}
        for i, row in rows.iterrows():
            key = config_key_of(row)
            if row["runner"] != "translate" or key in today:
                continue
            found = _today(key, row["model"], int(float(row["seed"] or -1)), points)
            if found is None:
                continue
            moves[i] = found
            mine = (found[0].point_id, row["device"], row["machine"])
            if _below(row, found[1]) and mine not in have:
                carried[i] = found
                have.add(mine)
        _plan(path.parent, points, {older.options.budget_flops for _, older in moves.values()})
        for i, (point, older) in carried.items():  # the files first, the row last
            _carry_files(path, rows.loc[i], point, older)
            rows.at[i, "point_id"] = point.point_id
            rows.at[i, CONFIG_KEY] = point.config_key
            rows.at[i, "budget_flops"] = repr(point.options.budget_flops)
            for column in (c for c in rows.columns if c.endswith("_hypotheses")):
                rows.at[i, column] = rows.at[i, column].replace(older.digest, point.digest)
            done.rows.append(f"{older.point_id} -> {point.point_id} ({rows.at[i, 'machine']})")
        if carried:
            write_atomic(path, rows.to_csv(index=False, lineterminator="\n"))
    ended = rows.loc[[i for i in moves if i not in carried]]
    if len(ended):
        from harness.report.superseded import archive_rows

        archive_rows(path, ended)
        done.archived += [f"{p} ({m})" for p, m in zip(ended["point_id"], ended["machine"],
                                                        strict=True)]


def _carry_files(path: Path, row: pd.Series, point: Point, older: Point) -> None:
    """The files of one run of `older` (its row `row` of results file `path`) take today's
    `point`'s names: the hypotheses its row names, its curves on its machine, and the
    point's configuration. None is overwritten: a target already there stays, and so
    does its source."""
    from harness.results import SERIES_FILE, config_path, write_config

    folder = path.parent
    for column in (c for c in row.index if str(c).endswith("_hypotheses") and row[c]):
        source = folder / row[column]
        target = folder / row[column].replace(older.digest, point.digest)
        if source.is_file() and not target.exists():
            source.replace(target)
    _rename_series(folder / SERIES_FILE, older.point_id, point.point_id, row["machine"])
    if not config_path(path, point.point_id).exists():
        write_config(path, point.point_id, {**point.to_config(), "machine": row["machine"],
                                            "device": row["device"]})
    config_path(path, older.point_id).unlink(missing_ok=True)


def _rename_series(path: Path, old_id: str, new_id: str, machine: str) -> None:
    """The curves of point `old_id` on `machine` in curves file `path` renamed to `new_id`."""
    import pandas as pd

    from harness.files import write_atomic

    if not path.is_file():
        return
    with held(path):
        curves = pd.read_csv(path, dtype=str, keep_default_na=False)
        mine = curves["point_id"] == old_id
        if "machine" in curves:
            mine &= curves["machine"] == machine
        if mine.any():
            curves.loc[mine, "point_id"] = new_id
            write_atomic(path, curves.to_csv(index=False, lineterminator="\n"))


def _checkpoints(folder: Path, points: list[Point], done: Recapped) -> None:
    """Checkpoints in `folder`/checkpoints of an older cap's points: one below its old cap
    takes today's point's name and key, unless today's point has one already; that one, and
    one at or past its old cap, moves to the archive (module docstring). Others stay as
    they are."""
    import torch

    from harness.files import write_atomic
    from harness.report.superseded import ARCHIVE
    from harness.report.unfinished import CHECKPOINT_NAME, CHECKPOINTS

    digests = {p.digest for p in points}
    for path in sorted((folder / CHECKPOINTS).glob("*.pt")):
        name = CHECKPOINT_NAME.fullmatch(path.name)
        if name is None or name["digest"] in digests:
            continue
        try:
            state = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu",
                               weights_only=True)
        except Exception:  # noqa: BLE001 -- whatever a damaged file raises: left as it is,
            done.unreadable.append(path.name)  # for its point's run to set aside
            continue
        key = state.get("point_id") if isinstance(state, dict) else None
        found = _today(str(key), name["subject"], int(name["seed"]), points)
        if found is None:
            continue
        point = found[0]
        target = path.with_name(path.name.replace(name["digest"], point.digest))
        flops = state.get("log", {}).get("flops", math.inf)
        if not flops < found[1].options.budget_flops or target.exists():
            aside = folder / ARCHIVE / CHECKPOINTS / path.name
            aside.parent.mkdir(parents=True, exist_ok=True)
            path.replace(aside)
            done.archived.append(f"{path.name} (a checkpoint)")
            continue
        _plan(folder, points, {found[1].options.budget_flops})
        state["point_id"] = point.config_key
        buffer = io.BytesIO()
        torch.save(state, buffer)
        write_atomic(target, buffer.getvalue())
        path.unlink()
        done.checkpoints.append(f"{path.name} -> {point.point_id}")


def _plan(folder: Path, points: list[Point], budgets: set[float]) -> None:
    """The suite's plan (harness.plan) names today's points where it named them under one
    of the old caps `budgets` (its finished gate then finds their rows)."""
    from harness.plan import read_plan, write_plan

    try:
        planned = read_plan(folder)
    except ValueError:  # a damaged plan: the next `tvr run` writes it again
        return
    olders = {replace(p, options=replace(p.options, budget_flops=b)).point_id: p
              for p in points for b in budgets}
    if any(e["point_id"] in olders for e in planned):
        write_plan(folder, [olders.get(e["point_id"]) or _Planned(**e) for e in planned])


@dataclass(frozen=True)
class _Planned:
    """A plan entry as harness.plan.write_plan reads a point."""

    point_id: str
    subject: str
    seed: int
    digest: str
