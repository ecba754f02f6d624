"""The sentence-level significance tests of BLEU and chrF that Table 2's and Table 3's claims
and the toolkit gap read, and the cache that keeps their p-values between passes.

- `sentence_tests` and `against`: sacrebleu's paired bootstrap and approximate randomization
  of one or several systems against a baseline, SAMPLES resamples with a fixed seed;
- `clustered_tests`: the same two tests with each model's seeds kept together per sentence
  (harness.report.clustered), CLUSTERED_SAMPLES resamples; `versus_transformer` runs them
  for each model of a suite against its Transformer;
- `saved_lines`, `seed_lines`: a suite's saved hypotheses and references, the tests' input.

Both kinds are kept in the user's cache (`sentence_cache`) under the hash of everything they
depend on: the hypotheses, the references, the resamples, the seed, the metric options and
sacrebleu's version.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from harness.files import locked, read_lines, user_cache, write_atomic
from harness.report import clustered
from harness.report.evidence import Missing, Stored
from harness.report.gates import Test

# Resamples of each sentence-level test: sacrebleu's bootstrap default. Its smallest p,
# 1/1001, is 50x below ALPHA; 10,000 made one ledger pass take about 3 minutes on 2 cores
# (4 model pairs of 6,843 sentences, BLEU and chrF, bootstrap and randomization).
SAMPLES = 1_000
SEED = "12345"  # sacrebleu's RNG seed (SACREBLEU_SEED), fixed: the same verdict every time
# Table 2's tests keep a model's seeds together per sentence (harness.report.clustered); a
# resample costs a few matrix rows, so the p-values resolve to 1e-4
CLUSTERED_SAMPLES = 10_000
CACHE_ENV = "TVR_SENTENCE_CACHE"
OPTIONS: dict[str, dict] = {"BLEU": {}, "chrF": {}}  # sacrebleu's defaults (13a; chrF6, beta 2)

T = TypeVar("T")


@contextmanager
def _fixed_seed():
    """sacrebleu reads its RNG seed from SACREBLEU_SEED; fix it for the duration."""
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = SEED
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SACREBLEU_SEED")
        else:
            os.environ["SACREBLEU_SEED"] = old


def saved_lines(stored: Stored, suite: str, files: list[str]) -> list[list[str]]:
    """The lines of each of `files` (saved hypotheses or references, relative to the suite's
    folder); Missing naming the suite where one is not there."""
    folder = stored.out_dir / suite
    missing = [f for f in files if not (folder / str(f)).is_file()]
    if missing:  # results copied without their hypotheses folder
        raise Missing(suite, f"suite {suite} lacks its saved hypotheses ({missing[0]})")
    return [read_lines(folder / str(f)) for f in files]


def seed_lines(stored: Stored, suite: str, rows: pd.DataFrame, model: str,
               seeds: tuple | None = None) -> list[list[str]]:
    """`model`'s saved test hypotheses, one list per seed: those of `seeds` in that order
    (else every seed's, in row order)."""
    files = rows[rows["model"] == model].set_index("seed")["test_hypotheses"]
    return saved_lines(stored, suite, list(files if seeds is None else files.loc[list(seeds)]))


def sentence_cache() -> Path:
    """$TVR_SENTENCE_CACHE, else sentence-tests/ in the user's cache (~/.cache/tvr-bench/)."""
    return Path(os.environ.get(CACHE_ENV) or user_cache() / "sentence-tests")


def _kept(path: Path, read: Callable[[Any], T]) -> T | None:
    """`read` of the JSON kept at `path`; None where none is kept or the file is damaged
    (the tests then run again and replace it)."""
    if not path.is_file():
        return None
    try:
        return read(json.loads(path.read_text()))
    except (ValueError, TypeError):
        return None


def sentence_tests(ours: list[str], theirs: list[str], refs: list[str], name: str,
                   chrf: bool = True, reference: str = "transformer") -> list[Test]:
    """Paired bootstrap and approximate randomization of `theirs` against `ours` (the
    baseline system), BLEU and chrF, SAMPLES resamples each with sacrebleu's fixed seed."""
    return against(ours, {name: theirs}, refs, reference, chrf)[name]


def against(ours: list[str], systems: dict[str, list[str]], refs: list[str],
            reference: str = "transformer", chrf: bool = True) -> dict[str, list[Test]]:
    """`sentence_tests` of several systems against one baseline, by system; kept in the
    user's cache under the hash of everything they depend on, so the ledger's later passes
    (`tvr claims`, then `tvr report`) do not run them again."""
    key = hashlib.sha256(json.dumps([reference, ours, systems, refs, chrf, SAMPLES, SEED,
                                     OPTIONS, sacrebleu.__version__]).encode()).hexdigest()
    path = sentence_cache() / f"{key}.json"
    with locked(path):  # two processes asking for the same tests: one runs them
        found = _kept(path, lambda kept: {name: [Test(*t) for t in tests]
                                          for name, tests in kept.items()})
        if found is not None:
            return found
        out = _paired(ours, systems, refs, reference, chrf)
        write_atomic(path, json.dumps({n: [[t.name, t.p, t.detail] for t in tests]
                                       for n, tests in out.items()}))
    return out


def _paired(ours: list[str], systems: dict[str, list[str]], refs: list[str], reference: str,
            chrf: bool) -> dict[str, list[Test]]:
    """One sacrebleu PairedTest per test takes all the systems: the references' and the
    baseline's statistics are extracted once, not once per pair, and each system's p-values
    are those of its own pair (each comparison draws its resamples from the same seed)."""
    out: dict[str, list[Test]] = {name: [] for name in systems}
    # references cached in the metric once, for both tests (PairedTest gets references=None)
    metrics = {"BLEU": _once(BLEU(references=[refs], **OPTIONS["BLEU"])),
               **({"chrF": _once(CHRF(references=[refs], **OPTIONS["chrF"]))} if chrf else {})}
    for kind, label in (("bs", "paired bootstrap"), ("ar", "approximate randomization")):
        with _fixed_seed():
            _, scores = PairedTest([(reference, ours), *systems.items()], metrics, None,
                                   test_type=kind, n_samples=SAMPLES)()
        for metric, column in zip(metrics, [k for k in scores if k != "System"], strict=True):
            for name, result in zip(systems, scores[column][1:], strict=True):
                out[name].append(Test(f"{name} vs {reference}, {metric}, {label}",
                                      float(result.p_value),
                                      f"{len(refs)} sentences, {SAMPLES} resamples, "
                                      f"seed {SEED}"))
    return out


def _once(metric: BLEU | CHRF) -> BLEU | CHRF:
    """`metric`, extracting each system's sentence statistics once: sacrebleu's PairedTest
    extracts them again for every test it is built for (the bootstrap, then randomization),
    which was half of an uncached ledger's time. The statistics do not depend on the test,
    so the p-values are the same."""
    extract, done = metric._extract_corpus_statistics, {}

    def cached(hypotheses: list[str], references: object) -> object:
        key = id(hypotheses)  # the systems' lists live as long as the metric
        if key not in done:
            done[key] = (hypotheses, extract(hypotheses, references))
        return done[key][1]

    metric._extract_corpus_statistics = cached
    return metric


def clustered_tests(ours: list[list[str]], theirs: list[list[str]], refs: list[str],
                    name: str, reference: str = "transformer",
                    metrics: tuple[str, ...] = ("BLEU", "chrF")) -> list[Test]:
    """The clustered paired bootstrap and approximate randomization (harness.report.clustered)
    of `theirs` against `ours`, BLEU and chrF, CLUSTERED_SAMPLES resamples each; kept in the
    user's cache under the hash of everything they depend on, as `against`'s tests are."""
    key = hashlib.sha256(json.dumps(["clustered", reference, name, ours, theirs, refs,
                                     list(metrics), CLUSTERED_SAMPLES, SEED, OPTIONS,
                                     sacrebleu.__version__]).encode()).hexdigest()
    path = sentence_cache() / f"{key}.json"
    with locked(path):
        found = _kept(path, lambda kept: [Test(*t) for t in kept])
        if found is not None:
            return found
        out = []
        for label, kind in (("BLEU", BLEU), ("chrF", CHRF)):
            if label not in metrics:
                continue
            r = clustered.paired(kind, ours, theirs, refs, CLUSTERED_SAMPLES, int(SEED),
                                 **OPTIONS[label])
            detail = (f"{len(refs)} sentences x {len(ours)} seed"
                      f"{'s' if len(ours) != 1 else ''} kept together, "
                      f"{CLUSTERED_SAMPLES} resamples, seed {SEED}; difference "
                      f"{r['difference']:+.2f}, bootstrap 95% interval [{r['low']:+.2f}, "
                      f"{r['high']:+.2f}]")
            out += [Test(f"{name} vs {reference}, {label}, clustered paired bootstrap",
                         r["p_bootstrap"], detail),
                    Test(f"{name} vs {reference}, {label}, clustered approximate "
                         "randomization", r["p_randomization"], detail)]
        write_atomic(path, json.dumps([[t.name, t.p, t.detail] for t in out]))
    return out


def versus_transformer(stored: Stored, suite: str, rows: pd.DataFrame, models: list[str],
                       refs: list[str]) -> dict[str, list[Test]]:
    """The clustered sentence-level tests of each model against the Transformer, on the
    seeds both ran."""
    ours = rows[rows["model"] == "transformer"].set_index("seed")
    out: dict[str, list[Test]] = {}
    for model in models:
        common = tuple(sorted(set(ours.index) & set(rows.loc[rows["model"] == model, "seed"])))
        if not common:
            raise Missing(suite, f"suite {suite} has no seed run by both transformer and "
                                 f"{model}")
        out[model] = clustered_tests(seed_lines(stored, suite, rows, "transformer", common),
                                     seed_lines(stored, suite, rows, model, common), refs, model)
    return out
