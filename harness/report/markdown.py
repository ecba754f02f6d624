"""The project's one Markdown table renderer: pandas DataFrame.to_markdown (tabulate).

Every Markdown table the harness prints or writes (REPORT.md sections, `tvr table`,
`tvr bench`, scripts/gpu-check) goes through `markdown_table`, so they all look alike. Text
in a cell or a header is shown as written (`cell`): a machine name or a message holding a
`|`, a backtick, an HTML tag or a line break cannot end the cell or the row it sits in.
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
