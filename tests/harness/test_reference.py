"""A fresh clone on a new machine: `make run`'s path measures here, beside the committed
reference rows, which stay untouched; the report and `tvr compare` name both machines."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import experiments
from harness.cli import cli
from harness.machines import MACHINE_ENV
from harness.results import read_results, results_path

REFERENCE = Path(__file__).resolve().parents[2] / "results"


def _text(frame: pd.DataFrame) -> pd.DataFrame:
    """Cells as text, empty for missing: a rewrite may turn a missing cell into ""."""
    return frame.astype(object).where(frame.notna(), "").astype(str)


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.slow
def test_new_machine_measures_beside_the_reference(tmp_path, monkeypatch):
    shutil.copytree(REFERENCE / "quick", tmp_path / "quick")
    path = results_path(tmp_path, "quick")
    reference = read_results(path)
    assert reference["machine"].nunique() == 1
    ref_machine = reference["machine"].iloc[0]
    monkeypatch.setenv(MACHINE_ENV, "fresh-clone")
    few = [p for p in experiments.points("quick") if p.seq_len == 32][:3]
    monkeypatch.setitem(experiments.SUITES, "quick", lambda: few)
    args = ("run", "quick", "--out", str(tmp_path), "--tracking-uri", "none",
            "--min-run-time", "0.01")

    first = tvr(*args)
    assert first.exit_code == 0, first.output
    assert "quick: 3 ok in" in first.output and "already done" not in first.output
    rows = read_results(path)
    mine = rows[rows["machine"] == "fresh-clone"]
    assert sorted(mine["point_id"]) == sorted(p.point_id for p in few)
    theirs = rows[rows["machine"] == ref_machine].reset_index(drop=True)
    pd.testing.assert_frame_equal(_text(theirs[reference.columns]), _text(reference))

    again = tvr(*args)  # a second run resumes: nothing left to measure
    assert "nothing run; 3 already done on this machine" in again.output, again.output
    assert len(read_results(path)) == len(rows)

    report = tvr("report", "--out", str(tmp_path), "--suite", "quick")
    assert report.exit_code == 0, report.output
    text = (tmp_path / "REPORT.md").read_text()
    # named, never "this machine": the committed report reads the same on every machine
    # the reference still covers the suite; both named, never "this machine"
    assert f"Measured on `{ref_machine}`" in text and "this machine" not in text
    assert "Also in this folder: `fresh-clone`" in text

    # --any-conditions: on a loaded machine the three points are flagged busy and a default
    # compare (like with like) refuses them; the busy rule has its own test
    compared = tvr("compare", "--out", str(tmp_path), "--points", "--any-conditions")
    assert compared.exit_code == 0, compared.output
    assert f"A = {ref_machine}, B = fresh-clone" in compared.output
    flops = [line for line in compared.output.splitlines() if "flops_fwd" in line]
    assert len(flops) == 3 and all(line.rstrip(" |").endswith("1") for line in flops)
    unknown = tvr("compare", "nobody", "--out", str(tmp_path))
    assert unknown.exit_code == 2 and "no rows of machine 'nobody'" in unknown.output
