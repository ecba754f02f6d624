"""Table 3 judged from translation, on made-up dev hypotheses: the tuned suite's variations
against translation-cpu-converged's Transformer (the base), decided on dev BLEU by the
clustered sentence tests, each verdict and each gate's failure; the quick suite as the
fallback, too small to judge."""

from __future__ import annotations

import pandas as pd
import pytest
from sacrebleu.metrics import BLEU

import experiments
from harness.files import write_lines
from harness.report import claim_table3, claim_translation, readme_translation, sentence_tests
from harness.report.claim_table3 import SUITE, TUNED_SUITE
from harness.report.claim_translation import CONVERGED
from harness.report.evidence import Stored, gated
from harness.report.rulebook import TRAINED_QUALITY, gates_of, label
from harness.report.verdicts import CONTRADICTS, INCONCLUSIVE, SUPPORTS
from tests.harness.report.claim_frames import write_suite
from tests.harness.report.test_claim_translation import REFS, good, good_too, poor

ALPHAS = "0.0;0.2;0.4;0.6;0.8;1.0;1.2;1.4;1.6;1.8;2.0"
RULE = {"alphas": ALPHAS, "recipe": "translation-cpu-tune", "patience": 6, "source_eos": True,
        "budget_flops": 2.4e14, "peak_lr": 8e-4, "steps_run": 9000, "train_pairs": 28000}


@pytest.fixture(autouse=True)
def _fewer_resamples(monkeypatch):
    monkeypatch.setattr(sentence_tests, "CLUSTERED_SAMPLES", 1000)


def _row(out, suite, name, make, seed, **values) -> dict:
    """A trained Transformer's row of `suite` with its saved dev hypotheses make(seed)."""
    hyps, path = make(seed), f"hypotheses/{name}-{seed}.dev.txt"
    write_lines(out / suite / path, hyps)
    return {"runner": "translate", "model": "transformer", "seed": seed, "dev_ppl": 100.0 + seed,
            "dev_bleu": BLEU().corpus_score(hyps, [REFS]).score, "dev_hypotheses": path,
            "dev_references": "hypotheses/refs.dev.ref.txt", "dev_sentences": len(REFS),
            "n_params": 1000, "stopped_by": "patience", **RULE} | values


def _baselines(out, suite, bleu=(0.01, 0.02, 0.03)) -> list[dict]:
    write_lines(out / suite / "hypotheses" / "refs.dev.ref.txt", REFS)
    return [{"runner": b, "model": b, "dev_bleu": v}
            for b, v in zip(claim_translation.BASELINES, bleu, strict=True)]


def converged(out, make=good, seeds=4, **values) -> None:
    """translation-cpu-converged: its Transformer (4 seeds), the base; an attentional LSTM
    beside it, which Table 3 does not read."""
    rows = _baselines(out, CONVERGED) + [_row(out, CONVERGED, "transformer", make, s, **values)
                                         for s in range(seeds)]
    rows.append(_row(out, CONVERGED, "lstm", poor, 0) | {"model": "lstm-attention"})
    write_suite(out, CONVERGED, rows)


def tuned(out, make, study="table3-B", knob="d_k", value=16, seeds=3, baselines=None,
          **values) -> None:
    """translation-table3-tuned: one variation (`knob` = value, hypotheses make(seed))."""
    rows = _baselines(out, TUNED_SUITE, *([baselines] if baselines else [])) + [
        _row(out, TUNED_SUITE, study, make, s, study=study, **{knob: value} | values)
        for s in range(seeds)]
    write_suite(out, TUNED_SUITE, rows)


def judged(out, rule=claim_table3.key_size):
    """The rule's evidence as the ledger shows it: behind its kind's gates."""
    return gated(rule(Stored(out)), gates_of(TRAINED_QUALITY))


def failed(evidence) -> dict:
    return {g.name: g for g in evidence.gates if not g.passed}


@pytest.mark.parametrize("base, variant, ppl, verdict", [
    (good, poor, 120.0, SUPPORTS),  # lower dev BLEU, separated by both sentence tests
    (good, poor, 80.0, SUPPORTS),  # perplexity reported, not deciding
    (good, good_too, 100.0, INCONCLUSIVE),  # not separated
    (poor, good, 120.0, CONTRADICTS),  # the smaller d_k scores higher, separated
])
def test_key_size_against_the_converged_base(tmp_path, base, variant, ppl, verdict):
    converged(tmp_path, base)
    tuned(tmp_path, variant, dev_ppl=ppl)
    evidence = judged(tmp_path)
    assert evidence.verdict == verdict, failed(evidence)
    assert not failed(evidence) or verdict == INCONCLUSIVE and not evidence.ungated
    assert evidence.points.startswith(f"{TUNED_SUITE}: ") and CONVERGED in evidence.points
    assert "base: dev BLEU" in evidence.measured and "d_k=16 vs base" in evidence.measured
    deciding = [t for t in evidence.tests if "clustered" in t.name]
    assert len(deciding) == 2 and all(f"{len(REFS)} sentences x 4 seeds kept together" in
                                      t.detail for t in deciding)
    assert any("dev perplexity per seed (reported)" in t.name for t in evidence.tests)
    # the base is the converged suite's Transformer only, not its LSTM
    assert "4 seeds" in evidence.measured.split(";")[0]
    assert "lstm" not in evidence.measured


def test_three_seeds_per_variation_pass_the_seeds_gate_and_two_do_not(tmp_path):
    converged(tmp_path)
    tuned(tmp_path, poor)
    (seeds,) = [g for g in judged(tmp_path).gates if g.name == "seeds"]
    assert seeds.passed and "d_k=16 3" in seeds.detail
    tuned(tmp_path, poor, seeds=2)
    evidence = judged(tmp_path)
    assert evidence.verdict == INCONCLUSIVE and evidence.ungated == SUPPORTS
    assert set(failed(evidence)) == {"seeds"}


def test_a_difference_the_seeds_do_not_order_alike_holds_the_verdict(tmp_path):
    """The sentence tests separate the arms, yet one base seed scores below every seed of
    the smaller d_k: as in Table 2, the seeds do not order the two alike, so no verdict."""
    converged(tmp_path)
    tuned(tmp_path, poor)
    assert judged(tmp_path).verdict == SUPPORTS
    path = tmp_path / CONVERGED / "results.csv"
    rows = pd.read_csv(path)
    variant = pd.read_csv(tmp_path / TUNED_SUITE / "results.csv")
    lowest = variant.loc[variant["runner"] == "translate", "dev_bleu"].min()
    rows.loc[(rows["model"] == "transformer") & (rows["seed"] == 2), "dev_bleu"] = lowest - 1
    rows.to_csv(path, index=False)
    evidence = judged(tmp_path)
    assert evidence.verdict == INCONCLUSIVE and evidence.ungated == SUPPORTS
    assert set(failed(evidence)) == {"seed order"}
    assert failed(evidence)["seed order"].detail == (
        f"d_k=16 vs base, dev BLEU per seed: the better arm's lowest seed {lowest - 1:.3g}, "
        f"the other's highest {variant['dev_bleu'].max():.3g}")


def test_models_below_the_retrieval_baseline_did_not_learn(tmp_path):
    converged(tmp_path)
    tuned(tmp_path, poor, baselines=(0.01, 0.02, 99.0))
    evidence = judged(tmp_path)
    assert evidence.verdict == INCONCLUSIVE and "baselines" in failed(evidence)
    assert "retrieval 99.00" in evidence.measured
    assert "did not learn the task at this scale" in evidence.measured


@pytest.mark.parametrize("change, named", [
    ({"alphas": None}, "alphas=default"),  # decoded at one length penalty, the base by a grid
    ({"patience": 4}, "patience=4"),  # another stopping rule
    ({"source_eos": False}, "source_eos=False"),  # the base's sources end in EOS, these not
    ({"dev_references": "hypotheses/other.dev.ref.txt"}, "other dev references"),
])
def test_arms_scored_or_trained_differently_are_not_compared(tmp_path, change, named):
    converged(tmp_path)
    write_lines(tmp_path / TUNED_SUITE / "hypotheses" / "other.dev.ref.txt",
                [r + " amen" for r in REFS])
    tuned(tmp_path, poor, **change)
    evidence = judged(tmp_path)
    assert evidence.verdict == INCONCLUSIVE
    assert named in failed(evidence)["same dev scoring"].detail


def test_a_seed_stopped_by_the_cap_holds_the_verdict(tmp_path):
    converged(tmp_path)
    tuned(tmp_path, poor, stopped_by="budget")
    evidence = judged(tmp_path)
    assert evidence.verdict == INCONCLUSIVE and set(failed(evidence)) == {"converged"}
    # the remedy names what settles it, not a variant folder the claim never reads
    assert "the claim does not read variants" in failed(evidence)["converged"].remedy


@pytest.mark.parametrize("params, make, verdict", [
    (2000, good, SUPPORTS),  # larger and higher dev BLEU
    (2000, poor, CONTRADICTS),  # larger and lower
    (500, poor, SUPPORTS),  # smaller and lower
])
def test_bigger_models(tmp_path, params, make, verdict):
    converged(tmp_path, poor if make is good else good)
    tuned(tmp_path, make, study="table3-C", knob="d_model", value=192, n_params=params)
    assert judged(tmp_path, claim_table3.bigger).verdict == verdict


def test_dropout_and_single_head_are_judged_against_the_base(tmp_path):
    converged(tmp_path, dropout=0.06, attn_dropout=0.06, n_heads=4)
    tuned(tmp_path, poor, study="table3-D", knob="dropout", value=0.0, attn_dropout=0.0)
    evidence = judged(tmp_path, claim_table3.dropout)
    assert evidence.verdict == SUPPORTS and "dropout=0, attn_dropout=0 vs base" in \
        evidence.measured
    tuned(tmp_path, good_too, study="table3-A", knob="n_heads", value=1)
    evidence = judged(tmp_path, claim_table3.heads)
    assert evidence.verdict == INCONCLUSIVE and "n_heads=1 vs base" in evidence.measured


def _same(seed: int) -> list[str]:
    """Every seed's hypotheses alike: two arms of them differ by 0 in every resample."""
    return good(0)


@pytest.mark.parametrize("base, make, verdict", [
    (_same, _same, SUPPORTS),  # the interval is [0, 0]
    (good, good_too, INCONCLUSIVE),  # difference 0, but 40 verses leave it +-1 BLEU wide
    (good, poor, CONTRADICTS),  # far apart and separated
])
def test_learned_positions(tmp_path, base, make, verdict):
    converged(tmp_path, base)
    tuned(tmp_path, make, study="table3-E", knob="pos_encoding", value="learned")
    evidence = judged(tmp_path, claim_table3.learned_positions)
    assert evidence.verdict == verdict, failed(evidence)
    assert "pos_encoding=learned vs base" in evidence.measured


def test_the_quick_suite_is_the_fallback_and_too_small_to_judge(tmp_path):
    """Without tuned rows the quick suite (its own base) is shown, inconclusive, its scale
    gate naming the tuned suite's command; once the tuned suite has rows they are judged."""
    rows = _baselines(tmp_path, SUITE) + [
        _row(tmp_path, SUITE, s, m, seed, study=s, d_k=d_k, steps_run=600)
        for s, m, d_k in (("table3-base", good, 24), ("table3-B", poor, 8))
        for seed in range(3)]
    write_suite(tmp_path, SUITE, rows)
    quick = judged(tmp_path)
    assert quick.verdict == INCONCLUSIVE and quick.ungated == SUPPORTS
    assert set(failed(quick)) == {"scale"}
    assert f"tvr run {TUNED_SUITE}" in failed(quick)["scale"].remedy
    assert quick.points.startswith(f"{SUITE}: ")
    shown = label(quick.verdict, quick.scope)
    assert shown.startswith(f"{INCONCLUSIVE} ({SUITE}, a smoke test too small to judge: ")
    converged(tmp_path)
    tuned(tmp_path, poor)
    now = judged(tmp_path)
    assert now.verdict == SUPPORTS and now.points.startswith(TUNED_SUITE)
    assert label(now.verdict, now.scope).startswith(
        "supports at 0.0M parameters, 28k training pairs, 9,000 updates, trained until "
        "Table 2's stopping rule (patience on greedy dev BLEU)")


def test_dev_bleu_off_its_floor_and_the_scope_names_the_budget(tmp_path):
    converged(tmp_path)
    tuned(tmp_path, poor)
    evidence = judged(tmp_path)
    (rng,) = [g for g in evidence.gates if g.name == "range"]
    assert rng.passed and "dev BLEU" in rng.detail
    assert "3-4 seeds per variation" in evidence.scope
    assert "peak learning rate 0.0008 for every variation" in evidence.scope

    def nothing(seed: int) -> list[str]:
        return ["qqq"] * len(REFS)

    converged(tmp_path, nothing)
    tuned(tmp_path, nothing)
    assert "every arm at the floor" in failed(judged(tmp_path))["range"].detail


def test_the_tuned_suite_decodes_and_stops_as_the_converged_base():
    """What the comparison needs of the two suites: the same dev decoding (the length
    penalty chosen on dev from one grid), recipe and stopping rule."""
    def options(suite):
        return {(p.options.alphas, p.options.beam, p.options.alpha, p.options.final_sentences,
                 p.options.patience, p.options.budget_flops, p.options.recipe)
                for p in experiments.points(suite) if p.runner == "translate"
                and p.subject == "transformer"}
    assert options(TUNED_SUITE) == options(CONVERGED)


def test_the_docs_table_shows_the_tuned_suite_over_seeds_beside_its_base(tmp_path):
    """docs/translation.md's Table 3 block: the smoke test alone until the tuned suite has a
    trained variation; then each setting over its seeds (the base's 4 from the converged
    suite, the variation's 3), and each claim's verdict with its scale."""
    rows = _baselines(tmp_path, SUITE) + [
        _row(tmp_path, SUITE, s, good, 0, study=s, d_k=d_k, steps_run=600, wall_s=5.0)
        for s, d_k in (("table3-base", 24), ("table3-B", 8))]
    write_suite(tmp_path, SUITE, rows)
    converged(tmp_path, d_model=128, n_heads=4)
    before = readme_translation.translation_table3(tmp_path)
    assert before.startswith(f"`{TUNED_SUITE}` has no trained variation yet")
    assert "| B " in before and "seeds" not in before.split("smoke test")[-1]
    tuned(tmp_path, poor, d_model=128, n_heads=4, steps_run=1000.4, train_flops=3e13)
    text = readme_translation.translation_table3(tmp_path)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header[:2] == ["variation", "d_model"] and "seeds" in header
    by_variation = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
                    for line in table[1:3]}
    assert set(by_variation) == {"base", "B"}
    assert by_variation["base"][header.index("seeds")] == "4"
    assert by_variation["B"][header.index("seeds")] == "3"
    assert by_variation["B"][header.index("d_k")] == "16"
    # the cost beside the quality: the paper's "train steps" (updates), and counted FLOPs
    assert by_variation["B"][header.index("updates")] == "1000"
    assert by_variation["B"][header.index("train FLOPs")] == "3e+13"
    verdicts = text.split("The ledger's verdicts")[1].split("The smoke test")[0]
    (b_verdict,) = [line for line in verdicts.splitlines() if line.startswith("| B ")]
    assert "| supports at " in b_verdict and b_verdict.rstrip(" |").endswith("| none")
    assert "(3 variation runs, on" in text  # no plan: nothing said of runs to come
    assert "The smoke test, `tvr run translation-table3-quick` (5 points" in text
    assert "Diverged" not in text
    tuned(tmp_path, poor, d_model=128, n_heads=4, seeds=4)
    rows = (tmp_path / TUNED_SUITE / "results.csv").read_text().splitlines()
    assert rows[0].startswith("status,") and rows[-1].startswith("ok,")
    rows[-1] = "diverged," + rows[-1].removeprefix("ok,")  # seed 3: a result with no BLEU
    (tmp_path / TUNED_SUITE / "results.csv").write_text("\n".join(rows) + "\n")
    text = readme_translation.translation_table3(tmp_path)
    assert "Diverged, so in no mean: B seed 3." in text and "(4 variation runs, on" in text
    (b_row,) = [line for line in text.split("The ledger's verdicts")[0].splitlines()
                if line.startswith("| B ")]
    assert b_row.split("|")[header.index("seeds") + 1].strip() == "3"


def test_each_claim_moves_to_the_tuned_suite_as_its_own_rows_land(tmp_path):
    """The tuned suite has trained (B) only: B is judged there, (E) still on the smoke test,
    too small to judge, never "not measured" while the tuned suite is under way."""
    rows = _baselines(tmp_path, SUITE) + [
        _row(tmp_path, SUITE, s, m, seed, study=s, steps_run=600, **knob)
        for s, m, knob in (("table3-base", good, {"d_k": 24}), ("table3-B", poor, {"d_k": 8}),
                           ("table3-E", good_too, {"pos_encoding": "learned"}))
        for seed in range(3)]
    write_suite(tmp_path, SUITE, rows)
    converged(tmp_path)
    tuned(tmp_path, poor)
    assert judged(tmp_path).points.startswith(TUNED_SUITE)
    positions = judged(tmp_path, claim_table3.learned_positions)
    assert positions.points.startswith(f"{SUITE}: ") and "scale" in failed(positions)


def test_report_heads_the_tuned_suites_baselines_as_baselines_not_table2(tmp_path):
    """REPORT.md's section of a Table 3 suite: its baselines' table is not headed Table 2."""
    from harness.report.document import translation_section
    from harness.results import load_results

    tuned(tmp_path, poor, d_model=128, n_heads=4)
    df = load_results(tmp_path, [TUNED_SUITE])
    df.loc[df["model"].isin(claim_translation.BASELINES), "study"] = "table2"  # as a run writes
    heads = [line for line in translation_section(tmp_path, TUNED_SUITE, df)
             if line.startswith("### ")]
    assert heads[0] == "### The trivial baselines on the same verses"
    assert not any("Table 2" in h for h in heads)
