"""Paired significance tests over sentences with all seeds of a system kept together: the
sentence is the unit that is resampled (a clustered bootstrap) or swapped between the two
systems (approximate randomization), and each system's score is its corpus BLEU or chrF over
every seed's hypothesis of the sentences drawn.

Why not sacrebleu's PairedTest on the seeds' hypotheses stacked one after another: it would
resample each (sentence, seed) on its own, as if the seeds' translations of one verse were
independent sentences, which they are not (same source, same reference); its bootstrap
spread comes out too narrow, by about the square root of the seeds at 3 seeds. sacrebleu
gives the sentence statistics and turns summed statistics into a score. The tests are the
two-sided forms of Koehn (2004) and Riezler and Maxwell (2005), one sentence cluster at a
time: the bootstrap's differences are shifted to mean zero and counted where at least as far
from zero as the observed one, the randomization's likewise; a system against itself gets
p = 1 (sacrebleu counts strictly greater absolute differences).
"""

from __future__ import annotations

import hashlib

import numpy as np
from sacrebleu.metrics.base import Metric

CHUNK = 500  # resamples per matrix product


_STATS: dict[tuple[str, str], np.ndarray] = {}  # (metric and references, run) -> statistics


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def sentence_stats(metric: Metric, runs: list[list[str]], refs: list[str]) -> np.ndarray:
    """(sentences, statistics): each sentence's statistics summed over the runs (seeds).
    `metric` holds the references (built with references=[refs]): sacrebleu then prepares
    them once, not once per run; a run's statistics are kept for this process (a model is
    tested against several others, a baseline's one run stands for each seed)."""
    out = None
    which = f"{metric.get_signature()}|{_digest(refs)}"
    for hyps in runs:
        if len(hyps) != len(refs):
            raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
        key = (which, _digest(hyps))
        if key not in _STATS:
            _STATS[key] = np.asarray(metric._extract_corpus_statistics(hyps, None),
                                     dtype=float)
        stats = _STATS[key]
        out = stats if out is None else out + stats
    if out is None:
        raise ValueError("no runs to score")
    return out


def _scores(metric: Metric, summed: np.ndarray) -> np.ndarray:
    return np.array([metric._compute_score_from_stats(list(row)).score for row in summed])


def paired(kind: type[Metric], ours: list[list[str]], theirs: list[list[str]],
           refs: list[str], samples: int, seed: int, **options: object) -> dict[str, float]:
    """{difference (theirs - ours, on every sentence), bootstrap p, randomization p, the
    bootstrap's 95% percentile interval of the difference} of metric `kind` (sacrebleu's
    BLEU or CHRF, with `options`); two-sided p-values."""
    metric = kind(references=[refs], **options)
    a, b = sentence_stats(metric, ours, refs), sentence_stats(metric, theirs, refs)
    n = len(refs)
    observed = _scores(metric, b.sum(0, keepdims=True))[0] - \
        _scores(metric, a.sum(0, keepdims=True))[0]
    rng = np.random.default_rng(seed)
    boot, perm = [], []
    for start in range(0, samples, CHUNK):
        m = min(CHUNK, samples - start)
        weights = np.stack([np.bincount(rng.integers(n, size=n), minlength=n)
                            for _ in range(m)]).astype(float)  # a sentence drawn k times
        boot.append(_scores(metric, weights @ b) - _scores(metric, weights @ a))
        swap = (rng.random((m, n)) < 0.5).astype(float)  # a sentence's clusters exchanged
        perm.append(_scores(metric, b.sum(0) + swap @ (a - b))
                    - _scores(metric, a.sum(0) + swap @ (b - a)))
    boots, perms = np.concatenate(boot), np.concatenate(perm)
    centred = boots - boots.mean()  # the bootstrap's spread around the null of no difference
    return {"difference": float(observed),
            "p_bootstrap": float((1 + np.sum(np.abs(centred) >= abs(observed))) / (samples + 1)),
            "p_randomization": float((1 + np.sum(np.abs(perms) >= abs(observed)))
                                     / (samples + 1)),
            "low": float(np.percentile(boots, 2.5)), "high": float(np.percentile(boots, 97.5))}
