"""The sentence-level tests of Table 2's claims on made-up hypotheses: several systems tested
together get each pair's own p-values, both tests read one extraction of each system's
statistics, and the cache keeps the p-values by everything they depend on."""

from __future__ import annotations

import pytest
from sacrebleu.metrics import BLEU, CHRF

from harness.report import sentence_tests
from tests.harness.report.test_claim_translation import REFS, good, good_too, mixed, poor


def test_systems_tested_together_get_their_own_pairs_p_values():
    """`against` runs one sacrebleu PairedTest for several systems: each system's p-values
    are exactly those of its pair run alone (same baseline, same fixed seed)."""
    base, refs = poor(0) + good(1), REFS * 2
    systems = {"a": good(2) + good(3), "b": mixed(2) + poor(1), "c": good_too(0) + mixed(2)}
    together = sentence_tests.against(base, systems, refs)
    for name, hyps in systems.items():
        alone = sentence_tests.sentence_tests(base, hyps, refs, name)
        assert [(t.name, t.p, t.detail) for t in together[name]] == \
            [(t.name, t.p, t.detail) for t in alone]
    assert len({t.p for tests in together.values() for t in tests}) > 1  # not all at the floor


def test_both_tests_share_each_systems_statistics_and_keep_sacrebleus_p_values(monkeypatch):
    """The bootstrap and randomization read one extraction of each system's sentence
    statistics, and give the p-values of plain sacrebleu PairedTests, one per test."""
    from sacrebleu.significance import PairedTest

    base, systems = poor(0), {"a": good(1), "b": mixed(2)}
    calls = []
    extract = BLEU._extract_corpus_statistics
    monkeypatch.setattr(BLEU, "_extract_corpus_statistics",
                        lambda self, hyps, refs: calls.append(id(hyps)) or extract(self, hyps,
                                                                                   refs))
    ours = sentence_tests._paired(base, systems, REFS, "transformer", chrf=True)
    assert len(calls) == len(set(calls)) == 1 + len(systems)
    monkeypatch.setenv("SACREBLEU_SEED", sentence_tests.SEED)
    for kind, label in (("bs", "paired bootstrap"), ("ar", "approximate randomization")):
        _, plain = PairedTest([("transformer", base), *systems.items()],
                              {"BLEU": BLEU(references=[REFS]), "chrF": CHRF(references=[REFS])},
                              None, test_type=kind, n_samples=sentence_tests.SAMPLES)()
        for name in systems:
            for metric, column in (("BLEU", "BLEU"), ("chrF", "chrF2")):
                mine = next(t.p for t in ours[name] if t.name.endswith(f"{metric}, {label}"))
                assert mine == plain[column][1 + list(systems).index(name)].p_value


def test_sentence_tests_are_kept_by_what_they_depend_on(tmp_path, monkeypatch):
    """A second ledger pass reads the tests' p-values from the cache; other hypotheses,
    another resample count, other metric options or a damaged cache file run them again."""
    monkeypatch.setenv(sentence_tests.CACHE_ENV, str(tmp_path))
    base, systems = poor(0), {"a": good(1), "b": mixed(2)}
    first = sentence_tests.against(base, systems, REFS)
    (kept,) = list(tmp_path.glob("*.json"))

    def fail(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("ran again")

    monkeypatch.setattr(sentence_tests, "_paired", fail)
    assert sentence_tests.against(base, systems, REFS) == first
    for changed in ({"systems": {"a": good(3), "b": mixed(2)}}, {"samples": 999}):
        monkeypatch.setattr(sentence_tests, "SAMPLES", changed.get("samples", 1_000))
        with pytest.raises(AssertionError, match="ran again"):
            sentence_tests.against(base, changed.get("systems", systems), REFS)
    monkeypatch.setattr(sentence_tests, "SAMPLES", 1_000)
    monkeypatch.setattr(sentence_tests, "OPTIONS", {"BLEU": {"lowercase": True}, "chrF": {}})
    with pytest.raises(AssertionError, match="ran again"):
        sentence_tests.against(base, systems, REFS)
    monkeypatch.setattr(sentence_tests, "OPTIONS", {"BLEU": {}, "chrF": {}})
    kept.write_text("{not json")
    with pytest.raises(AssertionError, match="ran again"):
        sentence_tests.against(base, systems, REFS)
