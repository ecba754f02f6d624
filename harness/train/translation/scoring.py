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
    """{bleu, chrf, bleu_signature, chrf_signature, len_ratio, repeat_rate} of hypotheses
    against one reference each: len_ratio is BLEU's hypothesis/reference length, repeat_rate
    the share of hypotheses that degenerate into repetition (repeats)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return {"bleu": b.score, "chrf": c.score, "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()),
            "len_ratio": b.sys_len / b.ref_len if b.ref_len else float("nan"),
            "repeat_rate": sum(map(repeats, hypotheses)) / max(1, len(hypotheses))}


def repeats(text: str, n: int = 3, times: int = 3) -> bool:
    """Whether some word n-gram occurs `times` or more in the text, ignoring case ("The
    children of the children of the children of ...": a decoder that ignores its source
    loops)."""
    words = text.lower().split()
    seen: dict[tuple[str, ...], int] = {}
    for i in range(len(words) - n + 1):
        gram = tuple(words[i: i + n])
        seen[gram] = seen.get(gram, 0) + 1
        if seen[gram] >= times:
            return True
    return False
