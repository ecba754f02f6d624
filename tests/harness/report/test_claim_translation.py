"""The Table 2 claim on made-up translation results: saved hypotheses chosen to yield each
verdict through sacrebleu's paired bootstrap."""

from __future__ import annotations

import pytest

from harness.report.claim_translation import SUITE, table2_bleu_at_cost
from harness.report.claims import CONTRADICTS, QUALIFIED, SUPPORTS, Stored
from harness.results import write_lines
from tests.harness.report.claim_frames import write_suite

REFS = [f"and the lord spake unto moses number {i} saying go thou" for i in range(40)]
GOOD = REFS
POOR = ["and he said" for _ in REFS]


def _suite(out, transformer, rnn, flops=(1e12, 1e12)):
    folder = out / SUITE
    write_lines(folder / "hyp" / "refs.txt", REFS)
    rows = []
    for model, hyps, cost in (("transformer", transformer, flops[0]),
                              ("lstm-attention", rnn, flops[1])):
        write_lines(folder / "hyp" / f"{model}.txt", hyps)
        rows.append({"runner": "translate", "model": model, "train_flops": cost,
                     "test_hypotheses": f"hyp/{model}.txt", "test_references": "hyp/refs.txt",
                     "test_sentences": len(REFS), "n_params": 1000, "steps": 10})
    write_suite(out, SUITE, rows)


def test_missing_hypotheses_name_the_suite_to_run(tmp_path):
    _suite(tmp_path, GOOD, POOR)
    (tmp_path / SUITE / "hyp" / "refs.txt").unlink()
    from harness.report.claim_translation import CLAIMS
    from harness.report.claims import judge

    evidence = judge(CLAIMS[0], Stored(tmp_path))
    assert evidence.verdict.startswith("not measured") and "hypotheses" in evidence.measured


@pytest.mark.parametrize("transformer, rnn, flops, verdict", [
    (GOOD, POOR, (1e12, 1e12), SUPPORTS),
    (POOR, GOOD, (1e12, 1e12), CONTRADICTS),
    (GOOD, GOOD, (1e12, 1e12), QUALIFIED),  # not separated
    (GOOD, POOR, (3e12, 1e12), QUALIFIED),  # better, but at three times the training
])
def test_table2_verdicts(tmp_path, transformer, rnn, flops, verdict):
    _suite(tmp_path, transformer, rnn, flops)
    evidence = table2_bleu_at_cost(Stored(tmp_path))
    assert evidence.verdict == verdict, evidence.measured
    assert "bootstrap" in evidence.measured and "lstm-attention" in evidence.measured
