"""No hand-typed numbers: README.md's generated blocks and everything `tvr report` writes
under results/ are exactly what the committed results regenerate."""

import shutil
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.report.document import write_report
from harness.report.readme import BLOCKS, MARKER, rewrite

ROOT = Path(__file__).resolve().parents[3]


def test_readme_blocks_regenerate_byte_identical_from_the_committed_results():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    names = [m["name"] for m in MARKER.finditer(text)]
    assert set(names) == set(BLOCKS), "every block is in the README, once"
    assert rewrite(text, ROOT / "results") == text, \
        "README.md is stale: run `tvr report` and commit README.md and results/"


def test_report_regenerates_results_byte_identical(tmp_path, monkeypatch):
    """Regenerated as a fresh clone on another machine would (a machine name no row has):
    the committed files never depend on which machine regenerates them."""
    monkeypatch.setenv("TVR_MACHINE", "a-machine-that-measured-nothing")
    out = tmp_path / "results"
    shutil.copytree(ROOT / "results", out, ignore=shutil.ignore_patterns("mlflow.db*", "*.png"))
    write_report(out)
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.suffix != ".png":
            committed = ROOT / "results" / path.relative_to(out)
            assert committed.exists(), f"tvr report writes {path.name}, which is not committed"
            assert path.read_bytes() == committed.read_bytes(), \
                f"results/{path.relative_to(out)} is stale: run `tvr report` and commit it"


def test_blocks_of_missing_results_name_the_suite_to_run(tmp_path):
    text = "<!-- begin generated: table1 -->\nold\n<!-- end generated: table1 -->\n"
    assert "not measured: run `tvr run table1`" in rewrite(text, tmp_path)


def test_an_unknown_block_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="unknown"):
        rewrite("<!-- begin generated: nope -->\n<!-- end generated: nope -->\n", tmp_path)
