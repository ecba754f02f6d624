"""Free text in REPORT.md (a machine name, a message) is shown as written: a `|`, a backtick,
an HTML tag or a line break in it cannot break a table's rows or the line naming the
machine."""

from __future__ import annotations

import pandas as pd

from harness.report.markdown import code, markdown_table

EVIL = "evil|name`<b>x</b>\nnext\\"


def _cells(line: str) -> list[str]:
    """A table row's cells as GitHub splits them: a character after a backslash is text."""
    cells, current, chars = [], "", iter(line.strip())
    for c in chars:
        if c == "\\":
            current += c + next(chars, "")
        elif c == "|":
            cells.append(current)
            current = ""
        else:
            current += c
    return cells[1:]


def test_a_table_keeps_its_rows_and_columns_whatever_its_text_holds() -> None:
    table = pd.DataFrame({"machine": [EVIL, "vm-1"], "points": [3, 4],
                          "note | what": ["n < d", "a `code` span"]})
    lines = markdown_table(table).splitlines()
    assert len(lines) == 4  # header, rule, two rows: the line break did not add one
    assert {len(_cells(line)) for line in lines} == {3}
    assert "<b>" not in "\n".join(lines) and "n < d" in lines[2]


def test_a_table_without_such_text_is_unchanged() -> None:
    """The committed tables' text (underscores, `<=`, `±`) renders as before."""
    table = pd.DataFrame({"layer": ["self-attention"], "note": ["n <= 1024, d_model 2.00 ± 0.1"],
                          "n": [1.5]})
    assert markdown_table(table).splitlines()[2] == \
        "| self-attention | n <= 1024, d_model 2.00 ± 0.1 | 1.5 |"


def test_a_machine_name_in_prose_is_one_code_span() -> None:
    from harness.report.document import _machine

    rows = pd.DataFrame({"machine": [EVIL], "suite": ["smoke"], "device": ["cpu"]})
    every = pd.concat([rows, rows.assign(machine="other`one")])
    text = _machine(rows, every)
    assert "\n" not in text and "<b>x</b>" in text  # shown as written, inside a code span
    assert text.startswith(f"Measured on {code(EVIL)}: device cpu")
    assert code("other`one") == "``other`one``" and code("plain") == "`plain`"


def test_missing_values_stay_blank_cells() -> None:
    """Escaping the text must not turn a missing number into "nan"."""
    table = pd.DataFrame({"layer": ["lstm", "gru"], "n_star": [128.0, float("nan")],
                          "note": ["", None]})
    rows = markdown_table(table).splitlines()[2:]
    assert "nan" not in "\n".join(rows) and "None" not in "\n".join(rows)
    assert rows[1].split("|")[2].strip() == ""
