"""Point overrides: what `tvr run --only/--dtype/--compile/--corpus/--bitext/--reverse/--set`
changes in a suite's points, as data. Each override is a frozen dataclass, a `Point -> Point`
change (None leaves the point out) that names the results-folder suffix it adds; `apply`
composes them in order. A run that changes what is measured is a variant of its suite,
named by the suffixes (`bfloat16-compiled`, `budget_flops-1.2e14-seed-0`); the harness keeps
its rows under the suite (`<out>/quick/variants/bfloat16-compiled/`), never among the
suite's own. `--only` measures a subset of the suite's own points: no suffix, no variant.

An override that can apply to no point of the suite, or a value that does not fit, raises
ValueError with one line (the CLI makes it bad input; a suite file names its file).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from experiments.spec import (
    CAST_RUNNERS,
    LAYER_RUNNERS,
    MODEL_RUNNERS,
    STOP_ON,
    Point,
    TrainOptions,
    TranslateOptions,
)


@dataclass(frozen=True)
class Only:
    """`--only NAME`: the points of these mixers or models (the same points: no suffix)."""

    names: tuple[str, ...]
    suffix = ""

    def check(self, points: list[Point], suite: str) -> None:
        names = sorted({p.subject for p in points})
        unknown = [o for o in self.names if o not in names]
        if unknown:
            raise ValueError(f"--only {unknown[0]}: suite {suite!r} has no such mixer or "
                             f"model; valid: {', '.join(names)}")

    def __call__(self, point: Point) -> Point | None:
        return point if point.subject in self.names else None


def _check_cast(points: list[Point], suite: str) -> None:
    if not any(p.runner in CAST_RUNNERS for p in points):
        raise ValueError(f"--dtype/--compile: suite {suite!r} has no point that honours them "
                         f"(only {', '.join(CAST_RUNNERS)} points do)")


@dataclass(frozen=True)
class DType:
    """`--dtype`: layer-level points cast to this dtype (training points keep theirs)."""

    dtype: str

    @property
    def suffix(self) -> str:
        return self.dtype

    def check(self, points: list[Point], suite: str) -> None:
        _check_cast(points, suite)

    def __call__(self, point: Point) -> Point:
        return replace(point, dtype=self.dtype) if point.runner in CAST_RUNNERS else point


@dataclass(frozen=True)
class Compiled:
    """`--compile`: layer-level points time torch.compile'd modules."""

    suffix = "compiled"

    def check(self, points: list[Point], suite: str) -> None:
        _check_cast(points, suite)

    def __call__(self, point: Point) -> Point:
        return replace(point, compile=True) if point.runner in CAST_RUNNERS else point


@dataclass(frozen=True)
class Corpus:
    """`--corpus PATH`: the corpus-task training points train on this text file."""

    path: str  # resolved, checked by the caller
    stem: str  # the file's name without its extension, naming the folder

    @property
    def suffix(self) -> str:
        return f"corpus-{self.stem}"

    def check(self, points: list[Point], suite: str) -> None:
        """Points without a corpus task are left as they are."""

    def __call__(self, point: Point) -> Point:
        opts = point.options
        if not isinstance(opts, TrainOptions) or opts.task.name != "corpus":
            return point
        keywords = tuple(sorted((dict(opts.task.keywords) | {"path": self.path}).items()))
        return replace(point, options=replace(opts, task=replace(opts.task, keywords=keywords)))


@dataclass(frozen=True)
class Bitext:
    """`--bitext PATH` (a user's bilingual corpus) and `--reverse`: the translation points'
    corpus and direction."""

    paths: tuple[str, ...]  # resolved and checked by the caller; () is the Bible
    reverse: bool
    name: str = ""  # the corpus's name (user_corpus), naming the folder

    @property
    def suffix(self) -> str:
        return f"bitext-{self.name}" if self.paths else "reverse"

    def check(self, points: list[Point], suite: str) -> None:
        if not any(isinstance(p.options, TranslateOptions) for p in points):
            raise ValueError("--bitext/--reverse: this suite has no translation point "
                             "(try translation-quick)")

    def __call__(self, point: Point) -> Point:
        if not isinstance(point.options, TranslateOptions):
            return point
        return replace(point, options=replace(point.options, bitext=self.paths,
                                              reverse=self.reverse))


SIZES = ("seq_len", "d_model", "batch_size", "seed")  # the Point fields --set may change
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a value that may name a folder


@dataclass(frozen=True)
class Range:
    """The values a setting may take, low..high, either end open: what one machine can run
    and what the setting means (a learning rate is positive, a fraction at most 1)."""

    low: float
    high: float
    open_low: bool = False  # low itself is refused: (0, 10] for a learning rate
    open_high: bool = False

    def holds(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):  # an int is exact, any size
            return False
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    def text(self, type_: type) -> str:
        """"an integer in [1, 10,000,000]", "a finite number in (0, 10]"."""
        def end(x: float) -> str:
            return f"{int(x):,}" if type_ is int else f"{x:g}"
        kind = "an integer" if type_ is int else "a finite number"
        return (f"{kind} in {'(' if self.open_low else '['}{end(self.low)}, "
                f"{end(self.high)}{')' if self.open_high else ']'}")


MAX_KNOB = 1 << 20  # any other integer setting (a config knob, a task keyword)
MAX_FLOAT = 1e6  # any other number that is not an integer (dropout, clip, ...)
# What --set (and a suite file's [set]) may give each setting: its meaning and what one
# machine can run. A key not named here takes the bounds of its type below; a key whose
# meaning depends on the options it belongs to (warm-up: updates of a training loop, a
# fraction of a translation run's steps) is named per type.
LIMITS: dict[str, Range | dict[type, Range]] = {
    "seq_len": Range(1, 1 << 20), "d_model": Range(1, 1 << 16),
    "batch_size": Range(1, 1 << 16), "seed": Range(0, (1 << 32) - 1),
    "steps": Range(1, 10**7),  # an update at least: 0 would be a probe or the loop's default
    "lr": Range(0, 10, open_low=True), "peak_lr": Range(0, 10, open_low=True),
    "warmup": {int: Range(0, 10**7), float: Range(0, 1)},
    "clip": Range(0, MAX_FLOAT, open_low=True), "target": Range(0, 1, open_low=True),
    "eval_every": Range(1, 10**7), "eval_batches": Range(1, 10**4),
    "bpe": Range(1, 1 << 20), "max_tokens": Range(1, 1 << 20),
    "warmup_steps": Range(0, 10**7), "batch_tokens": Range(0, 1 << 24),
    # a budget is one: 0 (the default's "none") is not a budget a user sets
    "budget_flops": Range(0, 1e24, open_low=True), "eval_flops": Range(0, 1e24),
    "label_smoothing": Range(0, 1, open_high=True), "dropout": Range(0, 1, open_high=True),
    "attn_dropout": Range(0, 1, open_high=True),
    "eval_sentences": Range(1, 1 << 20), "final_sentences": Range(0, 1 << 20),
    "eval_max_words": Range(0, 1 << 20), "speed_sentences": Range(0, 1 << 20),
    "beam": Range(1, 100), "alpha": Range(0, 10), "target_bleu": Range(0, 100),
    "patience": Range(0, 10**6), "reps": Range(1, 10**4), "peak_n": Range(1, 1 << 16),
    "threads": Range(1, 4096),
}
_BY_TYPE = {int: Range(-MAX_KNOB, MAX_KNOB), float: Range(-MAX_FLOAT, MAX_FLOAT)}


def choices() -> dict[str, tuple[str, ...]]:
    """The values a string setting may take ("": its default, none), for --set and a suite
    file alike: a value outside them would run, and measure nothing it names."""
    from experiments import SEARCHES  # the package imports this module: read on use

    return {"versus": ("torch", "timer"), "framing": ("lm", "seq2seq"),
            "target_from": ("", "retrieval"), "recipe": ("", *SEARCHES), "stop_on": STOP_ON}


def limit(key: str, type_: type) -> Range | None:
    """The range a numeric setting `key` of type `type_` must fall in (None: not a number)."""
    if type_ not in _BY_TYPE:
        return None
    known = LIMITS.get(key)
    if isinstance(known, dict):
        known = known.get(type_)
    return known or _BY_TYPE[type_]


@dataclass(frozen=True)
class Set:
    """`--set KEY=VALUE`: one setting of every point that has it: a size (seq_len, d_model,
    batch_size, seed), a field of the point's options (steps, lr, peak_lr, ...) or a key of
    its model config (n_heads, ...); the value is read as that setting's type."""

    key: str
    value: str
    option: str = "--set"  # what messages call it: a suite file's `[set]` says "set"
    shown: str = ""  # the value as the folder names it (named); "": as written

    @classmethod
    def parse(cls, text: str) -> Set:
        key, sep, value = text.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"--set {text}: write KEY=VALUE, e.g. --set steps=2000")
        if not _PLAIN.fullmatch(value.strip()):
            raise ValueError(f"--set {text}: the value must start with a letter or digit (no "
                             "sign: a size is positive) and hold only letters, digits and "
                             f". _ + - (it names the results folder), e.g. --set {key.strip()}=4")
        return cls(key.strip(), value.strip())

    @property
    def suffix(self) -> str:
        return f"{self.key}-{self.shown or self.value}"

    def named(self, points: list[Point]) -> Set:
        """This setting with its folder name written one way for its type (`0`, `0.0` and
        `0e0` are one dropout, so one folder: `--set dropout=0`), as the first point that
        has the key reads it; each point still reads the value as written, as its own type
        (4000 stays an int where a point takes one); a value the points cannot read is left
        for `check` to refuse."""
        kind = next(filter(None, (_kind(p, self.key) for p in points)), None)
        try:
            value = _read(self.key, self.value, kind[1]) if kind else None
        except ValueError:
            return self
        return self if value is None else replace(self, shown=_name(value))

    def check(self, points: list[Point], suite: str) -> None:
        if not any(_kind(p, self.key) for p in points):
            keys = sorted({k for p in points for k in settable(p)})
            raise ValueError(f"{self.option} {self.key}: no point of suite {suite!r} has that "
                             f"setting; valid: {', '.join(keys)}")
        for point in points:
            changed = self(point)  # a value that does not fit raises here, before any runs
            if (_kind(point, self.key) or ("",))[0] == "config":
                _check_config(point, changed, f"{self.option} {self.key}={self.value}")

    def __call__(self, point: Point) -> Point:
        kind = _kind(point, self.key)
        if kind is None:
            return point
        where, type_ = kind
        value = _read(f"{self.option} {self.key}", self.value, type_)
        allowed = limit(self.key, type_)
        if allowed is not None and not allowed.holds(value):
            raise ValueError(f"{self.option} {self.key}={self.value}: must be "
                             f"{allowed.text(type_)}")
        valid = choices().get(self.key) if type_ is str else None
        if valid is not None and value not in valid:
            raise ValueError(f"{self.option} {self.key}={self.value}: unknown value; valid: "
                             + ", ".join(c for c in valid if c))  # "": leave it unset
        if where == "point":
            return replace(point, **{self.key: value})
        if where == "options":
            return replace(point, options=replace(point.options, **{self.key: value}))
        return replace(point, config=tuple(sorted((dict(point.config) | {self.key: value})
                                                  .items())))


def settable(point: Point) -> dict[str, tuple[str, type]]:
    """What --set may change in `point`: key -> (where: point, options or config; type)."""
    keys: dict[str, tuple[str, type]] = {k: ("point", int) for k in SIZES}
    if point.options is not None:
        hints = typing.get_type_hints(type(point.options))
        for f in dataclasses.fields(point.options):
            type_ = _scalar(hints[f.name])
            if type_ is not None:
                keys[f.name] = ("options", type_)
    for key, value in point.config:
        if isinstance(value, (bool, int, float, str)):
            keys[key] = ("config", type(value))
    for key, type_ in _config_fields(point).items():
        keys.setdefault(key, ("config", type_))  # a size or option of that name comes first
    return keys


def _check_config(point: Point, changed: Point, what: str) -> None:
    """ValueError naming `what` when the model or mixer config refuses the changed point's
    values (init=kaiming), as its runner would; a point whose config the registry does not
    take on its own (a baseline, keys its runner fills in) is left to its runner."""
    from models import registry

    kind = _config_kind(point)
    if kind is None or registry.config_class(point.subject, kind) is None:
        return
    check = registry.model_config if kind == "model" else registry.mixer_config
    try:
        check(point.subject, **dict(point.config))
    except ValueError:
        return
    try:
        check(changed.subject, **dict(changed.config))
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _config_kind(point: Point) -> str | None:
    return "model" if point.runner in MODEL_RUNNERS else \
        "mixer" if point.runner in LAYER_RUNNERS else None


def _config_fields(point: Point) -> dict[str, type]:
    """The scalar keys of the point's model or mixer config that it leaves at their
    defaults (a Transformer's attn_dropout), but vocab_size, which the runner sets."""
    from models import registry

    kind = _config_kind(point)
    cls = registry.config_class(point.subject, kind) if kind else None
    if cls is None:
        return {}
    hints = typing.get_type_hints(cls)
    return {f.name: t for f in dataclasses.fields(cls)
            if f.name != "vocab_size" and (t := _scalar(hints[f.name])) is not None}


def _kind(point: Point, key: str) -> tuple[str, type] | None:
    return settable(point).get(key)


def _scalar(hint: Any) -> type | None:
    """int, float, bool or str from a field's annotation (`float | None` is float); None
    for anything else (a task, a match, a tuple of paths)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    if len(args) == 1 and args[0] in (bool, int, float, str):
        return args[0]
    return None


def _read(key: str, text: str, type_: type) -> Any:
    """`text` as a value of `type_`; ValueError naming `key` ("--set steps") and the value
    when it is not one."""
    if type_ is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"{key}={text}: not true or false")
    if type_ is str:
        return text
    try:
        return type_(text)
    except ValueError:
        kind = "an integer" if type_ is int else "a number"
        raise ValueError(f"{key}={text}: not {kind}") from None


def _name(value: Any) -> str:
    """A setting's value as a folder names it: true/false, an integer's digits, a number in
    the shorter of its positional and scientific forms, positional on a tie, both from its
    shortest round-trip digits (0.05914, 1.2e14, 1e-3, 0)."""
    if isinstance(value, bool):
        return str(value).lower()
    if not isinstance(value, float) or not math.isfinite(value):
        return str(value)
    digits = decimal.Decimal(repr(value)).normalize()
    scientific = re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", format(digits, "e"))
    positional = format(digits, "f")
    return scientific if len(scientific) < len(positional) else positional


Override = Only | DType | Compiled | Corpus | Bitext | Set


def apply(points: list[Point], overrides: Iterable[Override], suite: str
          ) -> tuple[list[Point], str]:
    """The points with every override applied in turn (each checked against the points the
    previous ones left), and the variant's name: each suffix in order, joined by "-" (""
    when no override names one: the suite's own points). Points an override made identical
    (`--set seq_len=64` on a grid over n) are kept once."""
    name: list[str] = []
    for override in overrides:
        override.check(points, suite)
        override = override.named(points) if isinstance(override, Set) else override
        changed = (override(p) for p in points)
        points = [p for p in changed if p is not None]
        name += [override.suffix] if override.suffix else []
    once = {p.point_id: p for p in reversed(points)}  # the first of equal points wins
    return [p for p in points if once.get(p.point_id) is p], "-".join(name)
