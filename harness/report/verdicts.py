"""The verdicts a claim of the ledger can get, and the two kinds of claim."""

from __future__ import annotations

SUPPORTS = "supports"
QUALIFIED = "supports with a qualification"
CONTRADICTS = "contradicts"
INCONCLUSIVE = "inconclusive at this scale"
NOT_HERE = "not measured on this hardware"
NOT_MEASURED = "not measured"
VERDICTS = (SUPPORTS, QUALIFIED, CONTRADICTS, INCONCLUSIVE, NOT_HERE, NOT_MEASURED)
DECISIVE = (SUPPORTS, QUALIFIED, CONTRADICTS)  # verdicts that take a side: they need the gates
EMPIRICAL = "empirical"  # a claim about how models behave, judged from measurements
IDENTITY = "identity check"  # a check that a mathematical identity holds in the code
