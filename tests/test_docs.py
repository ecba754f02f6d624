"""README.md and docs/*.md: every relative link resolves, to a file and, after a #, to a
heading of it as GitHub names its anchors. (That the generated blocks in them are up to date
is tests/harness/report/test_readme.py's.)"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote

from markdown_it import MarkdownIt

from harness.cli.docs import documents

ROOT = Path(__file__).resolve().parents[1]
PARSER = MarkdownIt("commonmark").enable("table")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger, which has no Python port):
    lower case, punctuation other than - and _ dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def _headings_and_links(path: Path) -> tuple[set[str], list[str]]:
    anchors: set[str] = set()
    links: list[str] = []
    tokens = PARSER.parse(path.read_text(encoding="utf-8"))
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            text = "".join(c.content for c in tokens[i + 1].children or []
                           if c.type in ("text", "code_inline"))
            base, n = slug(text), 0
            while (f"{base}-{n}" if n else base) in anchors:  # GitHub numbers repeats
                n += 1
            anchors.add(f"{base}-{n}" if n else base)
        for child in token.children or []:
            target = child.attrGet("href") if child.type == "link_open" else \
                child.attrGet("src") if child.type == "image" else None
            if target is not None:
                links.append(str(target))
    return anchors, links


def broken_links(paths: list[Path]) -> list[str]:
    """Every relative link of these Markdown files that names a missing file or heading."""
    broken = []
    for path in paths:
        for link in _headings_and_links(path)[1]:
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", link):  # a URL: not checked offline
                continue
            target, _, anchor = link.partition("#")
            file = (path.parent / unquote(target)).resolve() if target else path
            if not file.exists():
                broken.append(f"{path.name}: {link} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _headings_and_links(file)[0]:
                broken.append(f"{path.name}: {link} (no such heading)")
    return broken


def test_every_relative_link_in_the_readme_and_docs_resolves():
    paths = documents(ROOT)
    assert len(paths) > 1 and all(p.is_file() for p in paths)
    assert broken_links(paths) == []


def test_a_missing_file_or_heading_is_reported(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## `tvr run`, twice\n\n## `tvr run`, twice\n")
    page = tmp_path / "page.md"
    page.write_text("# Page: one\n\n[ok](other.md#tvr-run-twice-1) [self](#page-one) "
                    "![img](missing.png) [gone](other.md#nope) [web](https://example.org/x)\n\n"
                    "```sh\n[not a link](nowhere.md)\n```\n")
    assert broken_links([page]) == ["page.md: missing.png (no such file)",
                                    "page.md: other.md#nope (no such heading)"]


def test_slugs_are_githubs():
    assert slug("The crossover: where self-attention stops being cheaper than recurrence") \
        == "the-crossover-where-self-attention-stops-being-cheaper-than-recurrence"
    assert slug("Table 2 in miniature: Chichewa -> English") \
        == "table-2-in-miniature-chichewa---english"
    assert slug("tvr run (every command)") == "tvr-run-every-command"
    assert slug("d_model and h") == "d_model-and-h"
