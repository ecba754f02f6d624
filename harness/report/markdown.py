"""The project's Markdown: its one table renderer (pandas DataFrame.to_markdown, tabulate),
free text shown as written, and generated prose wrapped and its links rebased.

Every Markdown table the harness prints or writes (REPORT.md sections, `tvr table`,
`tvr bench`, scripts/gpu-check) goes through `markdown_table`, so they all look alike. Text
in a cell or a header is shown as written (`cell`): a machine name or a message holding a
`|`, a backtick, an HTML tag or a line break cannot end the cell or the row it sits in.
A long generated line of prose is wrapped (`wrap`) without breaking a code span or a link;
`rebase_links` points a text's relative links at the repository root from another folder.
"""

from __future__ import annotations

import re

import pandas as pd

# What would make a cell's text into structure: a backslash (it escapes what follows), a pipe
# (it ends the cell), a backtick (it opens a code span), the `<` of an HTML tag; line breaks
# (they end the row) become spaces.
_ESCAPES = {"\\": "\\\\", "|": "\\|", "`": "\\`"}
_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # "n < d" and "n <= 1024" stay as they are


def cell(text: str) -> str:
    """Free text for one table cell, shown as written, on one line."""
    text = " ".join(str(text).splitlines())
    text = "".join(_ESCAPES.get(c, c) for c in text)
    return _TAG.sub("&lt;", text)


def code(text: str) -> str:
    """Free text (a machine name) as an inline code span, whatever it holds: on one line, in
    a run of backticks longer than any inside it (CommonMark: a code span shows HTML and
    pipes as written)."""
    text = " ".join(str(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _text_columns(table: pd.DataFrame) -> list[int]:
    """Positions of the columns whose every value is a string (or missing)."""
    return [i for i, (_, col) in enumerate(table.items())
            if not pd.api.types.is_numeric_dtype(col)
            and col.dropna().map(lambda v: isinstance(v, str)).all()]


def markdown_table(table: pd.DataFrame, floatfmt: str = ".4g", empty: str = "(no rows)") -> str:
    """A pipe table without the index; missing values are blank cells, not "nan". Numbers
    are formatted with `floatfmt`; text cells stay as written (a cell such as "0.50" or
    "8,512,512" is not read as a number and reformatted; a `|` or a line break in it is
    escaped: `cell`)."""
    if table.empty:
        return empty
    text = _text_columns(table)
    table = table.astype(object)
    table = table.map(lambda v: cell(v) if isinstance(v, str) else v).astype(object)
    table = table.where(table.notna(), None)  # after map, which makes None a float NaN
    table.columns = [cell(c) if isinstance(c, str) else c for c in table.columns]
    return table.to_markdown(index=False, floatfmt=floatfmt, missingval="",
                             disable_numparse=text or False)


PROSE_WIDTH, LONGEST = 100, 200  # a long generated line is wrapped at the prose's width


def wrap(text: str) -> str:
    """`text` with its prose lines longer than LONGEST wrapped at PROSE_WIDTH (Markdown
    renders them as one paragraph), never inside a code span or a link; table rows, images,
    list items, code and HTML kept whole."""
    out, fenced = [], False
    for line in text.split("\n"):
        fenced ^= line.startswith("```")
        keep = fenced or line.startswith(("|", "!", "<", "```", "- ", "    ")) \
            or len(line) <= LONGEST
        out += [line] if keep else _pack(_words(line))
    return "\n".join(out)


def _words(line: str) -> list[str]:
    """The line's words, a code span or a link (its text, and its target: the parentheses
    right after "]") kept as one; a parenthesis of prose is not a link."""
    words, word, code, text, target, prev = [], "", False, 0, 0, ""
    for ch in line:
        if ch == " " and not code and text == 0 and target == 0:
            words += [word] if word else []
            word, prev = "", ch
            continue
        word += ch
        code ^= ch == "`"
        if not code:
            if ch == "[":
                text += 1
            elif ch == "]":
                text = max(text - 1, 0)
            elif ch == "(" and (prev == "]" or target):
                target += 1
            elif ch == ")" and target:
                target -= 1
        prev = ch
    return words + ([word] if word else [])


def _pack(words: list[str]) -> list[str]:
    """The words joined by spaces into lines of at most PROSE_WIDTH (a longer word on a line
    of its own)."""
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= PROSE_WIDTH:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


# a link or image target relative to the repository root, as blocks write them (no URL, #, /)
RELATIVE_LINK = re.compile(r"\]\((?![a-zA-Z][a-zA-Z0-9+.-]*:|#|/)")


def rebase_links(text: str, to_root: str) -> str:
    """`text` with `to_root` (the path from its file's folder to the repository root, "../"
    in docs/) put before each relative link or image target."""
    return RELATIVE_LINK.sub(f"]({to_root}", text)
