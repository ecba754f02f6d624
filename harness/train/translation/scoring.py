"""BLEU and chrF with sacrebleu, on detokenised text, with the signatures that say exactly
how they were computed; the hypotheses file format everyone can rescore.

sacrebleu's defaults: BLEU with its 13a tokeniser, mixed case, exponential smoothing; chrF
with character 6-grams and beta 2. The hypotheses file of a point holds one detokenised
hypothesis per line in the order of the split's references (corpus order).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

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


def write_hypotheses(path: Path, hypotheses: list[str]) -> None:
    """One hypothesis per line, written atomically (a newline inside one would shift the rest,
    so none may hold one)."""
    if any("\n" in h or "\r" in h for h in hypotheses):
        raise ValueError("a hypothesis holds a line break")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(h + "\n" for h in hypotheses)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def read_hypotheses(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return text.split("\n")[:-1] if text else []
