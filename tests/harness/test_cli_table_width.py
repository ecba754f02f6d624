"""`tvr table` fits a terminal by default: no line over 160 characters (Table 1 was 321 wide
at its widest line), a wide table in parts each led by its first column, long notes wrapped;
--wide keeps one table with every column."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli

REFERENCE = str(Path(__file__).resolve().parents[2] / "results")


@pytest.mark.parametrize("args", [[], ["--crossover"], ["--suite", "quick"]])
def test_no_line_is_over_160_characters_by_default(args: list[str]) -> None:
    default = CliRunner().invoke(cli, ["table", "--out", REFERENCE, *args])
    wide = CliRunner().invoke(cli, ["table", "--out", REFERENCE, "--wide", *args])
    assert default.exit_code == 0 and wide.exit_code == 0, default.output + wide.output
    assert max(map(len, default.output.splitlines())) <= 160
    heads = [line for line in default.output.splitlines() if line.startswith("| ")]
    first = heads[0].split("|")[1]
    tables = [line for line in heads if line.split("|")[1] == first]  # each part's header
    columns = [c.strip() for line in tables for c in line.split("|")[2:-1]]
    assert len(columns) == len(set(columns))  # each column once, in one part
    # --wide: one table, every column (the standard errors, r², fit ranges) in it
    wide_head = wide.output.splitlines()[0]
    assert wide_head.count("|") - 1 >= len(columns) + 1


def test_table1_comes_as_the_papers_columns_then_the_measured_ones() -> None:
    result = CliRunner().invoke(cli, ["table", "--out", REFERENCE])
    parts = [line for line in result.output.splitlines() if line.startswith("| layer ")]
    assert len(parts) == 2, result.output
    assert "complexity" in parts[0] and "flops in n" not in parts[0]
    assert "flops in n" in parts[1] and "memory in n" in parts[1]
    wide = CliRunner().invoke(cli, ["table", "--out", REFERENCE, "--wide"])
    assert max(map(len, wide.output.splitlines())) > 160  # as wide as the table is
