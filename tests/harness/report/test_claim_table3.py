"""Table 3 judged from translation: made-up dev hypotheses and perplexities yielding each
verdict of row B (smaller d_k hurts), and one seed failing the seeds gate."""

from __future__ import annotations

import pytest
from sacrebleu.metrics import BLEU

from harness.files import write_lines
from harness.report import claim_table3, claim_translation
from harness.report.claim_table3 import SUITE
from harness.report.evidence import Stored, gated
from harness.report.verdicts import CONTRADICTS, INCONCLUSIVE, QUALIFIED, SUPPORTS
from tests.harness.report.claim_frames import write_suite
from tests.harness.report.test_claim_translation import REFS, good, good_too, poor


def _suite(out, variant, ppl, seeds=4, base=good, study="table3-B", knob="d_k",
           values=(24, 8), params=(1000, 1000), suite=SUITE):
    """The base (perplexity 100) and one variation (`knob` = values[1], variant hypotheses,
    perplexity ppl) of Table 3's row `study`."""
    write_lines(out / suite / "hyp" / "refs.txt", REFS)
    rows = [{"runner": "baseline", "model": b, "dev_bleu": 0.01 * (i + 1)}
            for i, b in enumerate(claim_translation.BASELINES)]
    for name_, value, make, level, n in (("table3-base", values[0], base, 100.0, params[0]),
                                         (study, values[1], variant, ppl, params[1])):
        for seed in range(seeds):
            hyps, name = make(seed), f"hyp/{name_}-{seed}.txt"
            write_lines(out / suite / name, hyps)
            rows.append({"runner": "translate", "model": "transformer", "study": name_,
                         "seed": seed, knob: value, "dev_ppl": level + seed,
                         "dev_bleu": BLEU().corpus_score(hyps, [REFS]).score,
                         "dev_hypotheses": name, "dev_references": "hyp/refs.txt",
                         "dev_sentences": len(REFS), "n_params": n, "steps": 10})
    write_suite(out, suite, rows)


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


@pytest.mark.parametrize("params, ppl, verdict", [
    ((1000, 2000), 80.0, SUPPORTS),  # larger and lower perplexity
    ((1000, 2000), 120.0, CONTRADICTS),  # larger and higher
    ((1000, 500), 120.0, SUPPORTS),  # smaller and higher
])
def test_bigger_models(tmp_path, monkeypatch, params, ppl, verdict):
    monkeypatch.setattr(claim_translation, "SAMPLES", 1000)
    _suite(tmp_path, good_too, ppl, study="table3-C", knob="d_ff", values=(384, 768),
           params=params)
    assert gated(claim_table3.bigger(Stored(tmp_path))).verdict == verdict


def test_the_tuned_suite_judges_once_it_has_rows_and_every_remedy_names_it(tmp_path):
    """The quick suite with one seed: inconclusive, the seeds gate naming the tuned suite's
    commands; once the tuned suite has rows, they are judged and the quick ones ignored."""
    _suite(tmp_path, poor, 120.0, seeds=1)
    quick = gated(claim_table3.key_size(Stored(tmp_path)))
    failed = [g for g in quick.gates if not g.passed]
    assert quick.verdict == INCONCLUSIVE and failed
    assert "tvr run translation-table3-tuned" in failed[0].remedy
    assert quick.points.startswith(SUITE)
    _suite(tmp_path, poor, 120.0, suite=claim_table3.TUNED_SUITE)
    tuned = gated(claim_table3.key_size(Stored(tmp_path)))
    assert tuned.verdict == SUPPORTS and tuned.points.startswith(claim_table3.TUNED_SUITE)
    assert any("clustered" in t.name for t in tuned.tests)


def _nothing(seed: int) -> list[str]:
    """Hypotheses sharing no word with the references: dev BLEU 0."""
    return ["qqq"] * len(REFS)


def test_dev_bleu_off_its_floor_and_the_scope_names_the_budget(tmp_path, monkeypatch):
    """The range gate of the kind on dev BLEU: passes where the models translate, fails where
    every variation scores 0; the scope names the updates, one peak learning rate and the
    seeds per variation."""
    monkeypatch.setattr(claim_translation, "SAMPLES", 1000)
    _suite(tmp_path, poor, 120.0)
    evidence = claim_table3.key_size(Stored(tmp_path))
    (rng,) = [g for g in evidence.gates if g.name == "range"]
    assert rng.passed and "dev BLEU" in rng.detail
    assert "4 seeds per variation" in evidence.scope
    _suite(tmp_path, _nothing, 120.0, base=_nothing)
    failed = {g.name: g for g in gated(claim_table3.key_size(Stored(tmp_path))).gates
              if not g.passed}
    assert "every arm at the floor" in failed["range"].detail
