"""A slow `tvr claims` (a cold cache of Table 2's sentence-level tests: about 100 s) shows a
bar on stderr naming the claim being judged; a quick one shows nothing; stdout stays clean."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner

from harness.cli import cli
from harness.report import claims
from harness.report.evidence import Claim, Missing


def _claim(key: str, seconds: float) -> Claim:
    def judge(stored):
        time.sleep(seconds)
        raise Missing("identities", "no results for suite identities")
    return Claim(key, f"claim {key}", "identities", "", judge)


def test_a_slow_pass_shows_the_claim_being_judged_on_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(claims, "PROGRESS_AFTER", 0.2)
    table = claims.ledger(tmp_path, [_claim("quick-one", 0), _claim("slow-one", 1.5)],
                          progress=True)
    out, err = capsys.readouterr()
    assert len(table) == 2 and out == ""
    # drawn while the slow claim ran (the ticker), not only when it ended
    assert "slow-one (identities)" in err and "1/2" in err


def test_a_quick_pass_shows_nothing(tmp_path, capsys):
    claims.ledger(tmp_path, [_claim("a", 0), _claim("b", 0)], progress=True)
    assert capsys.readouterr() == ("", "")


def test_claims_json_stays_clean_while_the_bar_shows(tmp_path, monkeypatch):
    monkeypatch.setattr(claims, "PROGRESS_AFTER", 0.2)
    monkeypatch.setattr(claims, "all_claims", lambda: [_claim("slow-one", 1.2)])
    result = CliRunner().invoke(cli, ["claims", "--format", "json", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [r["key"] for r in json.loads(result.stdout)] == ["slow-one"]
    assert "slow-one" in result.stderr
