"""Table 2's two claims at convergence (quality, cost to a common target) on made-up rows
and curves of the converged suite: each verdict, and the gates that stop one."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from harness.plan import write_plan
from harness.report.claim_translation import CLAIMS, CONVERGED
from harness.report.claims import judge
from harness.report.evidence import Stored
from harness.report.rulebook import label
from harness.report.translation import cost_to_target, table2
from harness.report.verdicts import CONTRADICTS, INCONCLUSIVE, SUPPORTS
from tests.harness.report.claim_frames import write_suite
from tests.harness.report.test_claim_translation import LOW, REFS, good, poor, write_lines

QUALITY, COST = (next(c for c in CLAIMS if c.key == k) for k in ("table2-quality", "table2-cost"))
MODELS = ("transformer", "lstm-attention")


def _converged(out, transformer=good, rnn=poor, seeds=4, flat=lambda m, s: 1,
               reach=lambda m, s: 1e12):
    """The converged suite: rows with hypotheses, and each run's dev curve rising linearly
    from 0 to BLEU 20 at FLOPs reach(model, seed) x 2, evaluated every reach / 4 FLOPs."""
    folder = out / CONVERGED
    write_lines(folder / "hyp" / "refs.txt", REFS)
    rows = [{"runner": "baseline", "model": b, "test_bleu": bleu, "test_chrf": chrf}
            for b, (bleu, chrf) in LOW.items()]
    curves = []
    from sacrebleu.metrics import BLEU, CHRF
    for model, make in zip(MODELS, (transformer, rnn), strict=True):
        for seed in range(seeds):
            hyps, pid = make(seed), f"{model}-s{seed}"
            write_lines(folder / f"hyp/{pid}.txt", hyps)
            rows.append({"runner": "translate", "model": model, "seed": seed, "point_id": pid,
                         "train_flops": 2 * reach(model, seed), "test_hypotheses":
                         f"hyp/{pid}.txt", "test_references": "hyp/refs.txt",
                         "test_sentences": len(REFS), "n_params": 1_400_000,
                         "train_pairs": 28_000, "steps_run": 3000 + seed, "epochs": 6.0,
                         "test_bleu": BLEU().corpus_score(hyps, [REFS]).score,
                         "test_chrf": CHRF().corpus_score(hyps, [REFS]).score,
                         "converged": flat(model, seed), "patience": 6,
                         "stopped_by": "patience" if flat(model, seed) else "budget",
                         "budget_flops": 2.4e14, "target_bleu": 5.0})
            step = reach(model, seed) / 4
            for k in range(9):
                for metric, value in (("dev_bleu_greedy", 20 * k / 8),
                                      ("train_flops", k * step), ("train_s", k * step / 1e10)):
                    curves.append((pid, "m", metric, k * 100, value))
    write_suite(out, CONVERGED, [r for r in rows if r["runner"] == "baseline"])
    frame = pd.read_csv(folder / "results.csv")
    trained = pd.DataFrame([r for r in rows if r["runner"] == "translate"])
    pd.concat([frame, trained.assign(status="ok", device="cpu", device_name="test CPU", threads=1,
                                     machine="m", suite=CONVERGED)]).to_csv(
        folder / "results.csv", index=False)
    pd.DataFrame(curves, columns=["point_id", "machine", "metric", "step", "value"]).to_csv(
        folder / "series.csv", index=False)


def test_quality_at_convergence_supports_and_names_its_scale(tmp_path):
    _converged(tmp_path)
    e = judge(QUALITY, Stored(tmp_path))
    assert e.verdict == SUPPORTS, e
    assert any(g.name == "converged" and g.passed for g in e.gates)
    assert label(e.verdict, e.scope) == (
        "supports at 1.4M parameters, 28k training pairs, 3,000-3,003 updates (6.0-6.0 "
        "epochs), trained until patience on greedy dev BLEU, CPU (test CPU)")


def test_quality_waits_for_a_curve_still_rising(tmp_path):
    _converged(tmp_path, flat=lambda m, s: int(not (m == "transformer" and s == 1)))
    e = judge(QUALITY, Stored(tmp_path))
    assert e.verdict == INCONCLUSIVE and e.ungated == SUPPORTS
    (gate,) = [g for g in e.gates if g.name == "converged"]
    assert not gate.passed and "(may still rise): transformer seed 1" in gate.detail


def test_cost_to_target_reads_the_first_evaluation_that_reaches_it():
    curve = pd.DataFrame({"dev_bleu_greedy": [0, 4, 9, 8, 12], "train_flops": [0, 1, 2, 3, 4],
                          "train_s": [0, 10, 20, 30, 40]})
    assert cost_to_target(curve, 8.5) == {"flops": 2.0, "seconds": 20.0}
    assert pd.isna(cost_to_target(curve, 13)["flops"])


@pytest.mark.parametrize(("reach", "verdict"), [
    # the Transformer reaches the target with a quarter of the recurrent model's FLOPs
    (lambda m, s: (1 if m == "transformer" else 4) * 1e12 * (1 + s / 10), SUPPORTS),
    # ... or with twice its FLOPs
    (lambda m, s: (2 if m == "transformer" else 1) * 1e12 * (1 + s / 10), CONTRADICTS)])
def test_cost_claim_compares_flops_to_a_common_target_over_seeds(tmp_path, reach, verdict):
    _converged(tmp_path, reach=reach)
    e = judge(COST, Stored(tmp_path))
    assert e.verdict == verdict, e
    assert all(g.passed for g in e.gates)
    assert "target: greedy dev BLEU 20.00" in e.measured and "t-interval" in e.measured
    assert len([t for t in e.tests if "log FLOPs" in t.name]) == 2


def test_cost_claim_needs_seeds_enough_for_its_exact_test(tmp_path):
    """3 + 3 runs: the exact test cannot go below p = 0.1, so the seeds gate stops it."""
    _converged(tmp_path, seeds=3, reach=lambda m, s: (1 if m == "transformer" else 4) * 1e12)
    e = judge(COST, Stored(tmp_path))
    assert e.verdict == INCONCLUSIVE
    assert not next(g for g in e.gates if g.name == "seeds").passed


def test_readme_block_sets_each_model_converged_beside_its_matched_budget_row(tmp_path):
    from harness.report.readme_translation import translation_converged
    from tests.harness.report.test_claim_translation import SUITE as MATCHED_SUITE
    from tests.harness.report.test_claim_translation import _suite

    _suite(tmp_path, good, poor)  # the matched-budget demo suite
    text = translation_converged(tmp_path)
    assert "not measured yet (`tvr run translation-cpu-converged`" in text
    _converged(tmp_path, reach=lambda m, s: (1 if m == "transformer" else 4) * 1e12)
    text = translation_converged(tmp_path)
    assert "capped at 2.4e14 FLOPs; 8 runs, on" in text and "BLEU 20.00" in text
    assert f"`test_bleu`: beam search on the {len(REFS)} test verses" in text
    assert "training FLOPs;" in text  # every matched-budget run ran to the budget
    csv = tmp_path / MATCHED_SUITE / "results.csv"
    matched = pd.read_csv(csv)
    matched.loc[matched["runner"] == "translate", "stopped_by"] = "budget"
    matched.loc[matched.index[-1], "stopped_by"] = "patience"
    matched.to_csv(csv, index=False)
    assert "counted training FLOPs (patience ended 1 of its 6 runs sooner);" in \
        translation_converged(tmp_path)
    # with its plan the block says whether the suite has more to train
    done = pd.read_csv(tmp_path / CONVERGED / "results.csv")["point_id"].dropna()
    planned = [SimpleNamespace(point_id=p, subject="transformer", seed=0, digest=f"{i:012x}")
               for i, p in enumerate(done)]
    write_plan(tmp_path / CONVERGED, planned)
    assert "8 runs, every planned run finished, on" in translation_converged(tmp_path)
    write_plan(tmp_path / CONVERGED, [*planned, SimpleNamespace(
        point_id="transformer-s9", subject="transformer", seed=9, digest="f" * 12)])
    assert "8 runs so far, 1 planned or started still to finish, on" in \
        translation_converged(tmp_path)
    scored = pd.read_csv(tmp_path / CONVERGED / "results.csv")
    scored.assign(test_sentences=float("nan")).to_csv(tmp_path / CONVERGED / "results.csv",
                                                      index=False)  # diverged, or dev only
    assert "`converged`: seeds ended" in translation_converged(tmp_path)
    assert "`test_bleu`: beam" not in translation_converged(tmp_path)
    scored.to_csv(tmp_path / CONVERGED / "results.csv", index=False)
    rows = [line for line in text.splitlines() if line.startswith("| transformer")]
    assert [r.split("|")[2].strip() for r in rows] == ["matched budget", "converged"]
    # FLOPs to the target (BLEU 20, reached at twice `reach`) and to convergence
    assert rows[1].split("|")[-4].strip() == "2e+12"


def test_a_run_the_cap_ended_is_not_converged_by_the_rule(tmp_path):
    """A run stopped by the FLOP cap did not meet the stopping rule, whatever its curve's
    last steps look like (its row may still call it flat)."""
    _converged(tmp_path)
    path = tmp_path / CONVERGED / "results.csv"
    rows = pd.read_csv(path)
    rows.loc[(rows["model"] == "transformer") & (rows["seed"] == 2), "stopped_by"] = "budget"
    rows.to_csv(path, index=False)
    e = judge(QUALITY, Stored(tmp_path))
    (gate,) = [g for g in e.gates if g.name == "converged"]
    assert e.verdict == INCONCLUSIVE and not gate.passed and "transformer seed 2" in gate.detail
    # one definition wherever a count of converged seeds is shown
    assert "transformer 3 of 4 seeds stopped by the rule" in gate.detail
    assert "flat by the stopping rule: transformer 3 of 4 seeds" in e.measured
    table = table2(pd.read_csv(path).assign(study="table2")).set_index("model")
    assert table.loc["transformer", "converged"] == 3


def test_runs_stopped_while_dev_perplexity_still_fell_are_not_converged(tmp_path):
    """The rule reads greedy BLEU; a run whose dev perplexity still fell across the rule's
    last patience + 1 evaluations (a fitted trend, not noise) has not converged: the gate
    names it with its fall, and the verdict waits. A flat curve that only wobbles passes."""
    _converged(tmp_path)
    path = tmp_path / CONVERGED / "series.csv"
    curves = pd.read_csv(path)
    steps = curves.drop_duplicates(["point_id", "step"])[["point_id", "machine", "step"]]
    ppl = steps.assign(metric="dev_ppl", value=20.0 + (steps["step"] // 100 % 2))  # 20, 21..
    pd.concat([curves, ppl]).to_csv(path, index=False)
    assert judge(QUALITY, Stored(tmp_path)).verdict == SUPPORTS  # wobbling: flat
    ppl.loc[ppl["point_id"] == "transformer-s1", "value"] = 40.0 - ppl["step"] / 100
    pd.concat([curves, ppl]).to_csv(path, index=False)
    e = judge(QUALITY, Stored(tmp_path))
    (gate,) = [g for g in e.gates if g.name == "converged"]
    assert e.verdict == INCONCLUSIVE and e.ungated == SUPPORTS and not gate.passed
    fall = 1 - 32.0 / 38.0  # over the last 7 evaluations, fitted on log perplexity
    assert "dev perplexity still falling when the rule stopped them" in gate.detail
    found = float(gate.detail.split("transformer seed 1 (")[1].split("%")[0]) / 100
    assert found == pytest.approx(fall, abs=0.01)
    assert "seed 2" not in gate.detail and "patience on it" in gate.remedy
