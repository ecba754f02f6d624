"""Suites declared in a TOML file (`tvr run --suite-file FILE.toml`): product grids of points,
checked whole before anything runs. A bad file raises SuiteFileError, one line naming the
file, the key and the allowed values.

    name = "linear-attention"             # the results folder: <out>/linear-attention/
    description = "..."                   # optional
    [config.self-attention]               # optional: config for every point of a subject
    n_heads = 4
    [[grid]]                              # one or more grids; each is a product of its lists
    measure = "layer"                     # layer | seq-ops | path | compare | train
    mixers = ["linear-attention", "lstm"] # layer-level measures; train takes `models`
    seq_len = [256, 512]                  # sequence lengths (n)
    d_model = [32]                        # widths (d)
    batch_size = 2                        # a number or a list of numbers
    seeds = [0]                           # optional (default 0)
    dtype = "float32"                     # optional (default float32)
    fit = "n"                             # optional: the Table 1 group these points fill
    config = { form = ["parallel"] }      # optional: a list value is one more grid axis
    # measure = "path": dilation_growth = true; "compare": versus = "torch" | "timer";
    # "train": [grid.train] task = "copy", steps = 200, ... (TrainOptions and TaskSpec fields)
    [set]                                 # optional: as `tvr run --set KEY=VALUE`, e.g.
    seed = 1                              # a size, an option or a config key of every point
"""

from __future__ import annotations

import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import torch

import models
from experiments import suite_names
from experiments.overrides import Set
from experiments.spec import (
    CompareOptions,
    Match,
    PathOptions,
    Point,
    TaskSpec,
    TrainOptions,
    config,
    product,
)
from models.plugins import PLUGIN_HINT
from models.reference import REFERENCE_KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

MEASURES = ("layer", "seq-ops", "path", "compare", "train")
DTYPES = ("float32", "bfloat16", "float16")
TOP_KEYS = ("name", "description", "config", "grid", "set")
GRID_KEYS = ("measure", "mixers", "models", "seq_len", "d_model", "batch_size", "seeds", "dtype",
             "fit", "config", "dilation_growth", "versus", "train")
# [grid.train]: key -> type; TaskSpec's (task, alphabet_size, framing, keywords) and
# TrainOptions' settings
TRAIN_KEYS: dict[str, type | tuple[type, ...]] = {
    "task": str, "alphabet_size": int, "framing": str, "keywords": dict, "steps": int,
    "lr": (int, float), "schedule": str, "warmup": int, "clip": (int, float),
    "eval_every": int, "eval_batches": int, "target": (int, float), "length_gen": bool,
    "match": str}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_NAME = 100  # a folder name, short enough to read (a variant's is a folder below it)
MAX_BYTES = 1 << 20  # a suite file is a few hundred bytes; 1 MiB is a generous bound
MAX_DEPTH = 8  # tables and lists: a suite file needs 4 levels
# What one machine can run, per axis: a point beyond these is an error row, never a result.
# A grid's sizes are spelled as the rows' columns; files written before say n, d and batch.
OLD_SIZES = {"n": "seq_len", "d": "d_model", "batch": "batch_size"}
BOUNDS = {"seq_len": (1, 1 << 20), "d_model": (1, 1 << 16), "batch_size": (1, 1 << 16),
          "n": (1, 1 << 20), "d": (1, 1 << 16), "batch": (1, 1 << 16),
          "seeds": (0, (1 << 32) - 1), "steps": (1, 10**7), "warmup": (0, 10**7),
          "eval_every": (1, 10**7), "eval_batches": (1, 10**4),
          "alphabet_size": (2, 1 << 20)}
MAX_KNOB = 1 << 20  # any other integer (a config knob, a task keyword)
MAX_FLOAT = 1e6  # any number that is not an integer (lr, clip, target, dropout, ...)
# Points a file may declare, its grids together (the largest built-in suite has a few
# hundred): counted as the product of each grid's list lengths before any point is made,
# so a 3,000 x 3,000 grid is one line, not gigabytes of points.
MAX_POINTS = 10_000


class SuiteFileError(ValueError):
    """A suite file that cannot be run: the message names the file and the key."""


class _File:
    """Error reporting for one file: fail(key, problem) raises naming both."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str) -> SuiteFileError:
        return SuiteFileError(f"suite file {self.path}: {key}: {problem}")

    def keys(self, table: dict, allowed: tuple[str, ...], where: str) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(f"{where}{key}", f"unknown key; valid: {', '.join(allowed)}")

    def typed(self, value: Any, kind: type | tuple[type, ...], key: str) -> Any:
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(_TYPE_NAMES[k] for k in kinds)
            raise self.fail(key, f"{value!r} is not {names}")
        return value

    def axis(self, value: Any, kind: type, key: str, low: int | None = None) -> list[Any]:
        """A scalar or a non-empty list of `kind`, each at least `low`."""
        values = value if isinstance(value, list) else [value]
        if not values:
            raise self.fail(key, "empty list; give at least one value")
        for v in values:
            self.typed(v, kind, key)
            if low is not None and v < low:
                raise self.fail(key, f"{v!r} is below {low}")
        return values


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               dict: "a table", list: "a list"}


def load(path: str | Path) -> tuple[str, str, list[Point]]:
    """(suite name, description, points) of the suite file at `path`; SuiteFileError if any
    key is unknown, mistyped or names an unknown mixer, model or knob."""
    f = _File(Path(path))
    try:
        doc = tomllib.loads(_read(f).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SuiteFileError(f"suite file {f.path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise f.fail("(file)", f"nested deeper than {MAX_DEPTH} levels") from None
    _check_numbers(f, doc, "", 0)
    f.keys(doc, TOP_KEYS, "")
    if "name" not in doc:
        raise f.fail("name", "missing; it names the results folder")
    name = f.typed(doc["name"], str, "name")
    if not NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise f.fail("name", f"{name[:40]!r}{'...' if len(name) > 40 else ''} is not a "
                             f"folder name (letters, digits, . _ -; at most {MAX_NAME})")
    if name in suite_names():
        raise f.fail("name", f"{name!r} is already a suite; choose another name (its results "
                             "folder would mix with that suite's)")
    description = f.typed(doc.get("description", ""), str, "description")
    defaults = f.typed(doc.get("config", {}), dict, "config")
    for subject, table in defaults.items():
        f.typed(table, dict, f"config.{subject}")
    grids = f.typed(doc.get("grid", []), list, "grid")
    if not grids:
        raise f.fail("grid", "empty; declare at least one [[grid]] table")
    points: dict[str, Point] = {}  # point_id -> point: grids that overlap measure once
    declared = 0  # points of the grids so far, overlaps included
    for i, grid in enumerate(grids):
        made = _grid(f, name, f.typed(grid, dict, f"grid[{i}]"), f"grid[{i}].", defaults,
                     MAX_POINTS - declared)
        declared += len(made)
        for p in made:
            points.setdefault(p.point_id, p)
    known = [*models.mixer_kinds(), *models.names()]
    points = _settings(f, name, f.typed(doc.get("set", {}), dict, "set"), points)
    for subject in defaults:  # after the grids, whose unknown mixers are the likelier slip
        if subject not in known:
            raise f.fail(f"config.{subject}", f"unknown mixer or model; valid: "
                                              f"{', '.join(known)}")
    return name, description, list(points.values())


def _settings(f: _File, suite: str, settings: dict, points: dict[str, Point]
              ) -> dict[str, Point]:
    """`[set]`: one setting of every point that has it, as `tvr run --set KEY=VALUE` (a
    size, an option, a config key); the folder keeps the file's name."""
    for key, value in settings.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        override = Set(key, text, option="set")
        try:
            override.check(list(points.values()), suite)
        except ValueError as exc:
            raise f.fail(f"set.{key}", str(exc).removeprefix(f"set {key}: ")) from None
        changed = (override(p) for p in points.values())
        points = {p.point_id: p for p in changed}
    return points


def _read(f: _File) -> bytes:
    """The file's bytes: a regular file of at most MAX_BYTES, opened without blocking (a
    FIFO would block the read forever, /dev/zero never end it)."""
    try:
        fd = os.open(f.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise f.fail("(file)", f"cannot be read ({getattr(exc, 'strerror', None) or exc})") \
            from None
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(fd)
        real = os.path.realpath(f.path)
        if not stat.S_ISREG(st.st_mode) or real.startswith(("/proc/", "/sys/", "/dev/")):
            raise f.fail("(file)", "not a regular file (a FIFO, a device or a folder?)")
        if st.st_size > MAX_BYTES:
            raise f.fail("(file)", f"{st.st_size:,} bytes; at most {MAX_BYTES:,}")
        data = file.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise f.fail("(file)", f"over {MAX_BYTES:,} bytes; at most {MAX_BYTES:,}")
    return data


def _check_numbers(f: _File, value: Any, key: str, depth: int) -> None:
    """Every number within what a machine can run (BOUNDS by key, else MAX_KNOB for an
    integer and MAX_FLOAT for a finite number), every table or list at most MAX_DEPTH deep."""
    if depth > MAX_DEPTH:
        raise f.fail(key or "(file)", f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_numbers(f, v, f"{key}.{k}" if key else str(k), depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_numbers(f, v, key, depth + 1)
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        low, high = BOUNDS.get(key.rsplit(".", 1)[-1], (-MAX_KNOB, MAX_KNOB))
        if not low <= value <= high:
            raise f.fail(key, f"{value:,} is outside [{low:,}, {high:,}], what one machine "
                              "can run")
    elif isinstance(value, float) and not (math.isfinite(value) and abs(value) <= MAX_FLOAT):
        raise f.fail(key, f"{value!r} is not a finite number within +-{MAX_FLOAT:g}")


def _grid(f: _File, suite: str, grid: dict, at: str, defaults: dict, room: int
          ) -> list[Point]:
    """The grid's points; SuiteFileError when they would be more than `room` (counted
    before any is made)."""
    f.keys({k: v for k, v in grid.items() if k not in OLD_SIZES}, GRID_KEYS, at)
    measure = f.typed(grid.get("measure", "layer"), str, f"{at}measure")
    if measure not in MEASURES:
        raise f.fail(f"{at}measure", f"unknown measure {measure!r}; valid: {', '.join(MEASURES)}")
    key, other = ("models", "mixers") if measure == "train" else ("mixers", "models")
    if other in grid:
        raise f.fail(f"{at}{other}", f"measure {measure!r} takes {key}, not {other}")
    if key not in grid:
        raise f.fail(f"{at}{key}", f"missing; measure {measure!r} needs {key}")
    valid = models.names() if key == "models" else models.mixer_kinds()
    subjects = f.axis(grid[key], str, f"{at}{key}")
    for s in subjects:
        if s not in valid:
            raise f.fail(f"{at}{key}", f"unknown {key[:-1]} {s!r}; valid: {', '.join(valid)}"
                         f"; {PLUGIN_HINT}")
    size = {}
    for old, k in OLD_SIZES.items():
        if k in grid and old in grid:
            raise f.fail(f"{at}{old}", f"the older spelling of {k}, also given; keep {k}")
        if k not in grid and old not in grid:
            raise f.fail(f"{at}{k}", "missing")
        given = k if k in grid else old
        size[k] = f.axis(grid[given], int, f"{at}{given}", 1)
    axes = dict(**size,
                seed=f.axis(grid.get("seeds", 0), int, f"{at}seeds", 0),
                dtype=f.axis(grid.get("dtype", "float32"), str, f"{at}dtype"))
    for dt in axes["dtype"]:
        if dt not in DTYPES:
            raise f.fail(f"{at}dtype", f"unknown dtype {dt!r}; valid: {', '.join(DTYPES)}")
    fit = f.typed(grid.get("fit", ""), str, f"{at}fit")
    options = _options(f, grid, measure, at)
    if isinstance(options, CompareOptions) and options.versus == "torch":
        for s in subjects:  # "timer" works for any mixer; "torch" needs PyTorch's own layer
            if s not in REFERENCE_KINDS:
                raise f.fail(f"{at}mixers", f"{s!r} has no PyTorch reference for versus = "
                                            f"\"torch\"; valid: {', '.join(REFERENCE_KINDS)} "
                                            "(or versus = \"timer\")")
    own = f.typed(grid.get("config", {}), dict, f"{at}config")
    knobs = {s: {k: _knob(f, v, f"{at}config.{k}")
                 for k, v in (dict(defaults.get(s, {})) | own).items()} for s in subjects}
    count = math.prod(len(v) for v in axes.values()) * sum(
        math.prod(len(v) for v in knobs[s].values()) for s in subjects)
    if count > room:
        raise f.fail(at.rstrip("."), f"{count:,} points (the product of its lists' lengths); "
                     f"a suite file declares at most {MAX_POINTS:,} in all")
    out = []
    for subject in subjects:
        knob_axes = knobs[subject]
        for cfg in product(**knob_axes):
            _check_config(f, measure, subject, cfg, axes["d_model"],
                          f"{at}config" if own else f"config.{subject}")
            out += [Point(suite, measure, subject, p["seq_len"], p["d_model"], p["batch_size"],
                          p["dtype"], p["seed"], config(cfg), options, fit=fit)
                    for p in product(**axes)]
    return out


def _knob(f: _File, value: Any, key: str) -> list[Any]:
    """A config value: a scalar, or a non-empty list of scalars (one more grid axis)."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise f.fail(key, "empty list; give at least one value")
    for v in values:
        if isinstance(v, (dict, list)):
            raise f.fail(key, f"{v!r} is not a string, number or true/false")
    return values


def _check_config(f: _File, measure: str, subject: str, cfg: dict, widths: list[int],
                  key: str) -> None:
    """Unknown knobs and bad values now, not as error rows later: a mixer is built at each
    width on the meta device (shapes only, nothing allocated), which also runs a plugin's own
    checks; a model's config is checked (its sizes come from the task at run time)."""
    try:
        if measure == "train":
            models.model_config(subject, **cfg)
            return
        with torch.device("meta"):
            for d in widths:
                models.mixer(subject, d, **cfg)
    except (ValueError, TypeError) as exc:
        raise f.fail(key, str(exc)) from None


def _options(f: _File, grid: dict, measure: str, at: str) -> Any:
    """The runner's typed options from the grid's measure-specific keys."""
    extra = {"path": ("dilation_growth",), "compare": ("versus",), "train": ("train",)}
    for k in ("dilation_growth", "versus", "train"):
        if k in grid and k not in extra.get(measure, ()):
            raise f.fail(f"{at}{k}", f"not a key of measure {measure!r}")
    if measure == "path":
        return PathOptions(f.typed(grid.get("dilation_growth", False), bool,
                                   f"{at}dilation_growth"))
    if measure == "compare":
        versus = f.typed(grid.get("versus", "torch"), str, f"{at}versus")
        if versus not in ("torch", "timer"):
            raise f.fail(f"{at}versus", f"unknown {versus!r}; valid: torch, timer")
        return CompareOptions(versus=versus)
    if measure == "train":
        return _train_options(f, f.typed(grid.get("train", {}), dict, f"{at}train"),
                              f"{at}train.")
    return None


def _train_options(f: _File, table: dict, at: str) -> TrainOptions:
    f.keys(table, tuple(TRAIN_KEYS), at)
    for k, kind in TRAIN_KEYS.items():
        if k in table:
            f.typed(table[k], kind, f"{at}{k}")
    if "task" not in table:
        raise f.fail(f"{at}task", "missing; name a task (copy, reverse, sort, mqar, ...)")
    task = TaskSpec(table["task"], table.get("alphabet_size"), table.get("framing", "lm"),
                    config(table.get("keywords")))
    settings = {k: v for k, v in table.items()
                if k not in ("task", "alphabet_size", "framing", "keywords", "match")}
    match = Match(table["match"]) if "match" in table else None
    return TrainOptions(task, match=match, **settings)
