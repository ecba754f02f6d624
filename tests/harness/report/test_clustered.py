"""The clustered paired tests: a sentence's seeds move together."""

from __future__ import annotations

import random

from sacrebleu.metrics import BLEU, CHRF

from harness.report import clustered

WORDS = "the lord said unto moses and aaron speak to children of israel saying".split()


def _corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(5, 12))) for _ in range(n)]


def _noisy(refs: list[str], keep: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(w if rng.random() < keep else rng.choice(WORDS) for w in r.split())
            for r in refs]


REFS = _corpus(150, 0)


def _width(r: dict[str, float]) -> float:
    return r["high"] - r["low"]


def test_a_system_against_itself_is_never_significant() -> None:
    hyps = [_noisy(REFS, 0.6, s) for s in range(3)]
    r = clustered.paired(BLEU, hyps, hyps, REFS, 2000, 1)
    assert r["difference"] == 0 and r["p_bootstrap"] == 1 and r["p_randomization"] == 1


def test_a_much_better_system_is_separated_by_both_tests() -> None:
    worse = [_noisy(REFS, 0.4, s) for s in range(3)]
    better = [_noisy(REFS, 0.8, 10 + s) for s in range(3)]
    for metric in (BLEU, CHRF):
        r = clustered.paired(metric, worse, better, REFS, 2000, 1)
        assert r["difference"] > 0 and r["low"] > 0
        assert r["p_bootstrap"] < 0.01 and r["p_randomization"] < 0.01


def test_seeds_of_one_sentence_are_resampled_together() -> None:
    """Three seeds that translate alike carry the information of one: the clustered interval
    is as wide as one seed's, where the seeds stacked as separate sentences (the old test)
    narrow it by about sqrt(3)."""
    a, b = _noisy(REFS, 0.5, 1), _noisy(REFS, 0.6, 2)
    one = clustered.paired(BLEU, [a], [b], REFS, 3000, 3)
    three = clustered.paired(BLEU, [a] * 3, [b] * 3, REFS, 3000, 3)
    stacked = clustered.paired(BLEU, [a * 3], [b * 3], REFS * 3, 3000, 3)
    assert abs(three["difference"] - one["difference"]) < 1e-9
    assert 0.85 < _width(three) / _width(one) < 1.15
    assert _width(stacked) < 0.75 * _width(three)
