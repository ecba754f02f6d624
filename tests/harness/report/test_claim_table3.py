"""Table 3 judged from translation: made-up dev hypotheses and perplexities yielding each
verdict of row B (smaller d_k hurts), and one seed failing the seeds gate."""

from __future__ import annotations

import pytest
from sacrebleu.metrics import BLEU

from harness.report import claim_table3, claim_translation
from harness.report.claim_table3 import SUITE
from harness.report.claims import CONTRADICTS, INCONCLUSIVE, QUALIFIED, SUPPORTS, Stored, gated
from harness.results import write_lines
from tests.harness.report.claim_frames import write_suite
from tests.harness.report.test_claim_translation import REFS, good, good_too, poor


def _suite(out, variant, ppl, seeds=4, base=good):
    """The base (perplexity 100) and d_k = 8 (variant, perplexity ppl)."""
    write_lines(out / SUITE / "hyp" / "refs.txt", REFS)
    rows = [{"runner": "baseline", "model": b, "dev_bleu": 0.01 * (i + 1)}
            for i, b in enumerate(claim_translation.BASELINES)]
    for study, d_k, make, level in (("table3-base", 24, base, 100.0),
                                    ("table3-B", 8, variant, ppl)):
        for seed in range(seeds):
            hyps, name = make(seed), f"hyp/{study}-{seed}.txt"
            write_lines(out / SUITE / name, hyps)
            rows.append({"runner": "translate", "model": "transformer", "study": study,
                         "seed": seed, "d_k": d_k, "dev_ppl": level + seed,
                         "dev_bleu": BLEU().corpus_score(hyps, [REFS]).score,
                         "dev_hypotheses": name, "dev_references": "hyp/refs.txt",
                         "dev_sentences": len(REFS), "n_params": 1000, "steps": 10})
    write_suite(out, SUITE, rows)


@pytest.mark.parametrize("variant, ppl, seeds, verdict", [
    (poor, 120.0, 4, SUPPORTS),  # higher perplexity and lower BLEU, both separated
    (good_too, 101.0, 4, QUALIFIED),  # not separated
    (poor, 80.0, 4, QUALIFIED),  # mixed: lower perplexity, lower BLEU
    (poor, 120.0, 1, INCONCLUSIVE),  # one seed
])
def test_key_size(tmp_path, monkeypatch, variant, ppl, seeds, verdict):
    monkeypatch.setattr(claim_translation, "SAMPLES", 1000)
    _suite(tmp_path, variant, ppl, seeds)
    evidence = gated(claim_table3.key_size(Stored(tmp_path)))
    assert evidence.verdict == verdict, [g for g in evidence.gates if not g.passed]
    if verdict == INCONCLUSIVE:
        assert "seeds" in {g.name for g in evidence.gates if not g.passed}
    assert "d_k=8 vs base" in evidence.measured


def test_contradicts_when_the_smaller_d_k_is_better_on_both(tmp_path, monkeypatch):
    monkeypatch.setattr(claim_translation, "SAMPLES", 1000)
    _suite(tmp_path, good, 80.0, base=poor)
    assert gated(claim_table3.key_size(Stored(tmp_path))).verdict == CONTRADICTS
