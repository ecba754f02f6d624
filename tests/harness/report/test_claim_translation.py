"""The Table 2 claim on made-up translation results: saved hypotheses chosen to yield each
verdict through sacrebleu's paired bootstrap and approximate randomization with the seeds'
order, and rows that fail each power gate."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from sacrebleu.metrics import BLEU, CHRF

from harness.files import write_lines
from harness.report import claim_translation, sentence_tests
from harness.report.claim_translation import CLAIMS, SUITES
from harness.report.claims import judge
from harness.report.evidence import Stored
from harness.report.verdicts import CONTRADICTS, INCONCLUSIVE, QUALIFIED, SUPPORTS
from tests.harness.report.claim_frames import write_suite

MATCHED = next(c for c in CLAIMS if c.key == "table2-matched-budget")
SUITE = SUITES[-1]  # the demo suite: the reference (SUITES[0]) takes over once it has models

REFS = [f"and the lord spake unto moses number {i} saying go thou" for i in range(40)]


def good(seed: int) -> list[str]:
    """The references with one sentence (a different one per seed) left out: near 100 BLEU,
    a little different on every seed."""
    return [("and he said" if i == seed else r) for i, r in enumerate(REFS)]


def good_too(seed: int) -> list[str]:
    """As good as `good`, leaving out other sentences: not separable from it."""
    return good(seed + 10)


def poor(seed: int) -> list[str]:
    return [f"and he said {'unto' if i == seed else ''}".strip() for i in range(len(REFS))]


LOW = {"source-copy": (0.01, 0.1), "constant": (0.02, 0.2), "retrieval": (0.03, 0.3)}


def mixed(seed: int) -> list[str]:
    """Good on two seeds, poor on the third: the seeds do not order it against `good`."""
    return good(seed) if seed < 2 else poor(seed)


def _suite(out, transformer, rnn, flops=(1e12, 1e12), seeds=3, baselines=LOW):
    folder = out / SUITE
    write_lines(folder / "hyp" / "refs.txt", REFS)
    rows = [{"runner": "source-copy" if b == "source-copy" else "baseline", "model": b,
             "test_bleu": bleu, "test_chrf": chrf, "dev_bleu": bleu}
            for b, (bleu, chrf) in baselines.items()]
    for model, make, cost in (("transformer", transformer, flops[0]),
                              ("lstm-attention", rnn, flops[1])):
        for seed in range(seeds):
            hyps = make(seed)
            name = f"hyp/{model}-{seed}.txt"
            write_lines(folder / name, hyps)
            rows.append({"runner": "translate", "model": model, "seed": seed,
                         "train_flops": cost, "test_hypotheses": name,
                         "test_references": "hyp/refs.txt", "test_sentences": len(REFS),
                         "test_bleu": BLEU().corpus_score(hyps, [REFS]).score,
                         "test_chrf": CHRF().corpus_score(hyps, [REFS]).score,
                         "n_params": 1000, "steps": 10})
    write_suite(out, SUITE, rows)


def test_missing_hypotheses_name_the_suite_to_run(tmp_path):
    _suite(tmp_path, good, poor)
    (tmp_path / SUITE / "hyp" / "refs.txt").unlink()
    evidence = judge(MATCHED, Stored(tmp_path))
    assert evidence.verdict.startswith("not measured") and "hypotheses" in evidence.measured


@pytest.mark.parametrize("transformer, rnn, flops, verdict", [
    (good, poor, (1e12, 3e12), SUPPORTS),  # better at a third of the training
    (good, poor, (1e12, 1e12), QUALIFIED),  # better at the same cost: the cost part untested
    (good, good_too, (1e12, 1e12), QUALIFIED),  # not separated
    (poor, good, (1e12, 1e12), CONTRADICTS),
])
def test_table2_verdicts_when_every_gate_passes(tmp_path, transformer, rnn, flops, verdict):
    _suite(tmp_path, transformer, rnn, flops)
    evidence = judge(MATCHED, Stored(tmp_path))
    assert evidence.verdict == verdict, [g for g in evidence.gates if not g.passed]
    assert all(g.passed for g in evidence.gates)
    names = " ".join(t.name for t in evidence.tests)
    assert "paired bootstrap" in names and "approximate randomization" in names
    assert "BLEU per seed" in names
    assert "clustered paired bootstrap" in names  # a verse's seeds resampled together
    assert all(f"{sentence_tests.CLUSTERED_SAMPLES} resamples" in t.detail
               and "3 seeds kept together" in t.detail
               for t in evidence.tests if "resamples" in t.detail)


@pytest.mark.parametrize("transformer, seeds, baselines, failed", [
    (poor, 1, LOW, "seeds"),  # one seed: seed-to-seed variation unmeasured
    (poor, 2, LOW, "seeds"),
    (poor, 3, {"source-copy": (0.1, 1.0)}, "baselines"),  # constant and retrieval not measured
    (poor, 3, LOW | {"retrieval": (99.0, 99.0)}, "baselines"),  # a model below retrieval
    (mixed, 3, LOW, "seed order"),  # separated over sentences, but one seed says otherwise
])
def test_table2_is_inconclusive_when_a_gate_fails(tmp_path, monkeypatch, transformer, seeds,
                                                 baselines, failed):
    monkeypatch.setattr(sentence_tests, "SAMPLES", 1000)  # the gates, not the tests, decide
    monkeypatch.setattr(sentence_tests, "CLUSTERED_SAMPLES", 1000)
    _suite(tmp_path, transformer, good, seeds=seeds, baselines=baselines)
    evidence = judge(MATCHED, Stored(tmp_path))
    assert evidence.verdict == INCONCLUSIVE
    assert evidence.ungated == CONTRADICTS  # what the rule says without its gates
    gate = next(g for g in evidence.gates if g.name == failed and not g.passed)
    assert gate.remedy  # names what would pass it
    if "constant" not in baselines:
        assert "missing: constant, retrieval" in gate.detail


def test_the_cpu_reference_decides_once_it_has_trained_models(tmp_path):
    """Baselines alone (a reference sitting cut short) leave the verdict to the demo suite;
    the reference's own models take it over."""
    _suite(tmp_path, good, poor)
    reference = SUITES[0]
    write_suite(tmp_path, reference, [{"runner": "retrieval", "model": "retrieval",
                                       "test_bleu": 1.0, "test_chrf": 10.0}])
    demo = judge(MATCHED, Stored(tmp_path))
    assert demo.points.startswith(SUITE) and demo.figure == f"{SUITE}/bleu-vs-cost.png"
    shutil.rmtree(tmp_path / reference)
    shutil.move(tmp_path / SUITE, tmp_path / reference)  # the reference with its models
    full = judge(MATCHED, Stored(tmp_path))  # its figure too, not the demo's
    assert full.points.startswith(reference) and full.figure == f"{reference}/bleu-vs-cost.png"


def test_a_reference_with_seeds_still_to_run_leaves_the_verdict_to_the_demo(tmp_path,
                                                                            monkeypatch):
    """The ledger reads the suite the README's Table 2 shows: a reference whose models have
    2 seeds of the 3 (a sitting cut short) does not decide yet."""
    monkeypatch.setattr(sentence_tests, "SAMPLES", 1000)
    monkeypatch.setattr(sentence_tests, "CLUSTERED_SAMPLES", 1000)
    _suite(tmp_path, good, poor, seeds=2)
    shutil.move(tmp_path / SUITE, tmp_path / SUITES[0])
    _suite(tmp_path, poor, good)
    assert judge(MATCHED, Stored(tmp_path)).points.startswith(SUITE)


def test_the_best_model_is_tested_against_retrieval_sentence_by_sentence(tmp_path):
    """Retrieval's saved hypotheses: the best model (here the recurrent one) against them,
    sentence by sentence, stacked over its seeds."""
    _suite(tmp_path, poor, good)
    folder = tmp_path / SUITE
    write_lines(folder / "hyp" / "retrieval.txt", poor(5))
    rows = (folder / "results.csv").read_text().splitlines()
    head = rows[0].split(",")
    at, model = head.index("test_hypotheses"), head.index("model")
    rows[1:] = [",".join(c if i != at or r.split(",")[model] != "retrieval"
                         else "hyp/retrieval.txt" for i, c in enumerate(r.split(",")))
                for r in rows[1:]]
    (folder / "results.csv").write_text("\n".join(rows) + "\n")
    evidence = judge(MATCHED, Stored(tmp_path))
    versus = [t for t in evidence.tests if "vs retrieval" in t.name]
    assert {t.name for t in versus} == {
        f"lstm-attention vs retrieval, {m}, clustered {k}" for m in ("BLEU", "chrF")
        for k in ("paired bootstrap", "approximate randomization")}
    assert all(t.p < 0.05 and f"{len(REFS)} sentences x 3 seeds" in t.detail for t in versus)


def test_a_retuned_models_seeds_are_not_mixed_with_its_earlier_recipe(tmp_path):
    """Rows of the Transformer under two recipes (a re-tuned search, a partial rerun): only
    the last recipe's seeds are compared."""
    _suite(tmp_path, good, poor)
    path = tmp_path / SUITE / "results.csv"
    rows = pd.read_csv(path)
    rows["peak_lr"] = 1e-3
    old = rows[rows["model"] == "transformer"].assign(peak_lr=5e-3, seed=lambda r: r["seed"] + 3)
    pd.concat([old, rows]).to_csv(path, index=False)  # the earlier recipe first
    stored = Stored(tmp_path)
    kept = claim_translation._runs_in(stored, claim_translation._suite(stored))
    assert set(kept.loc[kept["model"] == "transformer", "peak_lr"]) == {1e-3}
    assert sorted(kept.loc[kept["model"] == "transformer", "seed"]) == [0, 1, 2]


def test_the_measured_line_says_which_seeds_converged(tmp_path):
    """A model none of whose seeds' dev curves flattened is compared at the budget: the
    ledger says so rather than reading its BLEU as converged."""
    _suite(tmp_path, poor, good)
    rows = pd.read_csv(tmp_path / SUITE / "results.csv")
    rows["converged"] = [None] * 3 + [0, 0, 0, 1, 1, 0]  # transformer, then lstm-attention
    rows.to_csv(tmp_path / SUITE / "results.csv", index=False)
    measured = judge(MATCHED, Stored(tmp_path)).measured
    assert "transformer 0 of 3 seeds, lstm-attention 2 of 3 seeds" in measured
    assert "not at convergence, for transformer" in measured
