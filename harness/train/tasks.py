"""Synthetic tasks, deterministic from a seed, with held-out evaluation sets.

Every task draws a raw problem (B, S) of data symbols and frames it (see harness.train.batch):
- copy / reverse / sort: answer = the input, reversed, or sorted (ascending token id).
  LM framing: `input SEP answer`, scored on the answer only.
- mqar (multi-query associative recall, Arora et al. 2023): `k1 v1 ... kP vP` with distinct
  keys from the first half of the alphabet and values from the second half, then queries
  (distinct keys, shuffled). seq2seq: src = pairs + queries, answer = their values. LM (the
  Zoology layout): pairs, then `q1 a1 q2 a2 ...`, scored where the next token is an answer.
  seq_len counts key-value pairs; `n_queries` (default: all keys) is a keyword.
- adding: the adding problem (Hochreiter & Schmidhuber 1997) made discrete so accuracy is
  exact: n digits in [0, V), two of them marked (one in each half; a marked digit d is the
  token of d in a second, "marked" copy of the alphabet), answer = one token, the sum of the
  two marked digits mod V. The model must find both marks across up to n steps and add;
  chance is 1/V. task.vocab_size is therefore N_SPECIAL + 2V.
- distance-k: a stream of n symbols; at every step t >= k the target is the symbol seen k
  steps earlier (`k` keyword, 1 <= k < n). LM: a causal model answers while reading, so the
  path from evidence to answer is exactly k; seq2seq: the decoder emits the delayed stream.

The `alphabet_size` argument is the size V of the data alphabet; `task.vocab_size` adds the
special tokens (and the marked digits for adding) and is what the model must be built with.

Held-out evaluation, by construction: a fixed hash of each raw problem puts 1/16 of the
problem space in a held-out region; training batches reject it and evaluation batches draw
only from it, from a different seed stream. Evaluation at another length (seq_len=2n, 4n)
is held out trivially, since training never produces that length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from harness.train.batch import (
    FRAMINGS,
    N_SPECIAL,
    Batch,
    Task,
    aligned_batch,
    check_int,
    seed_generator,
    stream_batch,
    suffix_batch,
)
from harness.train.corpus import CORPUS_KEYWORDS, corpus_task

_TRAIN, _EVAL = 0, 1  # seed-stream ids: the two generators never share a state
_HASH_SEED = 0x5EED  # fixed across task seeds so the held-out region is one region
_HASH_MOD, _HASH_HELD = 65521, 65521 // 16  # prime modulus; ~1/16 of problems held out
_MAX_DRAWS = 1000  # bound on rejection rounds: a tiny problem space fails loudly, not forever


def _symbols(gen: torch.Generator, batch: int, n: int, v: int) -> torch.Tensor:
    return torch.randint(N_SPECIAL, N_SPECIAL + v, (batch, n), generator=gen)


def held_out(raw: torch.Tensor) -> torch.Tensor:
    """(B, S) -> (B,) bool: whether each raw problem lies in the held-out region."""
    weights = torch.randint(1, 2**20, (raw.size(1),),
                            generator=torch.Generator().manual_seed(_HASH_SEED))
    h = (raw * weights).sum(-1)  # < S * 2^20 * vocab: far from int64 overflow
    return h % _HASH_MOD < _HASH_HELD


# Answers as pure functions of the raw problem, so tests can check them by hand.

def copy_answers(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def reverse_answers(x: torch.Tensor) -> torch.Tensor:
    return x.flip(-1)


def sort_answers(x: torch.Tensor) -> torch.Tensor:
    return x.sort(dim=-1).values


def mqar_answers(raw: torch.Tensor, n_pairs: int) -> torch.Tensor:
    """raw = k1 v1 ... kP vP q1 ... qQ -> the value stored under each query (B, Q)."""
    keys, values = raw[:, 0:2 * n_pairs:2], raw[:, 1:2 * n_pairs:2]  # (B, P)
    queries = raw[:, 2 * n_pairs:]  # (B, Q)
    hit = queries[:, :, None] == keys[:, None, :]  # (B, Q, P), one True per row: keys distinct
    return (hit * values[:, None, :]).sum(-1)


def adding_answers(raw: torch.Tensor, v: int) -> torch.Tensor:
    """(B, n) digits, marked ones shifted by v -> (B, 1): sum of marked digits mod v."""
    marked = raw >= N_SPECIAL + v
    digits = (raw - N_SPECIAL) % v
    return ((digits * marked).sum(-1, keepdim=True) % v) + N_SPECIAL


def distance_k_targets(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, n) -> targets (B, n) with targets[:, t] = x[:, t - k], and mask t >= k."""
    targets = torch.zeros_like(x)
    targets[:, k:] = x[:, :-k]
    mask = torch.zeros_like(x, dtype=torch.bool)
    mask[:, k:] = True
    return targets, mask


# Task specs: how to draw a raw problem of size n and how to frame it.

class _Spec(Protocol):
    def extra_vocab(self, v: int) -> int: ...  # token ids the data needs for alphabet size v

    def check(self, n: int, v: int) -> None: ...  # ValueError if (n, v) is not a valid size

    def sample(self, gen: torch.Generator, batch: int, n: int, v: int) -> torch.Tensor: ...

    def frame(self, raw: torch.Tensor, n: int, framing: str, v: int) -> Batch: ...


@dataclass(frozen=True)
class _Sequence:
    """copy / reverse / sort: n symbols in, a transformed n symbols out."""

    answers: Callable[[torch.Tensor], torch.Tensor]

    def extra_vocab(self, v: int) -> int:
        return v

    def check(self, n: int, v: int) -> None:
        check_int("seq_len", n, 1)
        check_int("alphabet_size", v, 2)

    def sample(self, gen: torch.Generator, batch: int, n: int, v: int) -> torch.Tensor:
        return _symbols(gen, batch, n, v)

    def frame(self, raw: torch.Tensor, n: int, framing: str, v: int) -> Batch:
        return suffix_batch(raw, self.answers(raw), framing)


@dataclass(frozen=True)
class _MQAR:
    n_queries: int | None = None  # None: query every key once, in random order

    def extra_vocab(self, v: int) -> int:
        return v

    def _queries(self, n: int) -> int:
        return n if self.n_queries is None else self.n_queries

    def check(self, n: int, v: int) -> None:
        check_int("seq_len", n, 1, " (the number of key-value pairs)")
        check_int("alphabet_size", v, 2 * n, f": mqar with {n} pairs needs {n} distinct keys "
                   "in the first half of the alphabet")
        q = check_int("n_queries", self._queries(n), 1)
        if q > n:
            raise ValueError(f"invalid n_queries {q!r}; must be an integer in [1, {n}]")

    def sample(self, gen: torch.Generator, batch: int, n: int, v: int) -> torch.Tensor:
        half = v // 2
        keys = torch.rand(batch, half, generator=gen).argsort(-1)[:, :n] + N_SPECIAL
        values = torch.randint(N_SPECIAL + half, N_SPECIAL + v, (batch, n), generator=gen)
        order = torch.rand(batch, n, generator=gen).argsort(-1)[:, :self._queries(n)]
        pairs = torch.stack([keys, values], dim=-1).flatten(1)  # (B, 2P): k1 v1 k2 v2 ...
        return torch.cat([pairs, keys.gather(1, order)], dim=1)

    def frame(self, raw: torch.Tensor, n: int, framing: str, v: int) -> Batch:
        answers = mqar_answers(raw, n)  # n = number of pairs
        if framing == "seq2seq":
            return suffix_batch(raw, answers, framing)
        qa = torch.stack([raw[:, 2 * n:], answers], dim=-1).flatten(1)  # q1 a1 q2 a2 ...
        stream = torch.cat([raw[:, :2 * n], qa], dim=1)
        answer_mask = torch.zeros_like(stream, dtype=torch.bool)
        answer_mask[:, 2 * n + 1::2] = True
        return stream_batch(stream, answer_mask)


@dataclass(frozen=True)
class _Adding:
    def extra_vocab(self, v: int) -> int:
        return 2 * v  # digits and their marked copies

    def check(self, n: int, v: int) -> None:
        check_int("seq_len", n, 2, " (one mark in each half)")
        check_int("alphabet_size", v, 2)

    def sample(self, gen: torch.Generator, batch: int, n: int, v: int) -> torch.Tensor:
        raw = _symbols(gen, batch, n, v)
        first = torch.randint(0, n // 2, (batch, 1), generator=gen)
        second = torch.randint(n // 2, n, (batch, 1), generator=gen)
        marks = torch.zeros_like(raw, dtype=torch.bool)
        marks.scatter_(1, first, True).scatter_(1, second, True)
        return raw + v * marks

    def frame(self, raw: torch.Tensor, n: int, framing: str, v: int) -> Batch:
        return suffix_batch(raw, adding_answers(raw, v), framing)


@dataclass(frozen=True)
class _DistanceK:
    k: int = 1  # delay between seeing a symbol and having to output it

    def extra_vocab(self, v: int) -> int:
        return v

    def check(self, n: int, v: int) -> None:
        check_int("k", self.k, 1)
        check_int("seq_len", n, self.k + 1, f" (more than k={self.k})")
        check_int("alphabet_size", v, 2)

    def sample(self, gen: torch.Generator, batch: int, n: int, v: int) -> torch.Tensor:
        return _symbols(gen, batch, n, v)

    def frame(self, raw: torch.Tensor, n: int, framing: str, v: int) -> Batch:
        return aligned_batch(raw, *distance_k_targets(raw, self.k), framing)


# name -> (spec factory, the keywords it takes)
_SPECS: dict[str, tuple[Callable[..., _Spec], tuple[str, ...]]] = {
    "copy": (lambda: _Sequence(copy_answers), ()),
    "reverse": (lambda: _Sequence(reverse_answers), ()),
    "sort": (lambda: _Sequence(sort_answers), ()),
    "mqar": (_MQAR, ("n_queries",)),
    "adding": (_Adding, ()),
    "distance-k": (_DistanceK, ("k",)),
}
CORPUS_TASKS = ("corpus",)
# every keyword make_task() takes for some task (a TaskSpec.keywords passes these through)
TASK_KEYWORDS: tuple[str, ...] = (*dict.fromkeys(k for _, kws in _SPECS.values() for k in kws),
                                  *CORPUS_KEYWORDS)


def task_names() -> list[str]:
    """Every name make_task() accepts."""
    return [*_SPECS, *CORPUS_TASKS]


@dataclass(frozen=True)
class SyntheticTask:
    """A synthetic task bound to a size, framing and seed. Build with make_task()."""

    name: str
    seq_len: int  # training problem size n
    alphabet_size: int  # data alphabet size V (make_task's alphabet_size)
    framing: str
    seed: int
    spec: _Spec = field(repr=False)
    reports_bpc: bool = False  # synthetic tokens are not characters

    @property
    def vocab_size(self) -> int:
        """Token ids a batch can hold: specials + data symbols (+ marked digits)."""
        return N_SPECIAL + self.spec.extra_vocab(self.alphabet_size)

    def _draw(self, gen: torch.Generator, batch_size: int, n: int, want_held: bool) -> Batch:
        """Rejection-sample raw problems from the train or held-out region, then frame."""
        spec, chunk = self.spec, batch_size * (20 if want_held else 2)
        kept: list[torch.Tensor] = []
        have = 0
        for _ in range(_MAX_DRAWS):
            raw = spec.sample(gen, chunk, n, self.alphabet_size)
            raw = raw[held_out(raw) == want_held]
            kept.append(raw)
            have += raw.size(0)
            if have >= batch_size:
                raw = torch.cat(kept)[:batch_size]
                return spec.frame(raw, n, self.framing, self.alphabet_size)
        raise ValueError(f"{self.name} at seq_len={n}, alphabet_size={self.alphabet_size} has too "
                         "few distinct problems to hold out an evaluation set; make it larger")

    def train_batch(self, step: int, batch_size: int) -> Batch:
        """The training batch for `step`: a pure function of (seed, step, batch_size)."""
        check_int("step", step, 0)
        check_int("batch_size", batch_size, 1)
        return self._draw(seed_generator(self.seed, _TRAIN, step), batch_size, self.seq_len, False)

    def eval_batches(self, batch_size: int = 64, n_batches: int = 4,
                     seq_len: int | None = None) -> list[Batch]:
        """The fixed held-out set at `seq_len` (default: the training length; pass 2n, 4n
        for length generalisation). Same arguments -> same tensors."""
        n = self.seq_len if seq_len is None else seq_len
        self.spec.check(n, self.alphabet_size)
        check_int("batch_size", batch_size, 1)
        check_int("n_batches", n_batches, 1)
        return [self._draw(seed_generator(self.seed, _EVAL, n, i), batch_size, n, True)
                for i in range(n_batches)]


def make_task(name: str, seq_len: int, alphabet_size: int | None = None, framing: str = "lm",
              seed: int = 0, **kw: object) -> Task:
    """make_task("copy", 32, 16, "lm", seed=0) -> a Task (see harness.batch.Task).

    Keywords: mqar n_queries; distance-k k; corpus path (None = the KJV Bible) and
    val_fraction. For "corpus", alphabet_size must be None: the text fixes its alphabet.
    """
    if name not in task_names():
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(task_names())}")
    if framing not in FRAMINGS:
        raise ValueError(f"invalid framing {framing!r}; valid: {', '.join(FRAMINGS)}")
    check_int("seed", seed, 0)
    factory, keywords = _SPECS.get(name, (None, CORPUS_KEYWORDS))
    unknown = sorted(set(kw) - set(keywords))
    if unknown:
        raise ValueError(f"invalid keyword {unknown[0]!r} for task {name!r}; valid: "
                         f"{', '.join(keywords) or 'none'}")
    if factory is None:
        if alphabet_size is not None:
            raise ValueError(f"invalid alphabet_size {alphabet_size!r} for the corpus; pass None: "
                             "the text's characters are its vocabulary")
        return corpus_task(seq_len=seq_len, framing=framing, seed=seed, **kw)  # type: ignore[arg-type]
    if alphabet_size is None:
        raise ValueError(f"task {name!r} needs alphabet_size (the data alphabet size)")
    spec = factory(**kw)
    spec.check(seq_len, alphabet_size)
    return SyntheticTask(name, seq_len, alphabet_size, framing, seed, spec)
