"""A suite's superseded rows, moved to an archive that no table reads.

A translation point whose recipe comes from a tuning search (TranslateOptions.recipe) trains
with the search's best trial at the time it runs (harness.train.translation.recipe); a later,
better trial trains new points beside the old ones, and Table 2, its figure and its claims
read each model's last recipe only (translation.last_recipe). The older recipe's rows stay
in the suite's file, counted in its row total but in no table. `archive` moves them, and
their curves and output files, to `<out>/<suite>/archive/`: a results folder of the same
form, which no table, figure, claim, sync or resume reads (none looks below a suite's folder
but at its variants).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.files import lock_file, remove_lock
from harness.report.translation import RECIPE_COLUMNS, last_recipe
from harness.results import (
    CONFIGS,
    FINAL_STATUSES,
    RESULTS_FILE,
    SERIES_FILE,
    move_rows,
    move_series,
    read_results,
    results_path,
)
from harness.schema import KEY

ARCHIVE = "archive"  # <out>/<suite>/archive/: the suite's superseded rows and curves


def superseded(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of one suite's file (every machine's) whose recipe a later one of the same
    search replaced: per machine and device, the finished trained rows of each model whose
    recipe comes from a search keep their last measured recipe (last_recipe, what the
    tables read); an earlier one's rows that differ from every kept row in a searched value
    (RECIPE_COLUMNS) are superseded. Rows that differ only in other options (a grid of
    length penalties), rows of no search or of another search, and unfinished rows are not."""
    need = {"runner", "model", "status", "recipe", "point_id", "device", "machine"}
    if rows.empty or not need <= set(rows.columns):
        return rows.iloc[:0]
    searched = [c for c in RECIPE_COLUMNS if c in rows]
    search = rows["recipe"].map(lambda v: "" if pd.isna(v) else str(v))
    trained = rows[(rows["runner"].astype(str) == "translate")
                   & rows["status"].isin(FINAL_STATUSES) & (search != "")]
    found = []
    for _, group in trained.groupby([trained["machine"].astype(str),
                                     trained["device"].astype(str)], sort=False):
        kept = last_recipe(group)
        for model, mine in group.groupby("model", sort=False):
            last = kept[kept["model"] == model]
            recipes = {tuple(map(str, r)) for r in last[searched].itertuples(index=False)}
            searches = set(last["recipe"].astype(str))
            older = mine.drop(last.index)
            replaced = [tuple(map(str, r)) not in recipes for r in
                        older[searched].itertuples(index=False)]
            found.append(older[pd.Series(replaced, index=older.index, dtype=bool)
                               & older["recipe"].astype(str).isin(searches)])
    return pd.concat(found) if found else rows.iloc[:0]


def archive_path(out_dir: Path, suite: str) -> Path:
    """The archive's results file of `suite`: `<out>/<suite>/archive/results.csv`."""
    return Path(out_dir) / suite / ARCHIVE / RESULTS_FILE


def archive(out_dir: Path, suite: str) -> pd.DataFrame:
    """Move `suite`'s superseded rows to its archive, with their curves and the output files
    their rows name (`dev_hypotheses`, `test_hypotheses`: paths under the suite's folder, to
    the same paths under the archive's) that no row left behind names; returns the rows
    moved (none: nothing written)."""
    path = results_path(out_dir, suite)
    gone = superseded(read_results(path))
    if gone.empty:
        return gone
    archive_rows(path, gone)
    return gone


def archive_rows(path: Path, rows: pd.DataFrame) -> None:
    """Rows of results file `path` moved to its suite's archive, their curves and output
    files first and the rows last: killed part-way, the rows are still there to move again."""
    folder = path.parent
    target = archive_path(folder.parent, folder.name)
    gone = set(zip(*(rows[k].astype(str) for k in KEY), strict=True))
    staying = read_results(path)
    staying = staying[[key not in gone for key in zip(
        *(staying[k].astype(str) for k in KEY), strict=True)]]
    move_series(folder / SERIES_FILE, target.parent / SERIES_FILE, rows[["point_id", "machine"]])
    move_outputs(folder, target.parent, rows, staying)
    move_rows(path, target, rows[list(KEY)])
    for file in (path, folder / SERIES_FILE, target, target.parent / SERIES_FILE):
        remove_lock(lock_file(file))  # a clean end leaves no lock file no one holds


def restore(out_dir: Path, suite: str) -> int:
    """archive's inverse: every row of `suite`'s archive back into the suite's file, with
    its curves and output files, and the archive gone; returns how many rows came back."""
    path, target = results_path(out_dir, suite), archive_path(out_dir, suite)
    if not target.is_file():
        return 0
    rows = read_results(target)
    back = move_rows(target, path, rows[list(KEY)]) if len(rows) else 0
    move_series(target.parent / SERIES_FILE, path.parent / SERIES_FILE,
                rows[["point_id", "machine"]])
    move_outputs(target.parent, path.parent, rows, rows.iloc[:0])
    for file in (path, path.parent / SERIES_FILE, target, target.parent / SERIES_FILE):
        remove_lock(lock_file(file))
    if read_results(target).empty:  # every row back: its files hold their headers only
        for file in (target, target.parent / SERIES_FILE):
            file.unlink(missing_ok=True)
    for folder in sorted((p for p in target.parent.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    if not any(target.parent.iterdir()):
        target.parent.rmdir()
    return back


def move_outputs(folder: Path, to: Path, gone: pd.DataFrame, kept: pd.DataFrame) -> None:
    """The files under `folder` that rows of `gone` name in a *_hypotheses column, and their
    resolved configurations (configs/<point_id>.json), that no row of `kept` names, moved to
    the same relative paths under `to`."""
    def named(rows: pd.DataFrame) -> set[str]:
        columns = [c for c in rows.columns if str(c).endswith("_hypotheses")]
        files = {str(v) for c in columns for v in rows[c].dropna() if str(v).strip()}
        return files | {f"{CONFIGS}/{p}.json" for p in rows.get("point_id", []) if str(p)}

    root = folder.resolve()
    for name in sorted(named(gone) - named(kept)):
        source = (folder / name).resolve()
        if not source.is_relative_to(root) or not source.is_file():
            continue  # a path outside the suite's folder, or a file already gone
        destination = to / source.relative_to(root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        source.replace(destination)


def archived(out_dir: Path, suite: str) -> int:
    """How many rows `suite`'s archive holds (0 without one)."""
    path = archive_path(out_dir, suite)
    return len(read_results(path)) if path.is_file() else 0
