"""Provenance to the commit: rows name the commit and the digest of uncommitted changes,
REPORT flags rows measured on a dirty tree, and each claim names the rows its rule read
with their machines, commits and command."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

from harness.report import document
from harness.report.claims import ledger
from harness.track import values
from tests.harness.report.claim_frames import path_rows, write_suite


def test_a_dirty_tree_is_named_by_the_digest_of_its_diff(monkeypatch):
    answers = {("rev-parse", "HEAD"): "abc123",
               ("status", "--porcelain", "--untracked-files=no"): " M harness/x.py",
               ("diff", "HEAD"): "diff --git a/harness/x.py b/harness/x.py\n+1"}
    monkeypatch.setattr(values, "_git", lambda *args: answers[args])
    facts = values.code_facts()
    digest = hashlib.sha256(answers[("diff", "HEAD")].encode()).hexdigest()[:16]
    assert facts == {"git_commit": "abc123", "git_dirty": "True", "git_diff_sha256": digest}
    answers[("status", "--porcelain", "--untracked-files=no")] = ""
    assert values.code_facts()["git_diff_sha256"] == ""


def test_report_flags_rows_measured_with_uncommitted_changes():
    rows = pd.DataFrame({"git_commit": ["abcdef1234567", "abcdef1234567", None],
                         "git_dirty": ["True", "False", None]})
    text = document._provenance(rows)
    assert "abcdef1234" in text and "1 of 3 rows measured with uncommitted changes" in text
    assert "1 rows without a recorded commit" in text
    assert "not recorded" in document._provenance(pd.DataFrame({"x": [1]}))


def test_each_claim_names_the_rows_it_read_with_machine_commit_and_command(tmp_path: Path):
    rows = [r | {"machine": "box", "git_commit": "c0ffee"} for r in path_rows()]
    rows[0]["git_commit"] = None  # one row from before rows carried their commit
    write_suite(tmp_path, "table1", rows)
    table = ledger(tmp_path)
    attention, lstm = table.loc[table["key"] == "path-length", "point_ids"].iloc[0]
    assert attention["filter"] == {"fit": "path", "mixer": "self-attention"}
    assert attention["suite"] == "table1" and attention["machines"] == ["box"]
    assert attention["commits"] == ["c0ffee", "not recorded"] and lstm["commits"] == ["c0ffee"]
    assert attention["command"] == "tvr run table1"
    assert len(attention["point_ids"]) + len(lstm["point_ids"]) == len(rows)


@pytest.mark.slow
def test_table2_names_only_the_runs_its_verdict_compares(tmp_path):
    """The tuned suite's superseded Transformer seed (an earlier search best, 10.50 test
    BLEU), archived in the committed results, put back beside the 3 seeds of its last
    recipe: the claim's provenance names the 3."""
    import shutil

    from harness.report.claim_translation import CLAIMS, SUITES
    from harness.report.superseded import restore
    from harness.report.translation import last_recipe

    committed = Path(__file__).resolve().parents[3] / "results"
    suite = "translation-cpu-tuned"
    for name in SUITES:  # the suites the claim reads, without figures and variants
        if (committed / name).is_dir():
            shutil.copytree(committed / name, tmp_path / name,
                            ignore=shutil.ignore_patterns("variants", "*.png"))
    assert restore(tmp_path, suite)  # the committed reference has one
    every = pd.read_csv(tmp_path / suite / "results.csv")
    trained = every[every["runner"] == "translate"]
    superseded = set(trained["point_id"]) - set(last_recipe(trained)["point_id"])
    assert superseded
    matched = [c for c in CLAIMS if c.key == "table2-matched-budget"]
    records = ledger(tmp_path, claims=matched)["point_ids"].iloc[0]
    named = {pid for r in records if r["suite"] == suite for pid in r["point_ids"]}
    assert named and not named & superseded


def test_report_shows_timings_from_before_the_loop_fix_only_with_their_caveat(tmp_path):
    """The GPU rematch rows predate the fix of the loop's O(n^2) backward: REPORT.md shows
    their 103x and 84x speed-ups only under a line saying so."""
    from harness.report.rematch import LOOP_FIX

    rows = pd.read_csv(Path(__file__).resolve().parents[3]
                       / "results/gpu/rematch-gpu-quick/results.csv")
    assert (rows["measured_at"].astype(str) < LOOP_FIX).all()
    lines = document.rematch_section(tmp_path, "rematch-gpu-quick", rows)
    assert lines[0].startswith(f"**{len(rows)} of {len(rows)} timings were measured before")
    fresh = rows.assign(measured_at="2099-01-01T00:00:00+00:00")
    assert not document.rematch_section(tmp_path, "s", fresh)[0].startswith("**")


def test_the_gpu_claim_names_the_fixed_token_rows_it_judges_not_every_gpu_row():
    from harness.report.claim_layers import CLAIMS

    committed = Path(__file__).resolve().parents[3] / "results"
    claim = [c for c in CLAIMS if c.key == "parallel-hardware"]
    records = ledger(committed, claims=claim)["point_ids"].iloc[0]
    fixed = pd.read_csv(committed / "gpu" / "fixed-tokens-gpu" / "results.csv")
    assert [r["suite"] for r in records] == ["gpu/fixed-tokens-gpu"]
    assert set(records[0]["point_ids"]) == set(fixed.loc[fixed["status"] == "ok", "point_id"])
