"""`make run` writes the user's report under results/ and leaves the project's pages alone:
README.md and docs/ are tracked, and a report step that rewrote their generated blocks left
every later row of the user's run recorded as measured on a dirty tree. `make docs` is the
command that refreshes them."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from click.testing import CliRunner

from harness.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def recipe(target: str) -> list[str]:
    """The commands of a Makefile target, as `make` runs them."""
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    body = make.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in body.splitlines()[1:] if line.startswith("\t")]


def _tvr(line: str) -> list[str]:
    words = shlex.split(line)
    assert words[0] == "$(BIN)/tvr", line
    return words[1:]


def _clone(tmp_path: Path) -> dict[Path, bytes]:
    """A scratch copy of the project's pages and of two suites' committed results; the bytes
    of every page."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    for suite in ("identities", "threads"):
        shutil.copytree(ROOT / "results" / suite, tmp_path / "results" / suite,
                        ignore=shutil.ignore_patterns("*.png", ".*.lock"))
    return {p: p.read_bytes() for p in [tmp_path / "README.md", *(tmp_path / "docs").glob("*")]}


def test_make_runs_report_step_leaves_readme_and_docs_as_they_are(tmp_path, monkeypatch):
    pages = _clone(tmp_path)
    (step,) = [line for line in recipe("run") if " report" in line]
    monkeypatch.chdir(tmp_path)  # make runs in the clone's root: --out is results/
    result = CliRunner().invoke(cli, _tvr(step))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "results" / "REPORT.md").is_file()
    assert (tmp_path / "results" / "threads" / "scaling.md").is_file()
    changed = [str(p.relative_to(tmp_path)) for p, b in pages.items() if p.read_bytes() != b]
    assert changed == [], f"make run rewrote {changed}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "docs", "results"]


def test_make_docs_refreshes_the_pages_generated_blocks(tmp_path, monkeypatch):
    pages = _clone(tmp_path)
    (step,) = recipe("docs")
    assert _tvr(step) == ["report", "--docs"]
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, _tvr(step))
    assert result.exit_code == 0, result.output
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert readme.encode() != pages[tmp_path / "README.md"]  # from two suites' rows only
    assert re.search(r"`quick`: not\s+measured:\s+run\s+`tvr\s+run\s+quick`", readme)
    assert "README.md" in result.output and (tmp_path / "results" / "REPORT.md").is_file()


def test_docs_with_one_suite_or_machine_is_refused(tmp_path):
    result = CliRunner().invoke(cli, ["report", "--docs", "--suite", "identities", "--out",
                                      str(tmp_path)])
    assert result.exit_code == 2 and "without --suite and --machine" in result.output
