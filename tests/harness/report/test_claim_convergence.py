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


def _runs(stop_on=None) -> pd.DataFrame:
    rows = pd.DataFrame({"suite": "s", "point_id": [f"p{i}" for i in range(3)],
                         "seed": range(3), "stopped_by": "patience", "patience": 6})
    return rows if stop_on is None else rows.assign(stop_on=stop_on)


def test_the_converged_gate_asks_for_one_rule_for_every_run(tmp_path):
    """Runs stopped on different metrics are not compared: a base stopped on BLEU against a
    variation stopped on perplexity fails the gate, naming both; one metric for all passes."""
    from harness.report.claim_convergence import converged_gate
    from harness.report.evidence import Stored

    stored = Stored(tmp_path)  # no curves: the perplexity trend is not judged here
    alike = converged_gate(stored, {"base": _runs(), "C": _runs()}, "rule")
    assert alike.passed, alike.text()
    mixed = converged_gate(stored, {"base": _runs(), "C": _runs("dev_ppl")}, "rule")
    assert not mixed.passed
    assert "stopped on different metrics: dev perplexity or greedy dev BLEU" in mixed.detail
    assert "one rule" in mixed.remedy


def test_every_metric_patience_may_watch_has_a_direction_and_a_name():
    """The three places that know a stopping metric agree: the options' choices (STOP_ON),
    training's direction (the default, BLEU, higher is better; the rest in LOWER_IS_BETTER)
    and the report's words."""
    from experiments.spec import STOP_ON
    from harness.report.claim_convergence import STOP_METRICS
    from harness.train.translation.train import LOWER_IS_BETTER, Plan

    assert set(STOP_METRICS) == set(STOP_ON) and STOP_ON[0] == Plan.key
    assert set(STOP_ON[1:]) == set(LOWER_IS_BETTER)
