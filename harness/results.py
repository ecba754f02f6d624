"""Tidy results in and out of `<out>/<suite>/results.csv`, written so a crash never loses a row.

One row per point (DESIGN.md "Results"): the identifying columns first, then the metric columns
in first-seen order, then message / torch_version / host.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import BadInput

ID_COLUMNS = ["suite", "point_id", "model", "mixer", "seq_len", "d_model", "batch_size",
              "device", "dtype", "seed", "status"]
TAIL_COLUMNS = ["message", "torch_version", "host"]
STATUSES = ("ok", "oom", "diverged", "error", "skipped")
RESULTS_FILE = "results.csv"
SERIES_FILE = "series.csv"

_FIXED = frozenset(ID_COLUMNS) | frozenset(TAIL_COLUMNS)
# Read as text so ids such as "0007" or "1e3" never turn into numbers.
_TEXT_DTYPES = {"suite": str, "point_id": str, "status": str, "message": str}


def results_path(out_dir: Path, suite: str) -> Path:
    """Where a suite's rows live: `<out>/<suite>/results.csv`."""
    return Path(out_dir) / suite / RESULTS_FILE


def write_atomic(path: Path, text_or_bytes: str | bytes) -> None:
    """Write a whole file so readers see the old content or the new one, never a mix.

    The data goes to a temp file in the same directory (os.replace is atomic only within one
    filesystem), is fsynced, then renamed over `path`; on any failure the temp file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else text_or_bytes
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 lets the umask decide the mode, as a plain open() would;
    # tempfile.mkstemp would leave results readable by the owner only.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself; without this a power cut can undo os.replace."""
    if os.name != "posix":  # Windows cannot open a directory; its rename is durable enough
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def _parse(path: Path, **read_csv_kwargs: Any) -> pd.DataFrame:
    """pd.read_csv, with a file that is not a results table reported as bad input."""
    try:
        frame = pd.read_csv(path, **read_csv_kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read results file {path} ({e}); move it aside or fix it") from e
    if not {"point_id", "status"} <= set(frame.columns):
        raise BadInput(f"{path} is not a results file (no point_id/status columns); "
                       "move it aside or fix it")
    return frame


def append_row(path: Path, row: Mapping[str, Any]) -> None:
    """Add one point's row to a results CSV, atomically (old rows survive any crash).

    A row whose point_id is already in the file replaces the old row, so rerunning a failed
    point leaves one row per point. Columns are the union of old and new ones.
    """
    path = Path(path)
    missing = [k for k in ("suite", "point_id", "status") if not row.get(k)]
    if missing:
        raise ValueError(f"results row lacks {missing}: {dict(row)}")
    if row["status"] not in STATUSES:
        raise ValueError(f"status {row['status']!r} is not one of {STATUSES}")
    old = _read_text(path)
    old = old[old["point_id"] != str(row["point_id"])]
    new = pd.DataFrame([{k: _cell(v) for k, v in row.items()}], dtype=str)
    frames = [f for f in (old, new) if len(f)]
    table = pd.concat(frames, ignore_index=True).fillna("")
    columns = order_columns([*old.columns, *new.columns])
    table = table.reindex(columns=columns, fill_value="")
    write_atomic(path, table.to_csv(index=False, lineterminator="\n"))


def series_path(out_dir: Path, suite: str) -> Path:
    """Per-step curves of a suite's points (training metrics): `<out>/<suite>/series.csv`."""
    return Path(out_dir) / suite / SERIES_FILE


def append_series(path: Path, point_id: str, series: Mapping[str, Iterable[tuple[int, float]]]
                  ) -> None:
    """Store one point's curves as tidy rows (point_id, metric, step, value), atomically,
    replacing any curves an earlier run of the same point left."""
    path = Path(path)
    old = pd.read_csv(path, dtype={"point_id": str}) if path.exists() else None
    new = pd.DataFrame([(point_id, name, int(step), float(value))
                        for name, points in series.items() for step, value in points],
                       columns=["point_id", "metric", "step", "value"])
    if old is not None:
        new = pd.concat([old[old["point_id"] != point_id], new], ignore_index=True)
    write_atomic(path, new.to_csv(index=False, lineterminator="\n"))


def read_series(out_dir: Path, suite: str) -> pd.DataFrame:
    """A suite's curves; BadInput naming the command if it has none."""
    path = series_path(out_dir, suite)
    if not path.exists():
        raise BadInput(f"no training curves for suite {suite!r} under {out_dir}: "
                       f"run `tvr run {suite}` first")
    return pd.read_csv(path, dtype={"point_id": str})


def read_results(path: Path) -> pd.DataFrame:
    """One suite's rows with inferred dtypes; an empty frame with the fixed columns if none."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=order_columns([]))
    frame = _parse(path, dtype=_TEXT_DTYPES)
    if "message" in frame:
        frame["message"] = frame["message"].fillna("")  # "no message" is not missing data
    return frame


FINAL_STATUSES = ("ok", "diverged")  # a diverged run is a result: rerunning it changes nothing


def done_points(path: Path, device: str | None = None) -> set[str]:
    """point_ids already finished (FINAL_STATUSES) on `device` (any device if None): what
    --resume skips. Rows from another device never stand in for this one's."""
    frame = read_results(path)
    done = frame["status"].isin(FINAL_STATUSES)
    if device is not None and "device" in frame:
        done &= frame["device"].astype(str) == device
    return set(frame.loc[done, "point_id"].astype(str))


def load_results(out_dir: Path, suites: list[str] | None = None) -> pd.DataFrame:
    """Every suite's rows under `out_dir` (or only `suites`) as one tidy frame.

    Raises BadInput naming the suites that have no results and the command that makes them.
    """
    out_dir = Path(out_dir)
    out_flag = "" if out_dir == Path("results") else f" --out {out_dir}"
    if suites is None:
        paths = sorted(out_dir.glob(f"*/{RESULTS_FILE}"))
        if not paths:
            raise BadInput(f"no results under {out_dir}: run `tvr run SUITE{out_flag}` first "
                           "(`tvr suites` lists the suites)")
    else:
        paths = [results_path(out_dir, s) for s in suites]
        missing = [s for s in suites if not results_path(out_dir, s).exists()]
        if missing:
            runs = "; ".join(f"`tvr run {s}{out_flag}`" for s in missing)
            raise BadInput(f"no results for suite(s) {', '.join(missing)} under {out_dir}: "
                           f"run {runs} first")
    frames = [read_results(p) for p in paths]
    # pandas warns about (and will change) concat with empty frames: keep only non-empty ones.
    filled = [f for f in frames if len(f)] or frames[:1]
    table = pd.concat(filled, ignore_index=True)
    return table.reindex(columns=order_columns(table.columns))
