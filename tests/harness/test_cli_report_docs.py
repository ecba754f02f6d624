"""`tvr report --docs` beside another project's files: a README.md next to --out whose
generated block tvr does not write (or that is not text) is left as it is with one note,
decided before REPORT.md is written; it once failed the report after REPORT.md was written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli

FOREIGN = "# other\n<!-- begin generated: foreign -->\nx\n<!-- end generated: foreign -->\n"


@pytest.fixture
def quick_report(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """REPORT.md written at once (the real one reads every suite: tested elsewhere)."""
    from harness.report import document

    written: list[str] = []

    def write_report(out: Path, suite: str | None) -> Path:
        written.append(str(out))
        (out / "REPORT.md").write_text("# report\n")
        return out / "REPORT.md"

    monkeypatch.setattr(document, "write_report", write_report)
    return written


@pytest.mark.parametrize("content", [FOREIGN.encode(), b"\xff\xfe not text"])
def test_a_foreign_readme_beside_out_is_left_with_one_note(tmp_path: Path, quick_report,
                                                           content: bytes) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (tmp_path / "README.md").write_bytes(content)
    result = CliRunner().invoke(cli, ["report", "--docs", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "README.md").read_bytes() == content
    notes = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(notes) == 1 and notes[0].startswith(f"note: {tmp_path / 'README.md'} left"), \
        result.stderr
    assert (out / "REPORT.md").is_file() and quick_report == [str(out)]


def test_our_blocks_beside_out_are_still_written(tmp_path: Path, quick_report) -> None:
    from harness.cli.docs import ours

    out = tmp_path / "results"
    out.mkdir()
    docs = tmp_path / "docs"
    docs.mkdir()
    page = "<!-- begin generated: suites -->\nold\n<!-- end generated: suites -->\n"
    (docs / "suites.md").write_text(page)
    (tmp_path / "README.md").write_text(FOREIGN)
    assert ours(tmp_path, cli)[0] == [docs / "suites.md"]
    result = CliRunner().invoke(cli, ["report", "--docs", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "| `smoke` |" in (docs / "suites.md").read_text()
    assert (tmp_path / "README.md").read_text() == FOREIGN
