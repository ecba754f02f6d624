"""`tvr table`'s compact default: each exponent "2.00 ± 0.00" in one cell, few columns;
--wide (and csv) keep every column."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli

REFERENCE = str(Path(__file__).resolve().parents[3] / "results")


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["table1", "quick"])
def test_table_is_compact_by_default_and_wide_on_request(suite: str) -> None:
    compact = CliRunner().invoke(cli, ["table", "--suite", suite, "--out", REFERENCE])
    wide = CliRunner().invoke(cli, ["table", "--suite", suite, "--out", REFERENCE, "--wide"])
    assert compact.exit_code == 0 and wide.exit_code == 0, compact.output + wide.output
    lines = compact.output.splitlines()  # a table wider than 160 comes in parts
    at = next(i for i, line in enumerate(lines) if "flops in n" in line)
    head, wide_head = lines[at], wide.output.splitlines()[0]
    assert "_r2" not in compact.output and "_se" not in compact.output
    assert " ± " in lines[at + 2]
    assert head.count("|") <= 12 < wide_head.count("|") and "flops_n_r2" in wide_head
    assert len(head) < 0.6 * len(wide_head)
    latex = CliRunner().invoke(cli, ["table", "--suite", suite, "--out", REFERENCE,
                                     "--format", "latex"])
    assert latex.exit_code == 0 and "r2" not in latex.output and "±" in latex.output
    csv = CliRunner().invoke(cli, ["table", "--suite", suite, "--out", REFERENCE,
                                   "--format", "csv"])
    assert "flops_n_r2" in csv.output.splitlines()[0]
