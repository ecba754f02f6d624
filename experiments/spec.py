"""Typed point specs and the product-grid helper every suite uses.

A point is one measurement: the runner that measures it (a key of harness.run.runner_table.RUNNERS),
its subject (a mixer kind for layer-level runners, a models.names() entry for training
runners), its sizes, the model config handed to models.mixer / models.build unchanged, and
the runner's own typed options. Its results row, its config_key (every field that differs from
its default, as one string) and its short point_id (with the config_key's digest) derive from
these fields; to_config and from_config write and read the point as plain JSON data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Config = tuple[tuple[str, Any], ...]  # sorted (key, value) pairs: hashable, stable order

# subject: a mixer kind
LAYER_RUNNERS = ("layer", "compare", "fwdbwd", "seq-ops", "path", "threads", "identities")
# Runners that cast the layer to Point.dtype and honour Point.compile; `tvr run
# --dtype/--compile` changes only their points.
CAST_RUNNERS = ("layer", "compare", "fwdbwd")
MODEL_RUNNERS = ("train", "attn-init", "layer-grads", "grad-distance",  # subject is a model
                 "translate", "source-copy", "constant", "retrieval")


def config(values: Mapping[str, Any] | None = None) -> Config:
    return tuple(sorted((values or {}).items()))


def _changed(options: object) -> dict[str, Any]:
    """The fields of an options dataclass that differ from their defaults, in field order."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)  # type: ignore[arg-type]
            if getattr(options, f.name) != f.default}


@dataclass(frozen=True)
class CompareOptions:
    """Ours against a reference, timed interleaved (runner "compare", `tvr bench`)."""

    versus: str = "torch"  # "torch": PyTorch's own layer; "timer": a bare benchmark.Timer
    reps: int = 5  # interleaved repetitions
    peak_n: int | None = None  # edge of the peak-rate matmul; None: the device's default

    def columns(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True)
class PathOptions:
    """How Table 1's path-length search stacks layers (runner "path")."""

    dilation_growth: bool = False  # stacked layer i gets dilation k^i: the O(log_k n) stack

    def columns(self) -> dict[str, Any]:
        return _changed(self)


@dataclass(frozen=True)
class ThreadOptions:
    """How many CPU threads a layer point runs on (runner "threads")."""

    threads: int = 1

    def columns(self) -> dict[str, Any]:
        return {"threads_used": self.threads}


@dataclass(frozen=True)
class TaskSpec:
    """A task of harness.train.tasks: its name, data alphabet, framing and keywords."""

    name: str
    alphabet_size: int | None = None  # symbols in the task's data; None for a text corpus
    framing: str = "lm"  # "lm" (one stream) or "seq2seq" (source, then target)
    keywords: Config = ()  # mqar n_queries, distance-k k, corpus path and val_fraction

    def columns(self) -> dict[str, Any]:
        out = {"task": self.name} | _changed(self)
        del out["name"]
        return {**{k: v for k, v in out.items() if k != "keywords"}, **dict(self.keywords)}


@dataclass(frozen=True)
class Match:
    """Parameter matching: the point's d_model becomes the width at which its model has the
    parameter count of `model` built with `config` at the point's d_model (resolved at run
    time, so declaring a suite builds nothing)."""

    model: str
    config: Config = ()

    def columns(self) -> dict[str, Any]:
        return {"match": self.model, **{f"match_{k}": v for k, v in self.config}}


@dataclass(frozen=True)
class TrainOptions:
    """Training-type runners: the task, the loop's settings, what to evaluate. A None means
    the training loop's default (harness.train.loop.TrainConfig)."""

    task: TaskSpec
    steps: int = 0  # optimizer updates at most; 0: an init-time probe, no training
    lr: float | None = None
    schedule: str | None = None
    warmup: int | None = None
    clip: float | None = None
    eval_every: int | None = None
    eval_batches: int | None = None
    target: float | None = None  # early stop at this held-out token accuracy
    length_gen: bool = False  # evaluate at 2n and 4n too
    match: Match | None = None

    def columns(self) -> dict[str, Any]:
        out = _changed(self)
        out.pop("task")
        match = out.pop("match", None)
        return {**self.task.columns(), **out, **(match.columns() if match else {})}


# The curve metrics translation's patience may watch, the default first (greedy dev BLEU on
# the curve's verses; dev perplexity, lower is better: harness.train.translation.train's
# LOWER_IS_BETTER); the report names them in words (harness.report.claim_convergence), and a
# test ties the three
STOP_ON = ("dev_bleu_greedy", "dev_ppl")


@dataclass(frozen=True)
class TranslateOptions:
    """Translation points (runners "translate" and the baselines "source-copy", "constant",
    "retrieval"): the corpus, the vocabulary,
    the recipe and the decoding. Point.seq_len is unused by them (sentences keep their own
    lengths); Point.batch_size is sentence pairs per update."""

    steps: int = 0  # optimizer updates (0 for the source-copy baseline)
    reverse: bool = False  # the corpus's reverse direction (Bible: English -> Chichewa)
    bitext: tuple[str, ...] = ()  # a user's bilingual corpus: one TSV or two line-aligned files
    bpe: int = 4000  # shared BPE vocabulary size
    max_tokens: int = 64  # training pairs longer than this (subwords, either side) left out
    source_eos: bool = False  # every source ends in EOS, as fairseq and JoeyNMT feed it
    peak_lr: float = 1e-3  # the inverse-square-root schedule is scaled to peak here
    warmup: float = 0.04  # warm-up as a fraction of steps (the paper: 4000 of 100k)
    warmup_steps: int = 0  # warm-up in updates, whatever the run's length; 0: `warmup`
    batch_tokens: int = 0  # padded subwords per batch (the longer side); 0: batch_size pairs
    budget_flops: float = 0.0  # training stops once its counted FLOPs reach this; 0: none
    eval_flops: float = 0.0  # a dev curve point every this many training FLOPs (batches of
    # tokens vary in cost); 0: every eval_every updates
    label_smoothing: float = 0.1
    clip: float | None = None  # max global gradient norm; None: no clipping (the paper had none)
    eval_every: int = 500  # steps between dev BLEU curve points (greedy, eval_sentences)
    eval_sentences: int = 200  # the first dev sentences decoded for the curve
    final_sentences: int = 0  # dev/test sentences beam-decoded at the end; 0: all
    eval_max_words: int = 0  # dev/test pairs of at most this many words a side; 0: all
    beam: int = 4
    alpha: float = 0.6  # length penalty
    alphas: tuple[float, ...] = ()  # a grid: the alpha with the best dev BLEU decodes dev and test
    target_bleu: float = 0.0  # FLOPs and seconds to reach this dev BLEU (curve); 0: none
    target_from: str = ""  # "retrieval": the target is that baseline's BLEU on the curve's verses
    speed_sentences: int = 16  # test sentences decoded with and without the cache, timed
    patience: int = 0  # early stopping: curve evaluations without a new best; 0: off
    stop_on: str = "dev_bleu_greedy"  # what patience watches (STOP_ON): greedy dev BLEU on
    # the curve's verses, or "dev_ppl", dev perplexity (fairseq's and JoeyNMT's default); the
    # model keeps the weights of its best
    score_test: bool = True  # beam-decode and score the test set too (a dev sweep: no)
    recipe: str = ""  # a tuning search (`tvr tune`): the recipe of its best trial
    recipe_keeps: tuple[str, ...] = ()  # keys the point sets itself, which the recipe leaves
    # as they are (a Table 3 variation's own knob, the rest of the recipe applied)
    match: Match | None = None

    def __post_init__(self) -> None:
        if self.stop_on not in STOP_ON:  # a rule on a metric never logged would stop at once
            raise ValueError(f"stop_on {self.stop_on!r}: one of {', '.join(STOP_ON)}")

    def columns(self) -> dict[str, Any]:
        out = _changed(self)
        match = out.pop("match", None)
        for key in ("bitext", "recipe_keeps", "alphas"):
            if key in out:
                out[key] = ";".join(map(str, out[key]))
        return {**out, **(match.columns() if match else {})}


Options = CompareOptions | PathOptions | ThreadOptions | TrainOptions | TranslateOptions | None


@dataclass(frozen=True)
class Point:
    """One measurement (see the module docstring)."""

    suite: str
    runner: str
    subject: str  # mixer kind (LAYER_RUNNERS) or model name (MODEL_RUNNERS)
    seq_len: int
    d_model: int
    batch_size: int
    dtype: str = "float32"
    seed: int = 0
    config: Config = field(default=())  # models.mixer / models.build keywords, unchanged
    options: Options = None
    compile: bool = False  # time torch.compile'd modules (`tvr run --compile`)
    fit: str = ""  # Table 1: the fit or group this point belongs to ("n", "d", "path", ...)
    study: str = ""  # the ablation study this point belongs to ("heads", "positional", ...)

    @property
    def config_key(self) -> str:
        """The configuration as one canonical string, every field and option that differs
        from its default (`table2-translate-lstm-attention-alphas=0.0;0.2-...-n0-d128-b64-
        float32-s0`): what tells two points apart. It was the point id until ids were
        shortened, so it is what rows, curves and checkpoints of older runs are keyed by."""
        values = "".join(f"-{k}={v}" for k, v in sorted(self.columns().items()))
        compiled = "-compiled" if self.compile else ""
        group = f"{self.fit or self.study}-" if self.fit or self.study else ""
        return (f"{group}{self.runner}-{self.subject}{values}-n{self.seq_len}"
                f"-d{self.d_model}-b{self.batch_size}-{self.dtype}-s{self.seed}{compiled}")

    @property
    def digest(self) -> str:
        """The first 12 hex digits of the config_key's SHA-256: it names the point's files
        (checkpoints, hypotheses), whose names a config_key would push past 255 bytes."""
        return hashlib.sha256(self.config_key.encode()).hexdigest()[:12]

    @property
    def point_id(self) -> str:
        """A short, readable and deterministic name, so reruns and resume find the same
        point: `table2-translate-lstm-attention-s0-a580b4a79e9e`, its group, runner, subject
        (with the mixer kind of a model built around one: `mixer-lm-gru`) and seed, then the
        digest of its whole configuration (short_id(config_key) alike)."""
        compiled = "-compiled" if self.compile else ""
        group = f"{self.fit or self.study}-" if self.fit or self.study else ""
        kind = dict(self.config).get(KIND_KEY)
        subject = f"{self.subject}-{kind}" if kind else self.subject
        return f"{group}{self.runner}-{subject}-s{self.seed}{compiled}-{self.digest}"

    def to_config(self) -> dict[str, Any]:
        """Every field as plain JSON data, options typed by class name (`"type":
        "TranslateOptions"`) and configs as objects: what `from_config` rebuilds the point
        from (a row's resolved configuration, <suite>/configs/<point_id>.json)."""
        return {"point_id": self.point_id, "config_key": self.config_key, **_plain(self)}

    @classmethod
    def from_config(cls, data: Mapping[str, Any]) -> Point:
        """The point `to_config` wrote (its other keys, such as point_id, are ignored)."""
        return _typed(cls, data)

    def columns(self) -> dict[str, Any]:
        """The model config and the options, as the results row's extra columns."""
        opts = self.options.columns() if self.options is not None else {}
        return {**dict(self.config), **opts}

    def fields(self) -> dict[str, Any]:
        """The row's identifying columns: mixer or model by runner kind."""
        model = self.runner in MODEL_RUNNERS
        return {"suite": self.suite, "runner": self.runner,
                "mixer": "" if model else self.subject, "model": self.subject if model else "",
                "seq_len": self.seq_len, "d_model": self.d_model, "batch_size": self.batch_size,
                "dtype": self.dtype, "seed": self.seed, "compile": self.compile,
                "fit": self.fit, "study": self.study}


# A config_key's end, `-n<seq_len>-d<d_model>-b<batch_size>-<dtype>-s<seed>[-compiled]`, and
# its first listed value (`-n_heads=`): the group, runner and subject come before it
_KEY_TAIL = re.compile(r"(?P<head>.*)-n\d+-d\d+-b\d+-\w+-s(?P<seed>\d+)(?P<compiled>-compiled)?")
_LISTED = re.compile(r"-[A-Za-z_]\w*=")
KIND_KEY = "mixer_kind"  # a model built around a mixer (mixer-lm): its kind named in the id


def short_id(config_key: str) -> str | None:
    """The point id of the point whose config_key is `config_key`, from the text alone (a
    point id of older runs was its config_key): the head (group, runner, subject), the seed
    and the digest, as Point.point_id makes them; None for a text not of that form (a
    short id already, another tool's id)."""
    found = _KEY_TAIL.fullmatch(config_key)
    if found is None:
        return None
    head, *listed = _LISTED.split(found["head"])
    keys = _LISTED.findall(found["head"])
    kinds = [v for k, v in zip(keys, listed, strict=True) if k == f"-{KIND_KEY}="]
    head += f"-{kinds[0]}" if kinds else ""
    digest = hashlib.sha256(config_key.encode()).hexdigest()[:12]
    return f"{head}-s{found['seed']}{found['compiled'] or ''}-{digest}"


_CONFIGS = ("config", "keywords")  # Config fields: JSON objects in a point's configuration


def _plain(value: Any) -> Any:
    """A dataclass's fields as plain JSON data (Point.to_config): a nested options object
    with its class name, a Config as an object, a tuple as a list."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if not dataclasses.is_dataclass(value):
        return value
    out = {} if isinstance(value, Point) else {"type": type(value).__name__}
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        out[f.name] = {k: _plain(x) for k, x in v} if f.name in _CONFIGS else _plain(v)
    return out


def _typed(cls: type, data: Mapping[str, Any]) -> Any:
    """`cls` from what _plain made of one (a field it lacks takes its default)."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            v = data[f.name]
            values[f.name] = tuple((k, _thawed(x)) for k, x in v.items()) \
                if f.name in _CONFIGS else _thawed(v)
    return cls(**values)


def _thawed(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_thawed(v) for v in value)
    if not isinstance(value, Mapping):
        return value
    kinds = {c.__name__: c for c in (CompareOptions, PathOptions, ThreadOptions, TaskSpec,
                                     Match, TrainOptions, TranslateOptions)}
    if value.get("type") not in kinds:
        raise ValueError(f"not a point's options: {value.get('type')!r} (one of "
                         f"{', '.join(kinds)})")
    return _typed(kinds[value["type"]], value)


def product(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """Every combination of the axes, in order: product(a=[1, 2], b="xy") -> 4 dicts."""
    keys = list(axes)
    return [dict(zip(keys, values, strict=True))
            for values in itertools.product(*(list(v) for v in axes.values()))]


def batch_for(seq_len: int, tokens: int, max_batch: int = 64) -> int:
    """A batch size keeping B * n near `tokens`, so every point has a similar memory footprint."""
    return max(1, min(max_batch, tokens // seq_len))


def powers_of_two(lo: int, hi: int) -> list[int]:
    return [2**k for k in range(lo.bit_length() - 1, hi.bit_length()) if lo <= 2**k <= hi]


# A search dimension: ("log", lo, hi) and ("float", lo, hi) for reals (log-uniform, uniform),
# ("int", lo, hi) and ("int-log", lo, hi) for integers, ("choice", (a, b, ...)) for a set.
Dimension = tuple[Any, ...]


@dataclass(frozen=True)
class Search:
    """A tuning search (`tvr tune NAME`): per model, a base point whose recipe the trials
    vary over `space` (each key a model config key or a TranslateOptions field), `trials`
    trials each; the trials are points of the suite NAME, so their rows, curves and
    checkpoints live in <out>/NAME/ like any suite's. Trials are pruned by successive
    halving on the best dev perplexity reached by FLOPs spent (rungs at budget / eta^k);
    the best finished trial per model is the recipe (harness.train.translation.recipe)."""

    name: str
    base: tuple[Point, ...]  # one per model
    space: Mapping[str, Mapping[str, Dimension]]  # model -> key -> dimension
    trials: int  # per model
    eta: int = 3  # successive halving's reduction factor
    rungs: int = 3  # the first rung at budget / eta^(rungs - 1)
    startup: int = 6  # random trials before the sampler models the space
    # per model, recipes known to work (values of its space), tried before the sampler's own
    # proposals, as Optuna's enqueue_trial: a search must not miss the best recipe known
    known: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
