"""Our Transformer against the toolkit trained with its recipe: the gap with its interval,
and dev BLEU under each side's length-penalty rule."""

from __future__ import annotations

import math

import pytest
from sacrebleu.metrics import BLEU

from harness.report import toolkit_gap
from harness.report.evidence import Missing
from tests.harness.report.claim_frames import write_suite
from tests.harness.report.test_claim_translation import REFS, good, poor, write_lines

DATA = {"corpus_split": "abc", "vocab": 4000, "max_tokens": 80}
BY_ALPHA = "0:10;0.2:10.5;0.6:11;1:12"


def _folder(out, toolkit_seeds=1, split="abc"):
    suite, model = toolkit_gap.OURS
    write_lines(out / suite / "hyp/refs.txt", REFS)
    rows = []
    for seed in range(3):
        write_lines(out / suite / f"hyp/t{seed}.txt", poor(seed))
        rows.append({"runner": "translate", "model": model, "seed": seed, "study": "table2",
                     "test_hypotheses": f"hyp/t{seed}.txt", "test_references": "hyp/refs.txt",
                     "test_bleu": BLEU().corpus_score(poor(seed), [REFS]).score,
                     "dev_bleu": 12.0, "dev_bleu_by_alpha": BY_ALPHA, "alpha_chosen": 1.0,
                     "steps_run": 3470, **DATA})
    write_suite(out, suite, rows)
    anchor = []
    for seed in range(toolkit_seeds):
        write_lines(out / "translation-anchor" / f"hyp/j{seed}.txt", good(seed))
        anchor.append({"runner": "joeynmt", "model": toolkit_gap.THEIRS, "seed": 42 + seed,
                       "toolkit": "joeynmt", "toolkit_version": "2.3.0", "alpha": 0.6,
                       "test_hypotheses": f"hyp/j{seed}.txt", "dev_bleu": 13.0,
                       "test_bleu": BLEU().corpus_score(good(seed), [REFS]).score,
                       "updates": 3497 if seed == 0 else 3470, "split": split, "bpe": 4000,
                       "max_tokens": 80, "recipe_trial": "older" if seed == 0 else "newer"})
    write_suite(out, "translation-anchor", anchor)


@pytest.mark.parametrize("seeds", [1, 3])
def test_the_gap_has_a_clustered_interval_and_says_whose_seeds_it_holds(tmp_path, seeds):
    _folder(tmp_path, seeds)
    g = toolkit_gap.gap(tmp_path)
    assert (g["seeds_ours"], g["seeds_theirs"]) == (3, seeds)
    assert g["test_bleu_theirs"] > g["test_bleu_ours"] and g["p"] < 0.05
    assert "bootstrap 95% interval" in g["detail"]
    assert g["dev_ours_at_their_alpha"] == 11.0 and g["alpha_theirs"] == 0.6
    text = toolkit_gap.text(tmp_path)
    assert ("(3 seeds, 3,470 updates) against" in text) and \
        ("(1 seed, 3,497 updates)" in text if seeds == 1 else
         "(3 seeds, 3,470-3,497 updates; its seeds retrace 2 trials of the search" in text)
    assert ("its run paired with each of our seeds" in text) == (seeds == 1)
    text = toolkit_gap.text(tmp_path)
    assert ("not its own" in text) == (seeds == 1)


def test_a_toolkit_run_on_other_data_is_not_compared(tmp_path):
    _folder(tmp_path, split="other")
    with pytest.raises(Missing, match="scripts/anchor --recipe"):
        toolkit_gap.gap(tmp_path)


def test_dev_bleu_at_an_alpha_reads_the_rows_grid():
    assert toolkit_gap.at_alpha(BY_ALPHA, 0.6) == 11.0
    assert math.isnan(toolkit_gap.at_alpha(BY_ALPHA, 0.8))


def test_the_toolkit_under_our_rule_is_read_from_its_cross_checks(tmp_path):
    """crosscheck/<run>.json of the searched runs' weights, decoded with our beam search
    under our alpha grid, give the toolkit at our rule (their mean, how many runs); another
    model's cross-check, one without the grid and one cut short are not read."""
    import json

    _folder(tmp_path)
    folder = tmp_path / "translation-anchor" / "crosscheck"
    folder.mkdir()
    check = {"joeynmt_own_beam": {"bleu": 13.62}, "beam4": {"bleu": 13.61, "alpha": 0.6},
             "beam4_our_rule": {"bleu": 14.1, "alpha": 1.2}}
    (folder / "joeynmt-rnn-abc.json").write_text(json.dumps(check))
    (folder / f"{toolkit_gap.THEIRS}-old.json").write_text(json.dumps(
        {"beam4": {"bleu": 13.0}}))
    (folder / f"{toolkit_gap.THEIRS}-cut.json").write_text('{"beam4_our_rule": {"bl')
    assert "not measured on these runs" in toolkit_gap.text(tmp_path)
    (folder / f"{toolkit_gap.THEIRS}-abc.json").write_text(json.dumps(check))
    (folder / f"{toolkit_gap.THEIRS}-def.json").write_text(json.dumps(
        check | {"beam4_our_rule": {"bleu": 14.3, "alpha": 1.0}}))
    text = toolkit_gap.text(tmp_path)
    assert "(2 of its 1 runs;" in text
    assert "dev BLEU 14.20 at the alpha chosen on dev (1.2, 1)" in text
    assert "where its own gave 13.62" in text
