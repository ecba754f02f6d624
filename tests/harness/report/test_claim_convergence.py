"""What a trained translation claim says its stopping rule watched (stop_metric, rule_text)."""

from __future__ import annotations

import pandas as pd

from harness.report.claim_convergence import rule_text, stop_metric


def test_the_rule_names_the_metric_its_rows_stopped_on():
    """Rows from before stop_on existed watched greedy dev BLEU; rows that set it name dev
    perplexity; a mix names both, so a label never claims one rule for two."""
    old = pd.DataFrame({"patience": [6, 6], "budget_flops": [4.8e14, 4.8e14]})
    assert stop_metric(old) == "greedy dev BLEU"
    assert rule_text(old) == ("trained until 6 evaluations brought no new best greedy dev "
                              "BLEU, capped at 4.8e14 FLOPs")
    ppl = old.assign(stop_on="dev_ppl")
    assert stop_metric(ppl) == "dev perplexity" and "no new best dev perplexity" in rule_text(ppl)
    mixed = old.assign(stop_on=["dev_ppl", None])
    assert stop_metric(mixed) == "dev perplexity or greedy dev BLEU"
