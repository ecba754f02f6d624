"""Long generated prose is wrapped at the prose's width without breaking a code span or a
link."""

from __future__ import annotations

from harness.report.markdown import PROSE_WIDTH, wrap


def test_prose_wraps_at_its_parentheses_but_never_inside_a_link_or_code():
    prose = ("word " * 20 + "(a parenthesis of prose " + "word " * 30 + "ends here) and "
             "[a link text](docs/some%20page.md) `a code (span) kept` " + "word " * 20)
    lines = wrap(prose.strip()).split("\n")
    assert max(map(len, lines)) <= PROSE_WIDTH and len(lines) > 2
    text = "\n".join(lines)
    assert "[a link text](docs/some%20page.md)" in text and "`a code (span) kept`" in text
