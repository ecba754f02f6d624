"""Tidy results in and out of `<out>/<suite>/results.csv`, written so a crash never loses a row.

One row per point: the identifying columns first, then the config, options and metric columns
in first-seen order, then message / torch_version / host (harness.schema declares a row's
parts). Written by harness.run, read by harness.report; files written by older versions are
read under today's column names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pandas as pd

from harness.console import say
from harness.errors import BadInput
from harness.files import locked, write_atomic
from harness.inputs import check_table
from harness.machines import chosen_machine, one_machine
from harness.schema import (
    CONFIG_KEY,
    FACTS,
    ID_COLUMNS,
    KEY,
    OUTCOME,
    POINT_FIELDS,
    TAIL_COLUMNS,
    config_key_of,
    is_metric_name,
    listed_params,
)
from harness.variants import stored_names

STATUSES = ("ok", "oom", "diverged", "error", "skipped")
RESULTS_FILE = "results.csv"
SERIES_FILE = "series.csv"

_FIXED = frozenset(ID_COLUMNS) | frozenset(TAIL_COLUMNS)
# Read as text so ids such as "0007" or "1e3" never turn into numbers.
_DIGESTS = ("corpus_split", "split", "config_sha256")  # hex: text even when all digits
_TEXT_DTYPES = {"suite": str, "point_id": str, CONFIG_KEY: str, "status": str, "message": str} | \
    dict.fromkeys(_DIGESTS, str)
# Columns of files written before points were typed: old name -> today's
_RENAMED = {"measure": "runner", "vocab": "alphabet_size", "dilated": "dilation_growth"}
_FIT_RUNNERS = ("layer", "seq-ops", "path")  # an old `role` of these rows is Table 1's fit


def _current_names(frame: pd.DataFrame) -> pd.DataFrame:
    """Old column names to today's, and a `machine`; the old `role` splits into `fit`
    (Table 1's layer and structural rows) and `study` (the training studies)."""
    # Old files only (they have `measure`): today `dilated` is also a ConvMixer config key.
    if "measure" in frame and "runner" not in frame:
        frame = frame.rename(columns={k: v for k, v in _RENAMED.items()
                                      if k in frame and v not in frame})
    if "machine" not in frame:  # rows from before machines were named: their host names them
        frame["machine"] = frame["host"] if "host" in frame else ""
    if "role" in frame:
        is_fit = frame["runner"].isin(_FIT_RUNNERS)
        frame["fit"] = frame["role"].where(is_fit, "")
        frame["study"] = frame["role"].where(~is_fit, "")
        frame = frame.drop(columns="role")
    return frame


def results_path(out_dir: Path, suite: str) -> Path:
    """Where a suite's rows live: `<out>/<suite>/results.csv` (`suite` may name a variant,
    `<suite>/variants/<variant>`: harness.variants)."""
    return Path(out_dir) / suite / RESULTS_FILE


def order_columns(columns: Iterable[str]) -> list[str]:
    """ID_COLUMNS, then every other column in first-seen order, then TAIL_COLUMNS."""
    metrics = [c for c in dict.fromkeys(columns) if c not in _FIXED]
    return [*ID_COLUMNS, *metrics, *TAIL_COLUMNS]


def _cell(value: Any) -> str:
    """Text for one CSV cell; None is an empty cell (pandas reads it back as missing)."""
    return "" if value is None else str(value)


def _read_text(path: Path) -> pd.DataFrame:
    """The file exactly as written, every cell a string, so a rewrite changes no old row."""
    if not path.exists():
        return pd.DataFrame(columns=order_columns([]), dtype=str)
    return _parse(path, dtype=str, keep_default_na=False)


_INTEGER_COLUMNS = ("seq_len", "d_model", "batch_size", "seed")
# Columns of text whatever their cells look like: the point's fields, key, outcome, facts
_TEXT_COLUMNS = frozenset((*POINT_FIELDS, *KEY, *OUTCOME, *FACTS, *TAIL_COLUMNS, *_DIGESTS)) \
    - frozenset(_INTEGER_COLUMNS)
_said: set[str] = set()  # warnings already given by this process (a report reads a file often)


def _without_bad_cells(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` without the rows holding a bad cell, each said (file, line, column) in one
    warning line per file: a status no run writes, a size that is not a whole number up to
    2**53, text in a column of numbers (a metric by its name, harness.schema, or a column
    with at least as many numbers as text cells; a point's listed params and the text
    columns are left as they are)."""
    bad: dict[int, str] = {}
    status = frame["status"].astype(str)
    for i in frame.index[~status.isin(STATUSES)]:
        bad.setdefault(i, f"status {status[i]!r} is not one of {', '.join(STATUSES)}")
    params = set().union(*(listed_params(k) for k in config_keys(frame)))
    numbers = {}
    for column in frame.columns:
        if column in _TEXT_COLUMNS or column in params and column not in _INTEGER_COLUMNS:
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        text = values.isna() & frame[column].notna()
        if column in _INTEGER_COLUMNS:
            text |= ~values.isna() & ((values.abs() > 2**53) | (values % 1 != 0))
        elif not text.any() or (values.notna().sum() < text.sum()
                                and not is_metric_name(column)):
            continue  # numbers throughout, or a column of text (fewer numbers than text)
        kind = "whole number up to 2**53" if column in _INTEGER_COLUMNS else "number"
        for i in frame.index[text]:
            cell = str(frame.loc[i, column])[:40]
            bad.setdefault(i, f"column {column}: {cell!r} is not a {kind}")
        numbers[column] = values
    lines = [f"line {int(i) + 2} ({why})" for i, why in sorted(bad.items())]
    message = (f"warning: {path}: {len(lines)} row(s) with a bad cell skipped: "
               f"{'; '.join(lines[:3])}{'; ...' if len(lines) > 3 else ''}; fix or remove them")
    if lines and message not in _said:
        _said.add(message)
        say(message)
    frame = frame.drop(index=list(bad))
    for column, values in numbers.items():
        frame[column] = pd.to_numeric(values.drop(index=list(bad)))
    # a column set at a time leaves a block each: a deep copy joins them, so the reports'
    # own columns added later raise no fragmentation warnings
    return frame.reset_index(drop=True).copy()


def config_keys(frame: pd.DataFrame) -> pd.Series:
    """Each row's config_key (harness.schema.config_key_of): its point_id in a row from
    before ids were short."""
    return pd.Series([config_key_of(r) for r in frame.to_dict("records")], index=frame.index,
                     dtype=str)


def _parse(path: Path, **read_csv_kwargs: Any) -> pd.DataFrame:
    """pd.read_csv, with a file that is not a results table reported as bad input."""
    if path.exists() and not path.is_file():
        raise BadInput(f"{path} is not a file; move it aside")
    try:
        frame = pd.read_csv(path, **read_csv_kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BadInput(f"cannot read results file {path} ({first}); move it aside or fix "
                       "it") from None
    if not {"point_id", "status"} <= set(frame.columns):
        raise BadInput(f"{path} is not a results file (no point_id/status columns); "
                       "move it aside or fix it")
    check_table(path, frame)
    return _current_names(frame)


ROW_KEY = KEY  # one row per point, device and machine


def _same_point(frame: pd.DataFrame, row: Mapping[str, Any]) -> pd.Series:
    same = pd.Series(True, index=frame.index)
    for key in ROW_KEY:
        column = frame[key] if key in frame else pd.Series("", index=frame.index)
        same &= column.astype(str) == _cell(row.get(key))
    return same


def append_row(path: Path, row: Mapping[str, Any]) -> None:
    """Add one point's row to a results CSV, atomically (old rows survive any crash).

    A row of the same point, device and machine replaces the old row, so rerunning a failed
    point leaves one row per point and machine; other machines' rows are never touched.
    Columns are the union of old and new ones.
    """
    path = Path(path)
    missing = [k for k in ("suite", "point_id", "status") if not row.get(k)]
    if missing:
        raise ValueError(f"results row lacks {missing}: {dict(row)}")
    if row["status"] not in STATUSES:
        raise ValueError(f"status {row['status']!r} is not one of {STATUSES}")
    with locked(path):
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            stale.unlink(missing_ok=True)  # a killed writer's: we hold the lock, none is live
        old = _read_text(path)
        old = old[~_same_point(old, row)]
        new = pd.DataFrame([{k: _cell(v) for k, v in row.items()}], dtype=str)
        frames = [f for f in (old, new) if len(f)]
        table = pd.concat(frames, ignore_index=True).fillna("")
        columns = order_columns([*old.columns, *new.columns])
        table = table.reindex(columns=columns, fill_value="")
        write_atomic(path, table.to_csv(index=False, lineterminator="\n"))


def move_rows(path: Path, target: Path, keys: pd.DataFrame) -> int:
    """Move the rows of results file `path` whose point, device and machine (ROW_KEY) are
    those of a row of `keys` to results file `target` (created if missing; a row of the same
    key there is replaced), each file rewritten whole and atomically under its lock, the
    target first: a crash between the two leaves a row in both, never in neither. Every
    other row stays as written. Returns how many rows moved."""
    path, target = Path(path), Path(target)
    with locked(path), locked(target):
        rows = _read_text(path)
        moving = pd.Series(False, index=rows.index)
        for key in keys.to_dict("records"):
            moving |= _same_point(rows, key)
        if not moving.any():
            return 0
        kept = _read_text(target)
        for key in rows[moving].to_dict("records"):
            kept = kept[~_same_point(kept, key)]
        both = pd.concat([f for f in (kept, rows[moving]) if len(f)], ignore_index=True)
        both = both.reindex(columns=order_columns([*kept.columns, *rows.columns]),
                            fill_value="").fillna("")
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, both.to_csv(index=False, lineterminator="\n"))
        write_atomic(path, rows[~moving].to_csv(index=False, lineterminator="\n"))
    return int(moving.sum())


def move_series(path: Path, target: Path, keys: pd.DataFrame) -> int:
    """Move the curves in curves file `path` of the points and machines in `keys` (columns
    point_id and machine) to curves file `target`, as move_rows moves rows; returns how many
    curve rows moved."""
    path, target = Path(path), Path(target)
    if not path.exists():
        return 0
    pairs = set(zip(keys["point_id"].astype(str), keys["machine"].astype(str), strict=True))
    with locked(path), locked(target):
        curves = pd.read_csv(path, dtype=str, keep_default_na=False)
        machine = curves["machine"] if "machine" in curves else pd.Series("", curves.index)
        moving = pd.Series([pair in pairs for pair in zip(curves["point_id"], machine,
                                                          strict=True)], index=curves.index)
        if not moving.any():
            return 0
        old = pd.read_csv(target, dtype=str, keep_default_na=False) if target.exists() \
            else curves.iloc[:0]
        gone = set(zip(curves.loc[moving, "point_id"], machine[moving], strict=True))
        mine = pd.Series([pair in gone for pair in zip(
            old["point_id"], old["machine"] if "machine" in old else [""] * len(old),
            strict=True)], index=old.index, dtype=bool)  # replaced, as append_series does
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, pd.concat([old[~mine], curves[moving]], ignore_index=True)
                     .to_csv(index=False, lineterminator="\n"))
        write_atomic(path, curves[~moving].to_csv(index=False, lineterminator="\n"))
    return int(moving.sum())


CONFIGS = "configs"  # <out>/<suite>/configs/<point_id>.json, beside the rows


def config_path(results: Path, point_id: str) -> Path:
    """Where the resolved configuration of the point `point_id` of results file `results`
    lives: `configs/<point_id>.json` beside it."""
    if not point_id or point_id in (".", "..") or "/" in point_id or "\0" in point_id:
        raise ValueError(f"point id {point_id!r} cannot name a file")
    return Path(results).parent / CONFIGS / f"{point_id}.json"


def write_config(results: Path, point_id: str, config: Mapping[str, Any]) -> Path:
    """Save a point's resolved configuration (Point.to_config and the machine) beside the
    rows of results file `results`, atomically: a kill leaves the old file or the new one,
    never a part; returns its path."""
    path = config_path(results, point_id)
    write_atomic(path, json.dumps(dict(config), indent=1, default=str) + "\n")
    return path


def read_config(results: Path, point_id: str) -> dict[str, Any] | None:
    """The configuration write_config saved for `point_id`; None where there is none (a
    row from before configurations were saved) or it is not such a file."""
    try:
        config = json.loads(config_path(results, point_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing, unreadable, not JSON, or no file name
        return None
    return config if isinstance(config, dict) else None


def series_path(out_dir: Path, suite: str) -> Path:
    """Per-step curves of a suite's points (training metrics): `<out>/<suite>/series.csv`."""
    return Path(out_dir) / suite / SERIES_FILE


def append_series(path: Path, point_id: str, series: Mapping[str, Iterable[tuple[int, float]]],
                  machine: str = "") -> None:
    """Store one point's curves as tidy rows (point_id, machine, metric, step, value),
    atomically, replacing any curves an earlier run of the same point on `machine` left."""
    path = Path(path)
    new = pd.DataFrame([(point_id, machine, name, int(step), float(value))
                        for name, points in series.items() for step, value in points],
                       columns=["point_id", "machine", "metric", "step", "value"])
    with locked(path):
        if path.exists():
            old = _read_series(path)
            mine = (old["point_id"] == point_id) & (old["machine"] == machine)
            new = pd.concat([old[~mine], new], ignore_index=True)
        write_atomic(path, new.to_csv(index=False, lineterminator="\n"))


def read_series(out_dir: Path, suite: str) -> pd.DataFrame:
    """A suite's curves; BadInput naming the command if it has none."""
    path = series_path(out_dir, suite)
    if not path.exists():
        raise BadInput(f"no training curves for suite {suite!r} under {out_dir}: "
                       f"run `tvr run {suite}` first")
    return _read_series(path)


def _read_series(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype={"point_id": str, "machine": str},
                            keep_default_na=False, na_values={"value": ["", "nan"]})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError,
            IsADirectoryError) as e:
        raise BadInput(f"cannot read curves file {path} ({type(e).__name__}); move it aside "
                       "or fix it") from None
    if not {"point_id", "metric", "step", "value"} <= set(frame.columns):
        raise BadInput(f"{path} is not a curves file; move it aside or fix it")
    if "machine" not in frame:  # written before rows named their machine
        frame.insert(1, "machine", "")
    return frame


def read_results(path: Path) -> pd.DataFrame:
    """One suite's rows with inferred dtypes; an empty frame with the fixed columns if none.
    Within frozen_results(), each file (as last modified) is parsed once and copied."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=order_columns([]))
    stat = path.stat()
    return memo(("results", path.resolve(), stat.st_mtime_ns, stat.st_size),
                lambda: _read_results(path)).copy()


def _read_results(path: Path) -> pd.DataFrame:
    frame = _without_bad_cells(path, _parse(path, dtype=_TEXT_DTYPES))
    if "message" in frame:
        frame["message"] = frame["message"].fillna("")  # "no message" is not missing data
    return frame


_frozen: ContextVar[dict | None] = ContextVar("frozen_results", default=None)


@contextmanager
def frozen_results() -> Iterator[None]:
    """Within this block, the results are taken as unchanging: what memo() makes is made
    once per key. For one report: its pages read the same suites, and the claims ledger,
    many times over (`tvr report --docs` built the ledger 6 times and parsed results files
    369 times)."""
    token = _frozen.set({})
    try:
        yield
    finally:
        _frozen.reset(token)


def frozen() -> bool:
    """Whether this runs within frozen_results()."""
    return _frozen.get() is not None


def memo(key: tuple, make: Callable[[], Any]) -> Any:
    """make(), once per key (and per machine_choice) within frozen_results(); every time
    outside it. The caller copies what it may change."""
    cache = _frozen.get()
    if cache is None:
        return make()
    key = (*key, chosen_machine())
    if key not in cache:
        cache[key] = make()
    return cache[key]


FINAL_STATUSES = ("ok", "diverged")  # a diverged run is a result: rerunning it changes nothing


def finished_rows(path: Path, device: str, machine: str) -> pd.DataFrame:
    """The rows finished (FINAL_STATUSES) on `device` of `machine`: what resume skips. Rows
    from another machine or device never stand in for this one's."""
    frame = read_results(path)
    done = frame["status"].isin(FINAL_STATUSES)
    done &= frame["device"].astype(str) == device
    done &= frame["machine"].astype(str) == machine
    return frame[done]


def done_points(path: Path, device: str, machine: str) -> set[str]:
    """point_ids of finished_rows: what resume skips."""
    return set(finished_rows(path, device, machine)["point_id"].astype(str))


def _unreadable(out_dir: Path) -> str:
    """", where folders FOO, BAR cannot be read (Permission denied)" for the folders under
    `out_dir` this process may not list (a listing skips them without a word)."""
    try:
        folders = [p.name for p in out_dir.iterdir()
                   if p.is_dir() and not os.access(p, os.R_OK | os.X_OK)]
    except OSError:
        return ""  # out_dir itself: the caller's message names it
    return f", where folders {', '.join(sorted(folders))} cannot be read (Permission " \
        "denied)" if folders else ""


def load_results(out_dir: Path, suites: list[str] | None = None,
                 machine: str | None = None) -> pd.DataFrame:
    """Every suite's rows under `out_dir` (or only `suites`) as one tidy frame, each suite's
    from one machine (see one_machine; machine="all" keeps every machine's rows).

    Raises BadInput naming the suites that have no results and the command that makes them.
    """
    out_dir = Path(out_dir)
    out_flag = "" if out_dir == Path("results") else f" --out {out_dir}"
    if suites is None:
        paths = [results_path(out_dir, s) for s in stored_names(out_dir, RESULTS_FILE)]
        if not paths:
            raise BadInput(f"no results under {out_dir}{_unreadable(out_dir)}: run `tvr run "
                           f"SUITE{out_flag}` first (`tvr suites` lists the suites)")
    else:
        paths = [results_path(out_dir, s) for s in suites]
        missing = [s for s in suites if not results_path(out_dir, s).exists()]
        if missing:
            runs = "; ".join(f"`tvr run {s}{out_flag}`" for s in missing)
            raise BadInput(f"no results for suite(s) {', '.join(missing)} under {out_dir}: "
                           f"run {runs} first")
    frames = [read_results(p) for p in paths]
    if machine != "all":
        frames = [one_machine(f, machine) for f in frames]
    # pandas warns about (and will change) concat with empty frames: keep only non-empty ones.
    filled = [f for f in frames if len(f)] or frames[:1]
    table = pd.concat(filled, ignore_index=True)
    return table.reindex(columns=order_columns(table.columns))
