"""BLEU and chrF with sacrebleu, on detokenised text, with the signatures that say exactly
how they were computed.

sacrebleu's defaults: BLEU with its 13a tokeniser, mixed case, exponential smoothing; chrF
with character 6-grams and beta 2. The hypotheses file of a point (written by the sweep with
harness.files.write_lines) holds one detokenised hypothesis per line in the order of the
split's references (corpus order).
"""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF


def score(hypotheses: list[str], references: list[str]) -> dict[str, float | str]:
    """{bleu, chrf, bleu_signature, chrf_signature} of hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return {"bleu": b.score, "chrf": c.score, "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}
