"""`tvr migrate-ids`: results of older runs, keyed by long point ids, renamed to today's.

A point id used to be the point's whole configuration as one string (today's
Point.config_key, often over 400 characters); today it is short (Point.point_id), and the
long one is the row's config_key column. experiments.spec.short_id turns a long id into the
short one from the text alone, so every file keyed by point id is renamed without knowing
the suite that wrote it: each results.csv under the folder (suites, their variants and
archive, gpu/), the series.csv beside it, a variant's config.json. An id that is short
already, or is no point's (another tool's, as the cross-check's), stays as it is: running
the command again changes nothing, and rows older code writes meanwhile are renamed by the
next run. Each file is rewritten whole and atomically, under the lock its writers take.
A row whose point today's suites declare also gets its configuration file
(<folder>/configs/<point_id>.json, as a sweep writes it).

Checkpoints and hypotheses keep their names (they carry Point.digest, the digest of the
long id), and a checkpoint holds the config_key, so both are found as before.

Then the runs of a point whose FLOP cap has risen since are carried over to today's point,
or archived where their cap ended them (harness.cli.recap).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.common import out_option
from harness.cli.recap import Recapped, held, recap
from harness.errors import BadInput

if TYPE_CHECKING:
    import pandas as pd

    from experiments.spec import Point

SKIPPED = ("mlartifacts",)  # MLflow's copies of results files: a run's record, left as logged


@dataclass
class Migrated:
    """What a migration changed: files rewritten, ids renamed (results and curves rows),
    configurations written, and the longest id before and after."""

    files: list[Path] = field(default_factory=list)
    rows: int = 0
    curves: int = 0
    configs: int = 0
    longest: tuple[int, int] = (0, 0)
    recapped: Recapped = field(default_factory=Recapped)

    def line(self, out_dir: Path) -> str:
        return (f"{out_dir}: {self.rows} rows and {self.curves} curve rows renamed in "
                f"{len(self.files)} files, {self.configs} configurations written; the "
                f"longest point id {self.longest[0]} characters before, {self.longest[1]} "
                "after" + (f"; {self.recapped.line()}" if self.recapped else ""))


def migrate(out_dir: Path) -> Migrated:
    """Rename every long point id under `out_dir` (see the module docstring)."""
    from harness.results import RESULTS_FILE

    done = Migrated()
    known: dict[tuple[str, str], Point] | None = None
    for results in sorted(Path(out_dir).rglob(RESULTS_FILE)):
        if set(results.relative_to(out_dir).parts) & set(SKIPPED):
            continue
        rows = _results(results, done)
        _series(results.parent / "series.csv", done)
        _variant(results.parent, done)
        if known is None and not rows.empty:
            known = known_points(Path(out_dir))
        done.configs += _configs(results, rows, known or {})
    done.recapped = recap(Path(out_dir), known or known_points(Path(out_dir)))
    return done


def _results(path: Path, done: Migrated) -> pd.DataFrame:
    """Rename the ids of results file `path`; its rows as they are now, as text. Two rows
    of one point, device and machine after it (the same point measured by older code and
    today's) keep the later, as append_row would."""
    import pandas as pd

    from experiments.spec import short_id
    from harness.files import write_atomic
    from harness.schema import CONFIG_KEY, KEY

    with held(path):
        rows = pd.read_csv(path, dtype=str, keep_default_na=False)
        if "point_id" not in rows:
            return rows.iloc[:0]
        old = rows["point_id"]
        new = old.map(lambda p: short_id(p) or p)
        renamed = new != old
        done.longest = (max([done.longest[0], *old.str.len()]),
                        max([done.longest[1], *new.str.len()]))
        if not renamed.any():
            return rows
        if CONFIG_KEY not in rows:
            rows[CONFIG_KEY] = ""
        rows.loc[renamed, CONFIG_KEY] = old[renamed]
        rows["point_id"] = new
        if set(KEY) <= set(rows):
            rows = rows[~rows.duplicated(list(KEY), keep="last")]
        write_atomic(path, rows.to_csv(index=False, lineterminator="\n"))
    done.files.append(path)
    done.rows += int(renamed.sum())
    return rows


def _series(path: Path, done: Migrated) -> None:
    """Rename the ids of curves file `path`; curves of one point and machine from two ids
    (older code's and today's) keep those written last, as append_series would."""
    import pandas as pd

    from experiments.spec import short_id
    from harness.files import write_atomic

    if not path.is_file():
        return
    with held(path):
        curves = pd.read_csv(path, dtype=str, keep_default_na=False)
        if "point_id" not in curves:
            return
        old = curves["point_id"]
        curves["point_id"] = old.map(lambda p: short_id(p) or p)
        renamed = curves["point_id"] != old
        if not renamed.any():
            return
        keys = ["point_id", "machine"] if "machine" in curves else ["point_id"]
        curves = curves[old == old.groupby([curves[k] for k in keys]).transform("last")]
        write_atomic(path, curves.to_csv(index=False, lineterminator="\n"))
    done.files.append(path)
    done.curves += int(renamed.sum())


def _variant(folder: Path, done: Migrated) -> None:
    """Rename the point ids a variant's config.json lists (harness.variants.save_config)."""
    from experiments.spec import short_id
    from harness.files import write_atomic
    from harness.variants import CONFIG_FILE, read_config

    config = read_config(folder)
    points = config.get("points") if config else None
    if not isinstance(points, list):
        return
    changed = False
    for p in points:
        short = short_id(str(p.get("point_id", ""))) if isinstance(p, dict) else None
        if short:
            p["point_id"], changed = short, True
    if changed:
        write_atomic(folder / CONFIG_FILE, json.dumps(config, indent=1, default=str) + "\n")
        done.files.append(folder / CONFIG_FILE)


def _configs(results: Path, rows: pd.DataFrame, known: dict[tuple[str, str], Point]) -> int:
    """Write the configuration of each row whose point today's suites declare (by suite
    and config_key) and that has none yet; returns how many."""
    from harness.results import config_path, write_config
    from harness.schema import config_key_of

    written = 0
    for row in rows.to_dict("records"):
        point = known.get((str(row.get("suite", "")), config_key_of(row)))
        if point is None or point.point_id != row["point_id"] \
                or config_path(results, point.point_id).exists():
            continue
        write_config(results, point.point_id, {**point.to_config(), "machine": row.get(
            "machine", ""), "device": row.get("device", "")})
        written += 1
    return written


def known_points(out_dir: Path) -> dict[tuple[str, str], Point]:
    """(suite, config_key) -> point, of every suite this checkout declares, a recipe
    applied as `tvr run` applies it (from the searches under `out_dir`), and of every
    search's trials stored there (its base point with the trial row's recipe)."""
    import experiments
    from harness.results import read_results, results_path
    from harness.train.translation.recipe import apply, recipe_of, with_recipe

    points: list[Point] = []
    for name in experiments.suite_names():
        declared = experiments.points(name)
        try:  # its lines (a search still under way) are about training, not about this
            with redirect_stderr(io.StringIO()):
                points += apply(declared, out_dir)
        except BadInput:  # a search not run under out_dir: no recipe, no row of it here
            points += declared
    for name, make in experiments.SEARCHES.items():
        search = make()
        bases = {b.subject: b for b in search.base}
        for _, row in read_results(results_path(out_dir, name)).iterrows():
            base = bases.get(str(row.get("model", "")))
            try:
                if base is not None:
                    points.append(with_recipe(base, recipe_of(row, search.space[base.subject])))
            except (BadInput, ValueError):  # a row without the search's keys: no recipe
                continue
    return {(p.suite, p.config_key): p for p in points}


@click.command("migrate-ids", epilog="""\b
Examples:
  tvr migrate-ids                      # the results folder
  tvr migrate-ids --out /data/results  # and again later: what is renamed stays so""")
@out_option
def migrate_ids_cmd(out: str) -> None:
    """Rename the rows and curves of older runs, keyed by long point ids, to today's short
    ids (the long one kept in column config_key), and save the configuration of each row
    whose point today's suites declare: resume finds them again. Then carry over the runs
    of a point whose FLOP cap has risen since that ended below their old cap (their rows,
    curves, files and checkpoints take today's id), and archive the others (resume trains
    them again). Ids that are short already, or are another tool's, stay as
    they are, so running it again changes nothing; run it once the sweeps writing there
    have ended (they hold the old ids)."""
    out_dir = Path(out)
    if not out_dir.is_dir():
        raise BadInput(f"--out {out}: no such folder")
    click.echo(migrate(out_dir).line(out_dir))
