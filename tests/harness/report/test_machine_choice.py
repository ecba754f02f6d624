"""The reference one option away: a partial set of this machine's rows never hides a complete
reference; --machine picks one; `tvr compare` with no arguments says what it compares."""

import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.machines import MACHINE_ENV
from harness.results import append_row

REFERENCE = Path(__file__).resolve().parents[3] / "results"
COMMITTED = pd.read_csv(REFERENCE / "quick" / "results.csv", dtype=str, keep_default_na=False)
SIZES = COMMITTED.groupby("machine").size()
REF = str(SIZES.idxmax())  # the committed reference: the machine with the most quick rows


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def fresh_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The committed quick rows, plus this machine's rows of the LSTM only (as after
    `tvr run quick --only lstm`), made by copying reference rows under this machine's name."""
    monkeypatch.setenv(MACHINE_ENV, "mine")
    path = tmp_path / "quick" / "results.csv"
    path.parent.mkdir()
    shutil.copy(REFERENCE / "quick" / "results.csv", path)
    rows = pd.read_csv(path, dtype=str, keep_default_na=False)
    for row in rows[(rows["mixer"] == "lstm") & (rows["machine"] == REF)].head(18) \
            .to_dict("records"):
        append_row(path, {**row, "machine": "mine", "threads": "2"})
    return tmp_path


def test_table_shows_the_references_crossover_and_says_so(fresh_clone: Path) -> None:
    result = tvr("table", "--crossover", "--out", str(fresh_clone))
    assert result.exit_code == 0, result.output
    assert "attention" in result.output and "| gru " in result.output
    assert f"Measured on `{REF}` (the reference: this machine's rows cover 18 of its " \
        f"{SIZES[REF]}" in result.output
    mine = tvr("table", "--suite", "quick", "--out", str(fresh_clone), "--machine", "mine",
               "--format", "json")
    assert mine.exit_code == 0 and '"machine": "mine"' in mine.output
    bad = tvr("table", "--crossover", "--out", str(fresh_clone), "--machine", "nope")
    assert bad.exit_code == 2
    assert f"machines there: {', '.join(sorted(['mine', *SIZES.index]))}" in bad.output


def test_compare_without_arguments_names_the_thread_difference(fresh_clone: Path) -> None:
    result = tvr("compare", "--out", str(fresh_clone))
    assert result.exit_code == 2
    assert "differs: threads: A 1, B 2 on 18 points" in result.output
    assert "--any-conditions" in result.output
    anyway = tvr("compare", "--out", str(fresh_clone), "--any-conditions")
    assert anyway.exit_code == 0 and f"B/A with A = {REF}, B = mine" in anyway.output


def test_compare_without_rows_of_this_machine_says_what_to_run(tmp_path: Path,
                                                              monkeypatch) -> None:
    monkeypatch.setenv(MACHINE_ENV, "mine")
    (tmp_path / "quick").mkdir()
    shutil.copy(REFERENCE / "quick" / "results.csv", tmp_path / "quick" / "results.csv")
    result = tvr("compare", "--out", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].endswith(
        f"run `tvr run quick`, then `tvr compare` compares it with the reference `{REF}`")
