"""The project's one Markdown table renderer: pandas DataFrame.to_markdown (tabulate).

Every Markdown table the harness prints or writes (REPORT.md sections, `tvr table`,
`tvr bench`, scripts/gpu-check) goes through `markdown_table`, so they all look alike.
"""

from __future__ import annotations

import pandas as pd


def _text_columns(table: pd.DataFrame) -> list[int]:
    """Positions of the columns whose every value is a string (or missing)."""
    return [i for i, (_, col) in enumerate(table.items())
            if not pd.api.types.is_numeric_dtype(col)
            and col.dropna().map(lambda v: isinstance(v, str)).all()]


def markdown_table(table: pd.DataFrame, floatfmt: str = ".4g", empty: str = "(no rows)") -> str:
    """A pipe table without the index; missing values are blank cells, not "nan". Numbers
    are formatted with `floatfmt`; text cells stay as written (a cell such as "0.50" or
    "8,512,512" is not read as a number and reformatted)."""
    if table.empty:
        return empty
    text = _text_columns(table)
    table = table.astype(object).where(table.notna(), None)
    return table.to_markdown(index=False, floatfmt=floatfmt, missingval="",
                             disable_numparse=text or False)
