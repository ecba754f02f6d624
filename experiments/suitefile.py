"""Suites declared in a TOML file (`tvr run --suite-file FILE.toml`): product grids of points,
checked whole before anything runs. A bad file raises SuiteFileError, one line naming the
file, the key and the allowed values. A grid declares points of any runner of
harness.run.runner_table (MEASURES) as a Python suite would.

    name = "linear-attention"             # the results folder: <out>/linear-attention/
    description = "..."                   # optional
    [config.self-attention]               # optional: config for every point of a subject
    n_heads = 4
    [[grid]]                              # one or more grids; each is a product of its lists
    measure = "layer"                     # a runner: layer, seq-ops, path, compare, fwdbwd,
                                          # scan-error, threads, identities, train, attn-init,
                                          # layer-grads, grad-distance, translate, source-copy,
                                          # constant, retrieval
    mixers = ["linear-attention", "lstm"] # layer-level measures; model measures take `models`
    seq_len = [256, 512]                  # sequence lengths (n)
    d_model = [32]                        # widths (d)
    batch_size = 2                        # a number or a list of numbers
    seeds = [0]                           # optional (default 0)
    dtype = "float32"                     # optional (default float32, model measures' only)
    fit = "n"                             # optional: the Table 1 group these points fill
    study = "table2"                      # optional: the study its rows belong to
    config = { form = ["parallel"] }      # optional: a list value is one more grid axis
    [set]                                 # optional: as `tvr run --set KEY=VALUE`, e.g.
    seed = 1                              # a size, an option or a config key of every point

A measure's options are the fields of its options dataclass (experiments/spec.py), typed from
them and bounded as `--set` bounds them; a list is one more grid axis for a scalar option and
the value of a tuple option (alphas, bitext, recipe_keeps):
    path: dilation_growth; compare: versus ("torch" | "timer"), reps, peak_n; threads:
      threads (grid keys)
    train, attn-init, layer-grads, grad-distance: [grid.train], TrainOptions' fields and the
      task's: task (required), alphabet_size, framing, keywords = { k = 4 }
    translate, source-copy, constant, retrieval: [grid.translate], TranslateOptions' fields:
      steps, bpe, peak_lr, alphas = [0.6, 1.0], recipe = "<a `tvr tune` search>", ...
    [grid.match]: model = "transformer", config = { ... }: the points' width is the one at
      which their model has that model's parameter count (train and translate measures;
      `match = "MODEL"` in [grid.train] or [grid.translate] is short for a config-less one)
    translate takes no seq_len (sentences keep their own lengths); a baseline (source-copy,
      constant, retrieval) no models, sizes, seeds, dtype or config: its subject is itself.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import stat
import sys
import typing
from pathlib import Path
from typing import Any

import torch

import models
from experiments import suite_names
from experiments.overrides import Set, choices, limit
from experiments.spec import (
    MODEL_RUNNERS,
    CompareOptions,
    Match,
    PathOptions,
    Point,
    TaskSpec,
    ThreadOptions,
    TrainOptions,
    TranslateOptions,
    config,
    product,
)
from experiments.translation import BASELINES
from models.minrnn import MIN_RNN_KINDS
from models.plugins import PLUGIN_HINT
from models.reference import REFERENCE_KINDS

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

# Each measure (a runner of harness.run.runner_table, which experiments/ may not import) and
# its options' class; None: it takes none. tests/experiments/test_suitefile.py fails on a
# runner missing here.
OPTIONS: dict[str, type | None] = {
    "layer": None, "seq-ops": None, "path": PathOptions, "compare": CompareOptions,
    "fwdbwd": None, "scan-error": None, "threads": ThreadOptions, "identities": None,
    **dict.fromkeys(("train", "attn-init", "layer-grads", "grad-distance"), TrainOptions),
    **dict.fromkeys(("translate", *BASELINES), TranslateOptions)}
MEASURES = tuple(OPTIONS)
# Options given as a table of the grid ([grid.train], [grid.translate]); the other classes'
# fields are grid keys
TABLES: dict[type, str] = {TrainOptions: "train", TranslateOptions: "translate"}
SIZES = ("seq_len", "d_model", "batch_size")
# The sizes a measure's points take, the rest 0 as in the Python suites: a translation's
# sentences keep their own lengths, and a baseline trains no model.
TAKES_SIZES = {"translate": ("d_model", "batch_size"), **dict.fromkeys(BASELINES, ())}
DTYPES = ("float32", "bfloat16", "float16")
TOP_KEYS = ("name", "description", "config", "grid", "set")
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
          "alphabet_size": (2, 1 << 20), "batch_tokens": (0, 1 << 24),
          "budget_flops": (0, 10**24), "eval_flops": (0, 10**24)}
MAX_KNOB = 1 << 20  # any other integer (a config knob, a task keyword)
MAX_FLOAT = 1e6  # any other number that is not an integer (lr, clip, target, dropout, ...)
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
    elif isinstance(value, float):
        low, high = BOUNDS.get(key.rsplit(".", 1)[-1], (-MAX_FLOAT, MAX_FLOAT))
        if not (math.isfinite(value) and low <= value <= high):
            raise f.fail(key, f"{value!r} is not a finite number within [{low:g}, {high:g}]")


def grid_keys(measure: str) -> tuple[str, ...]:
    """The keys a [[grid]] of `measure` takes (its sizes also by their older names)."""
    cls = OPTIONS[measure]
    own = () if cls is None else (TABLES[cls],) if cls in TABLES else _names(cls)
    match = ("match",) if cls is not None and "match" in _names(cls) else ()
    if measure in BASELINES:  # the subject, sizes, seed and config are the runner's own
        return ("measure", "fit", "study", *own)
    subjects = "models" if measure in MODEL_RUNNERS else "mixers"
    return ("measure", subjects, *TAKES_SIZES.get(measure, SIZES), "seeds", "dtype", "fit",
            "study", "config", *own, *match)


def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _grid(f: _File, suite: str, grid: dict, at: str, defaults: dict, room: int
          ) -> list[Point]:
    """The grid's points; SuiteFileError when they would be more than `room` (counted
    before any is made)."""
    measure = f.typed(grid.get("measure", "layer"), str, f"{at}measure")
    if measure not in MEASURES:
        raise f.fail(f"{at}measure", f"unknown measure {measure!r}; valid: {', '.join(MEASURES)}")
    allowed = grid_keys(measure)
    for k in grid:
        if k not in allowed and OLD_SIZES.get(k) not in allowed:
            raise f.fail(f"{at}{k}", f"not a key of measure {measure!r}; valid: "
                                     f"{', '.join(allowed)}")
    subjects = [measure] if measure in BASELINES else _subjects(f, grid, measure, at)
    size = {}
    for old, k in OLD_SIZES.items():
        if k not in allowed:  # a size the measure does not take: 0, as its Python points
            size[k] = [0]
            continue
        if k in grid and old in grid:
            raise f.fail(f"{at}{old}", f"the older spelling of {k}, also given; keep {k}")
        if k not in grid and old not in grid:
            raise f.fail(f"{at}{k}", "missing")
        given = k if k in grid else old
        size[k] = f.axis(grid[given], int, f"{at}{given}", 1)
    axes = dict(**size,
                seed=f.axis(grid.get("seeds", 0), int, f"{at}seeds", 0),
                dtype=f.axis(grid.get("dtype", "float32"), str, f"{at}dtype"))
    # models are built in float32: the training and probe runners refuse another dtype, and
    # translation ignores it
    dtypes = ("float32",) if measure in MODEL_RUNNERS else DTYPES
    for dt in axes["dtype"]:
        if dt not in dtypes:
            raise f.fail(f"{at}dtype", f"unknown dtype {dt!r} for measure {measure!r}; valid: "
                                       f"{', '.join(dtypes)}")
    fit = f.typed(grid.get("fit", ""), str, f"{at}fit")
    study = f.typed(grid.get("study", ""), str, f"{at}study")
    cls = OPTIONS[measure]
    options = _option_axes(f, grid, cls, at) if cls is not None else {}
    if measure == "compare" and "torch" in options.get("versus", [CompareOptions.versus]):
        for s in subjects:  # "timer" works for any mixer; "torch" needs PyTorch's own layer
            if s not in REFERENCE_KINDS:
                raise f.fail(f"{at}mixers", f"{s!r} has no PyTorch reference for versus = "
                                            f"\"torch\"; valid: {', '.join(REFERENCE_KINDS)} "
                                            "(or versus = \"timer\")")
    own = f.typed(grid.get("config", {}), dict, f"{at}config")
    knobs = {s: {k: _knob(f, v, f"{at}config.{k}")
                 for k, v in (dict(defaults.get(s, {})) | own).items()} for s in subjects}
    count = math.prod(len(v) for v in [*axes.values(), *options.values()]) * sum(
        math.prod(len(v) for v in knobs[s].values()) for s in subjects)
    if count > room:
        raise f.fail(at.rstrip("."), f"{count:,} points (the product of its lists' lengths); "
                     f"a suite file declares at most {MAX_POINTS:,} in all")
    made = [_made(cls, o) for o in product(**options)] if cls is not None else [None]
    out = []
    for subject in subjects:
        for cfg in product(**knobs[subject]):
            if measure not in BASELINES:
                _check_config(f, measure, subject, cfg, axes["d_model"],
                              f"{at}config" if own else f"config.{subject}")
            out += [Point(suite, measure, subject, p["seq_len"], p["d_model"], p["batch_size"],
                          p["dtype"], p["seed"], config(cfg), o, fit=fit, study=study)
                    for p in product(**axes) for o in made]
    return out


def _subjects(f: _File, grid: dict, measure: str, at: str) -> list[str]:
    """The grid's mixers (layer-level measures) or models (model measures)."""
    key = "models" if measure in MODEL_RUNNERS else "mixers"
    if key not in grid:
        raise f.fail(f"{at}{key}", f"missing; measure {measure!r} needs {key}")
    every = models.names() if key == "models" else models.mixer_kinds()
    valid = list(MIN_RNN_KINDS) if measure == "scan-error" else every  # its runner's own
    subjects = f.axis(grid[key], str, f"{at}{key}")
    for s in subjects:
        if s not in valid:
            what = f"unknown {key[:-1]} {s!r}" if s not in every else \
                f"measure {measure!r} does not take {s!r}"
            raise f.fail(f"{at}{key}", f"{what}; valid: {', '.join(valid)}; {PLUGIN_HINT}")
    return subjects


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
        if measure in MODEL_RUNNERS:
            models.model_config(subject, **cfg)
            return
        with torch.device("meta"):
            for d in widths:
                models.mixer(subject, d, **cfg)
    except (ValueError, TypeError) as exc:
        raise f.fail(key, str(exc)) from None


def _fields(cls: type) -> dict[str, Any]:
    """The options a grid gives `cls` by, and their annotations: a training grid's task's
    among them, `task` its name."""
    hints = typing.get_type_hints(cls)
    out = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
    if cls is TrainOptions:
        task = _fields(TaskSpec)
        out = {"task": task.pop("name"), **task} | {k: v for k, v in out.items() if k != "task"}
    return out


def _option_axes(f: _File, grid: dict, cls: type, at: str) -> dict[str, list[Any]]:
    """Each option the grid gives -> its values (more than one: one more grid axis), read
    from [grid.train] or [grid.translate], or from the grid's own keys for the other
    classes; the match from [grid.match] or its short form, `match = "MODEL"`."""
    fields = _fields(cls)
    name = TABLES.get(cls)
    if name is not None:
        where = f"{at}{name}."
        table = f.typed(grid.get(name, {}), dict, f"{at}{name}")
        f.keys(table, tuple(fields), where)
    else:
        where, table = at, {k: v for k, v in grid.items() if k in fields}
    axes = {k: _values(f, k, fields[k], v, f"{where}{k}") for k, v in table.items()
            if k not in ("keywords", "match")}
    if "keywords" in table:
        axes["keywords"] = [config(f.typed(table["keywords"], dict, f"{where}keywords"))]
    if "match" in table and "match" in grid:
        raise f.fail(f"{at}match", f"also given as {where}match; keep one")
    if "match" in table:
        axes["match"] = [_match(f, table["match"], {}, f"{where}match", f"{where}match")]
    elif "match" in grid:
        match = f.typed(grid["match"], dict, f"{at}match")
        f.keys(match, _names(Match), f"{at}match.")
        if "model" not in match:
            raise f.fail(f"{at}match.model", "missing; name the model whose parameters to match")
        axes["match"] = [_match(f, match["model"], match.get("config", {}), f"{at}match.model",
                                f"{at}match.config")]
    if cls is TrainOptions and "task" not in table:
        raise f.fail(f"{where}task", "missing; name a task (copy, reverse, sort, mqar, ...)")
    return axes


def _values(f: _File, name: str, hint: Any, value: Any, key: str) -> list[Any]:
    """An option's values: of a tuple option (alphas) one, the list's items; of a scalar
    option the value, or each item of a list (one more grid axis)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:  # tuple[X, ...]
        return [tuple(_scalar(f, name, args[0], v, key) for v in f.typed(value, list, key))]
    values = value if isinstance(value, list) else [value]
    if not values:
        raise f.fail(key, "empty list; give at least one value")
    kind = args[0] if len(args) == 1 else hint  # `float | None`: a float (None: not given)
    return [_scalar(f, name, kind, v, key) for v in values]


def _scalar(f: _File, name: str, kind: Any, value: Any, key: str) -> Any:
    """`value` as an option of type `kind` (an integer where a float goes is that float, so
    ids match a Python suite's), within what `--set` allows it and its choices."""
    if kind not in (bool, int, float, str):
        raise f.fail(key, "not an option a suite file can set")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    value = f.typed(value, kind, key)
    allowed = limit(name, kind)
    if allowed is not None and not allowed.holds(value):
        raise f.fail(key, f"{value!r} is not {allowed.text(kind)}")
    valid = choices().get(name) if kind is str else None
    if valid is not None and value not in valid:
        raise f.fail(key, f"unknown {value!r}; valid: "
                     + ", ".join(c or '""' for c in valid))
    return value


def _match(f: _File, model: Any, cfg: Any, model_key: str, config_key: str) -> Match:
    """Parameter matching: the model whose parameter count the points' width matches, built
    with `cfg` (checked now, as a model config is)."""
    model = f.typed(model, str, model_key)
    if model not in models.names():
        raise f.fail(model_key, f"unknown model {model!r}; valid: {', '.join(models.names())}")
    cfg = f.typed(cfg, dict, config_key)
    try:
        models.model_config(model, **cfg)
    except (ValueError, TypeError) as exc:
        raise f.fail(config_key, str(exc)) from None
    return Match(model, config(cfg))


def _made(cls: type, values: dict[str, Any]) -> Any:
    """One options object from one combination of the grid's option values."""
    if cls is TrainOptions:
        task = {k: values.pop(k) for k in _names(TaskSpec)[1:] if k in values}
        return TrainOptions(TaskSpec(values.pop("task"), **task), **values)
    return cls(**values)
