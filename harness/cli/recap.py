"""Runs trained under a FLOP cap that has since risen, carried over to today's points.

A translation point's `budget_flops` is part of its configuration, so raising a suite's cap
gives each of its points a new id, and resume would train them all again. A run that ended
before its cap (by patience, at its last step, or diverged) trained as it would have under
a higher one: the cap only ends training, and the schedule, the evaluations and the
stopping rule never read it. Such a run is carried over: its row (point_id, config_key,
budget_flops), its curves, its configuration file, its hypotheses and a kept checkpoint
(named by the point's digest, and holding its config_key) take today's point's names. So is
the checkpoint of a run still under way below its old cap: it resumes under the new one.
A run its cap ended (stopped_by "budget") is not carried over: its row, curves and files
move to the suite's archive (harness.report.superseded), which no table reads, and resume
trains the point again under the new cap.

Run it, as `tvr migrate-ids` (which calls it), once no sweep writes the folder: a sweep
holds its point's old key in memory and would write the old checkpoint again.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from experiments.spec import Point

_BUDGET = re.compile(r"-budget_flops=([^=]+?)-[A-Za-z_]\w*=")  # its value, up to the next key


@dataclass
class Recapped:
    """What carrying over changed: runs given today's ids (rows, checkpoints of runs under
    way) and rows their cap ended, archived."""

    rows: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # checkpoints: left as they are

    def __bool__(self) -> bool:
        return bool(self.rows or self.checkpoints or self.archived or self.unreadable)

    def line(self) -> str:
        return (f"{len(self.rows)} rows and {len(self.checkpoints)} checkpoints of runs that "
                "ended below a FLOP cap since raised carried over to today's points; "
                f"{len(self.archived)} rows their cap ended archived (resume trains them "
                "again)" + (f"; {len(self.unreadable)} checkpoints unreadable, left as they "
                            f"are: {', '.join(self.unreadable)}" if self.unreadable else ""))


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
        moved = _rows(path, points, done) if path.is_file() else []
        moved += _checkpoints(path.parent, points, done)
        _plan(path.parent, points, {older.options.budget_flops for _, older in moved})
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
    """Whether the run of `row` ended below its cap, that of `older` (by anything but it)."""
    try:
        flops = float(row.get("train_flops", "nan"))
    except ValueError:
        return False
    return str(row.get("stopped_by", "")) != "budget" and math.isfinite(flops) \
        and flops < older.options.budget_flops


def _rows(path: Path, points: list[Point], done: Recapped) -> list[tuple[Point, Point]]:
    """Carry over or archive the rows of results file `path` (module docstring); returns
    today's point and the older one of each."""
    import pandas as pd

    from harness.files import locked, write_atomic
    from harness.results import SERIES_FILE, write_config
    from harness.schema import CONFIG_KEY, config_key_of

    today = {p.config_key for p in points}
    with locked(path):
        rows = pd.read_csv(path, dtype=str, keep_default_na=False)
        if not {"runner", "model", "seed", "point_id"} <= set(rows):
            return []
        moves = {}
        for i, row in rows.iterrows():
            key = config_key_of(row)
            if row["runner"] == "translate" and key not in today:
                found = _today(key, row["model"], int(row["seed"]), points)
                if found is not None:
                    moves[i] = found
        carried = {i: m for i, m in moves.items() if _below(rows.loc[i], m[1])}
        for i, (point, older) in carried.items():
            rows.at[i, "point_id"] = point.point_id
            rows.at[i, CONFIG_KEY] = point.config_key
            rows.at[i, "budget_flops"] = repr(point.options.budget_flops)
            for column in (c for c in rows.columns if c.endswith("_hypotheses")):
                rows.at[i, column] = rows.at[i, column].replace(older.digest, point.digest)
        if carried:
            write_atomic(path, rows.to_csv(index=False, lineterminator="\n"))
    folder = path.parent
    for i, (point, older) in carried.items():
        for old in (folder / "hypotheses").glob(f"*-{older.digest}-*"):
            old.replace(old.with_name(old.name.replace(older.digest, point.digest)))
        _rename_series(folder / SERIES_FILE, older.point_id, point.point_id)
        (folder / "configs" / f"{older.point_id}.json").unlink(missing_ok=True)
        write_config(path, point.point_id, {**point.to_config(), "machine": rows.at[
            i, "machine"], "device": rows.at[i, "device"]})
        done.rows.append(f"{older.point_id} -> {point.point_id}")
    ended = rows.loc[[i for i in moves if i not in carried]]
    if len(ended):
        _archive(path, ended)
        done.archived += list(ended["point_id"])
    return list(moves.values())


def _rename_series(path: Path, old_id: str, new_id: str) -> None:
    """The curves of point `old_id` in curves file `path` renamed to `new_id`."""
    import pandas as pd

    from harness.files import locked, write_atomic

    if not path.is_file():
        return
    with locked(path):
        curves = pd.read_csv(path, dtype=str, keep_default_na=False)
        mine = curves["point_id"] == old_id
        if mine.any():
            curves.loc[mine, "point_id"] = new_id
            write_atomic(path, curves.to_csv(index=False, lineterminator="\n"))


def _archive(path: Path, rows: pd.DataFrame) -> None:
    """Rows of results file `path` moved to its suite's archive, with their curves and files
    (as harness.report.superseded.archive moves superseded ones)."""
    from harness.report.superseded import archive_path, move_outputs
    from harness.results import SERIES_FILE, move_rows, move_series, read_results
    from harness.schema import KEY

    folder = path.parent
    target = archive_path(folder.parent, folder.name)
    move_rows(path, target, rows[list(KEY)])
    move_series(folder / SERIES_FILE, target.parent / SERIES_FILE,
                rows[["point_id", "machine"]])
    move_outputs(folder, target.parent, rows, read_results(path))


def _checkpoints(folder: Path, points: list[Point],
                 done: Recapped) -> list[tuple[Point, Point]]:
    """Checkpoints in `folder`/checkpoints of runs below their old cap take today's point's
    name and key (module docstring); others stay as they are. Returns today's point and the
    older one of each carried over."""
    import torch

    from harness.files import write_atomic
    from harness.report.unfinished import CHECKPOINT_NAME, CHECKPOINTS

    digests, moved = {p.digest for p in points}, []
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
        if found is None or not state.get("log", {}).get("flops", math.inf) \
                < found[1].options.budget_flops:
            continue
        point = found[0]
        state["point_id"] = point.config_key
        buffer = io.BytesIO()
        torch.save(state, buffer)
        write_atomic(path.with_name(path.name.replace(name["digest"], point.digest)),
                     buffer.getvalue())
        path.unlink()
        done.checkpoints.append(f"{path.name} -> {point.point_id}")
        moved.append(found)
    return moved


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
