"""`tvr compare` on any suite: identities (no time metric of its own) between two machines
gives a table, and when nothing can be compared the message says what differs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from harness.cli import cli
from harness.report.machines import unmatched
from harness.results import read_results, results_path

REFERENCE = Path(__file__).resolve().parents[3] / "results"


def _two_machines(tmp_path: Path, **changes: object) -> str:
    """identities' committed rows and the same points as machine `other`; returns the
    reference's machine."""
    shutil.copytree(REFERENCE / "identities", tmp_path / "identities")
    path = results_path(tmp_path, "identities")
    ref = read_results(path)
    other = ref.assign(machine="other", wall_s=ref["wall_s"] * 2, **changes)
    pd.concat([ref, other], ignore_index=True).to_csv(path, index=False)
    return str(ref["machine"].iloc[0])


def test_compare_identities_between_two_machines_gives_a_table(tmp_path: Path) -> None:
    ref = _two_machines(tmp_path)
    done = CliRunner().invoke(cli, ["compare", ref, "other", "--out", str(tmp_path),
                                    "--suite", "identities"])
    assert done.exit_code == 0, done.output
    assert f"A = {ref}, B = other" in done.output
    wall = next(line for line in done.output.splitlines() if "| wall_s" in line)
    cells = [c.strip() for c in wall.strip(" |").split("|")]
    assert cells[:3] == ["identities", "wall_s", "6"] and float(cells[3]) == 2.0
    assert any("| equivariance_error" in line for line in done.output.splitlines())
    per_point = CliRunner().invoke(cli, ["compare", ref, "other", "--out", str(tmp_path),
                                         "--points"])
    assert per_point.exit_code == 0 and per_point.output.count("| wall_s") == 6


def test_nothing_comparable_says_what_differs(tmp_path: Path) -> None:
    ref = _two_machines(tmp_path, threads=4)
    done = CliRunner().invoke(cli, ["compare", ref, "other", "--out", str(tmp_path)])
    assert done.exit_code == 2
    assert "6 ok points in common, none measured alike: threads: A 2, B 4 on 6 points" \
        in done.output and "--any-conditions" in done.output
    anyway = CliRunner().invoke(cli, ["compare", ref, "other", "--out", str(tmp_path),
                                      "--any-conditions"])
    assert anyway.exit_code == 0, anyway.output


def test_unmatched_names_missing_suites_and_points() -> None:
    a = pd.DataFrame({"suite": ["quick"], "point_id": ["p"], "status": ["ok"]})
    assert unmatched(a, a.assign(suite="smoke")) == "no suite in common (A: quick; B: smoke)"
    assert unmatched(a, a.assign(point_id="q")).startswith("no point id in common")
    assert unmatched(a, a.assign(status="error")) == "1 points in common, none ok on both"
