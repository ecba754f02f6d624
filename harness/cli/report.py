"""`tvr table`, `plot`, `report`, `compare`: read stored results, measure nothing."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.cli.common import (
    complete_stored_suites,
    echo_json,
    out_option,
    suite_name,
    suite_option,
)
from harness.errors import BadInput


def _load(out: str, suite: str):
    from harness.results import load_results

    return load_results(Path(out), [suite])


def _stored(out: str, suite: str, command: str) -> None:
    """SUITE must have results under --out; else one line with a command that works: the
    run of a suite this checkout knows, or `command` (formatted with a suite name) on the
    stored suite closest to a mistyped name."""
    if (Path(out) / suite / "results.csv").is_file():
        return
    import difflib

    import experiments
    from harness.variants import split_name, stored_names

    flag = "" if Path(out) == Path("results") else f" --out {out}"
    if suite in experiments.suite_names():
        raise BadInput(f"no results for suite {suite} under {out}: run `tvr run {suite}{flag}` "
                       "first")
    base, variant = split_name(suite)
    stored = stored_names(Path(out))
    if variant and base in experiments.suite_names():
        mine = [n for n in stored if split_name(n)[0] == base and n != base]
        raise BadInput(f"no results for variant {variant!r} of suite {base} under {out}: "
                       f"`tvr run {base}{flag}` with overrides (--set KEY=VALUE ...) measures "
                       f"a variant; its variants there: {', '.join(mine) or 'none'}")
    moved = [n for n in stored if "-".join(split_name(n)) == suite]  # a variant's old name
    close = moved or difflib.get_close_matches(suite, stored, n=1)
    fix = f"did you mean `{command.format(close[0])}{flag}`? " if close else ""
    raise BadInput(f"unknown suite {suite!r}: {fix}suites with results under {out}: "
                   f"{', '.join(stored) or 'none'} (`tvr suites` lists the suites to run)")


def machine_option(func):  # noqa: ANN001, ANN201 -- a click decorator
    """--machine: whose rows the tables and figures show."""
    return click.option(
        "--machine", default=None, metavar="NAME",
        help="Show this machine's rows (a name in the `machine` column; `tvr compare` lists "
             "them) [default per suite: this machine once its rows cover the suite, else "
             "the machine with the most points, the reference].")(func)


def _check_machine(out: str, suites: list[str] | None, machine: str | None) -> None:
    """--machine NAME must have rows in the suites asked for (any suite, for all of them)."""
    if machine is None:
        return
    from harness.results import load_results

    every = load_results(Path(out), suites, machine="all")
    names = set(every["machine"].astype(str)) if "machine" in every else set()
    if machine not in names:
        where = f"suite {suites[0]}" if suites else out
        raise BadInput(f"--machine {machine}: no rows of that machine in {where}; machines "
                       f"there: {', '.join(sorted(names)) or 'none'}")


@click.command("table", epilog="""\b
Examples:
  tvr table                          # Table 1 (after `tvr run table1`)
  tvr table --crossover              # where attention stops being cheaper (`tvr run quick`)
  tvr table --suite quick --format json""")
@click.option("--format", "fmt", type=click.Choice(["markdown", "csv", "latex", "json"]),
              default="markdown", show_default=True,
              help="json: {suite, machine, rows: [...], notes: [...]} on stdout.")
@out_option
@click.option("--suite", default=None, metavar="SUITE", shell_complete=complete_stored_suites,
              callback=suite_name,
              help="Suite whose results to use [default: table1, or quick with --crossover].")
@click.option("--crossover", is_flag=True, help="The n-versus-d crossover table instead.")
@click.option("--wide", is_flag=True,
              help="Every column (each exponent's standard error and r², the fit ranges) in "
                   "one table; by default markdown and latex show each exponent as '2.00 ± "
                   "0.00', and markdown keeps every line within 160 characters (a wider "
                   "table in parts, each led by its first column). csv and json are always "
                   "wide.")
@machine_option
def table_cmd(fmt: str, out: str, suite: str | None, crossover: bool, wide: bool,
              machine: str | None) -> None:
    """Table 1 of the paper beside what was measured (from `tvr run table1`); with --suite
    a layer sweep's fitted exponents; with --crossover where attention stops being cheaper."""
    from harness.machines import machine_choice, machine_note
    from harness.report import tables
    from harness.report.table1 import is_table1, table1
    from harness.results import load_results

    suite = suite or ("quick" if crossover else "table1")
    _stored(out, suite, "tvr table --suite {}" + (" --crossover" if crossover else ""))
    _check_machine(out, [suite], machine)
    with machine_choice(machine):
        df = _load(out, suite)
        every = load_results(Path(out), [suite], machine="all")
        name = str(df["machine"].iloc[0]) if "machine" in df and len(df) else ""
        whose = machine_note(every, name, suite) if name else ""
    notes: list[str] = []
    if crossover:
        table = tables.crossover_table(df)
    elif is_table1(df):
        table, notes = table1(df)
    else:
        table = tables.complexity_table(df)
    if fmt == "json":
        echo_json({"suite": suite, "machine": name, "whose": whose, "notes": notes,
                   "rows": json.loads(table.to_json(orient="records"))})
        return
    if fmt in ("markdown", "latex") and not wide:
        table = tables.compact(table)
    narrow = fmt == "markdown" and not wide
    parts = _parts(table, TABLE_WIDTH) if narrow else [table]
    click.echo("\n".join(tables.render(part, fmt) for part in parts), nl=False)
    if fmt == "markdown" and notes:
        click.echo("\n" + "\n".join(_line(f"- {n}", narrow) for n in notes))
    if name and fmt == "markdown":
        from harness.report.markdown import code

        click.echo("\n" + _line(f"Measured on {code(name)} ({whose}).", narrow))
    elif name:  # csv and latex stay clean on stdout
        click.echo(f"measured on `{name}` ({whose})", err=True)


TABLE_WIDTH = 160  # `tvr table`'s widest line by default (--wide: as wide as the table is)


def _width(table) -> int:  # noqa: ANN001 -- a DataFrame
    from harness.report.markdown import markdown_table

    return max(map(len, markdown_table(table).splitlines()))


def _split(table, width: int) -> list[list]:  # noqa: ANN001 -- a DataFrame
    """The columns after the first, in order, in groups each as wide as `width` allows."""
    key, groups, current = table.columns[0], [], []
    for column in table.columns[1:]:
        if current and _width(table[[key, *current, column]]) > width:
            groups.append(current)
            current = []
        current.append(column)
    return [*groups, current]


def _parts(table, width: int) -> list:  # noqa: ANN001 -- DataFrames
    """`table` as tables of at most `width` characters a line, in its column order, each led
    by its first column (what names a row), as few as fit and as even as they can be (Table 1:
    the paper's O() columns, then the measured exponents); a text cell still too wide alone
    is shortened."""
    import textwrap

    if _width(table) <= width:
        return [table]
    fewest = len(_split(table, width))
    low, high = 1, width  # the narrowest limit that needs no more parts: the evenest split
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if len(_split(table, middle)) <= fewest else \
            (middle + 1, high)
    key = table.columns[0]
    tables = [table[[key, *columns]] for columns in _split(table, low)]
    for i, part in enumerate(tables):
        room = width // max(1, len(part.columns)) - 3
        while _width(part) > width and room > 8:  # one column too wide alone: its text cells
            part = part.map(lambda v, room=room: textwrap.shorten(v, room, placeholder="...")
                            if isinstance(v, str) and len(v) > room else v)
            room -= 4
        tables[i] = part
    return tables


def _line(text: str, narrow: bool) -> str:
    """A note or the machine line, wrapped to TABLE_WIDTH when narrow."""
    import textwrap

    return textwrap.fill(text, TABLE_WIDTH, subsequent_indent="  ", break_on_hyphens=False,
                         break_long_words=False) if narrow else text


def _complete_figures(ctx: click.Context, _param: click.Parameter,
                      incomplete: str) -> list[str]:
    from harness.report import figures as plots

    return [n for n in ["all", *plots.FIGURES] if n.startswith(incomplete)]


@click.command("plot", epilog="""\b
Examples:
  tvr plot                           # every figure of the quick sweep
  tvr plot crossover --suite quick
  tvr plot all --suite convergence-quick""")
@click.argument("name", default="all", shell_complete=_complete_figures)
@out_option
@click.option("--suite", default="quick", show_default=True, metavar="SUITE",
              shell_complete=complete_stored_suites, callback=suite_name,
              help="Suite whose results to use.")
@machine_option
def plot_cmd(name: str, out: str, suite: str, machine: str | None) -> None:
    """Draw figure NAME (or all that suit SUITE's results) into <out>/<suite>/NAME.png.
    Figures read stored results only; nothing is re-measured or retrained."""
    from harness.machines import machine_choice
    from harness.report import figures as plots

    valid = ["all", *plots.FIGURES]
    if name not in valid:
        raise BadInput(f"unknown figure {name!r}; valid: {', '.join(valid)}")
    skipped: list[str] = []
    _check_machine(out, [suite], machine)
    with machine_choice(machine):
        paths = plots.draw(Path(out), suite, None if name == "all" else name, skipped)
    for path in paths:
        click.echo(str(path))
    for reason in skipped:
        click.echo(f"skipped {reason}", err=True)


@click.command("report", epilog="""\b
Examples:
  tvr report                         # results/REPORT.md, tables and figures (make run's step)
  tvr report --docs                  # and README.md's and docs/'s generated blocks""")
@out_option
@suite_option
@machine_option
@click.option("--docs", "docs_", is_flag=True,
              help="Also rewrite the generated blocks of the README.md beside <out> and of its "
                   "docs/*.md (measured numbers, the CLI reference, the suite list): the "
                   "project's pages, refreshed from the committed results when they change; "
                   "without it the report leaves every file outside <out> as it is.")
def report_cmd(out: str, suite: str | None, machine: str | None, docs_: bool) -> None:
    """Write <out>/REPORT.md: the claims ledger and every suite's tables and figures, with
    the machine they ran on, and each tuning search's search.md. Writes nothing outside
    <out>; with --docs also the generated blocks of the README.md beside <out> and of its
    docs/*.md."""
    from harness.cli.docs import ours, update_documents
    from harness.machines import machine_choice
    from harness.report import document as report
    from harness.results import frozen_results

    _check_machine(out, [suite] if suite else None, machine)
    if docs_ and (suite is not None or machine is not None):
        raise BadInput("--docs writes the blocks from every suite's default machine: give it "
                       "without --suite and --machine")
    # the documents beside --out are looked at before anything is written
    group = click.get_current_context().find_root().command  # `tvr` itself
    root = Path(out).resolve().parent
    blocks = docs_ and isinstance(group, click.Group)
    documents, notes = ours(root, group) if blocks else ([], [])
    with frozen_results():  # nothing below changes the results: each is read once
        with machine_choice(machine):
            click.echo(str(report.write_report(Path(out), suite)))
            for path in _search_documents(Path(out), suite):
                click.echo(str(path))
        for note in notes:
            click.echo(note, err=True)
        if blocks:
            for path in update_documents(root, Path(out), group, documents):
                click.echo(str(path))


def _search_documents(out: Path, suite: str | None) -> list[Path]:
    """Each tuning search's search.md from its trials' rows, as `tvr tune` writes it (the
    report may not import experiments, which declares the searches; this command may)."""
    import experiments
    from harness.files import write_atomic
    from harness.results import results_path
    from harness.run.search_doc import document

    written = []
    for name, search in experiments.SEARCHES.items():
        if (suite is None or suite == name) and results_path(out, name).exists():
            write_atomic(out / name / "search.md", document(search(), out))
            written.append(out / name / "search.md")
    return written


@click.command("claims", epilog="""\b
Examples:
  tvr claims                         # the ledger of the results in results/, in brief
  tvr claims --format markdown       # with each claim's numbers, rule, gates and tests
  tvr claims --format json | jq '.[] | select(.verdict == "contradicts")'""")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "csv", "json"]),
              default="text", show_default=True)
@out_option
@machine_option
def claims_cmd(fmt: str, out: str, machine: str | None) -> None:
    """The claims ledger: each claim of the paper, the points that test it, the measured
    numbers with their uncertainty, a verdict and the rule that chose it. Reads stored
    results only; a claim without them names the suite to run."""
    from harness.machines import machine_choice
    from harness.report.claims import ledger, render

    _check_machine(out, None, machine)
    with machine_choice(machine):
        # a bar on stderr while a slow pass runs (a cold cache of Table 2's sentence tests)
        click.echo(render(ledger(Path(out), progress=True), fmt), nl=False)


@click.command("compare", epilog="""\b
Examples:
  tvr compare                        # this machine against the reference in results/
  tvr compare ../laptop/results ../gpu-box/results --suite table1
  tvr compare vm my-host --points""")
@click.argument("a", required=False)
@click.argument("b", required=False)
@out_option
@suite_option
@click.option("--points", "per_point", is_flag=True, help="One line per point and metric.")
@click.option("--any-conditions", is_flag=True,
              help="Also compare points measured under different threads, dtype or device, "
                   "or on a busy machine (by default only like with like).")
def compare_cmd(a: str | None, b: str | None, out: str, suite: str | None,
                per_point: bool, any_conditions: bool) -> None:
    """Machine B against machine A on the points both measured: B/A per metric (time
    depends on the machine; counted FLOPs and bytes should not). A and B are machine names
    in --out, or results folders (their machine with the most rows). Defaults: A = the
    machine with the most rows other than this one (the reference), B = this machine, on
    the suites both have. Every difference in threads, dtype, device and busy flags is
    named; only points measured alike are compared unless --any-conditions."""
    from harness.report.machines import differences, machine_ratios, summary, unmatched
    from harness.report.markdown import markdown_table

    label_a, rows_a, label_b, rows_b = _compare_sides(a, b, out, suite)
    for line in differences(rows_a, rows_b):
        click.echo(f"differs: {line}")
    ratios = machine_ratios(rows_a, rows_b, like_only=not any_conditions)
    if ratios.empty:
        why = unmatched(rows_a, rows_b)
        hint = " (--any-conditions compares them too)" if "measured alike" in why and \
            not any_conditions else ""
        raise BadInput(f"machines {label_a} and {label_b}: nothing to compare: {why}{hint}")
    click.echo(f"B/A with A = {label_a}, B = {label_b}"
               f"{'' if any_conditions else ', like with like'}\n")
    table = ratios if per_point else summary(ratios)
    click.echo(markdown_table(table.round(4)))


def _compare_sides(a: str | None, b: str | None, out: str, suite: str | None):  # noqa: ANN202
    """(label A, rows A, label B, rows B) of `tvr compare`; with no arguments this machine
    (B) against the reference (A) on the suites both have, or one line saying what to run."""
    import pandas as pd

    from harness.machines import this_machine
    from harness.results import load_results

    suites = [suite] if suite else None
    every = load_results(Path(out), suites, machine="all")
    if every.empty:
        raise BadInput(f"no rows under {out}: run `tvr run SUITE` first")
    names = every["machine"].astype(str)

    def side(arg: str | None, default: str) -> tuple[str, pd.DataFrame]:
        if arg and Path(arg).is_dir():
            rows = load_results(Path(arg), suites, machine="all")
            if rows.empty:
                raise BadInput(f"no rows under {arg}")
            most = rows["machine"].astype(str).value_counts().index[0]
            return f"{arg} ({most})", rows[rows["machine"].astype(str) == most]
        name = arg or default
        if not (names == name).any():
            raise BadInput(f"no rows of machine {name!r} under {out}; machines there: "
                           f"{', '.join(sorted(set(names)))}")
        return name, every[names == name]

    mine = this_machine()
    others = names[names != mine].value_counts()
    if a is None and b is None:
        if not (names == mine).any():
            ref = f" with the reference `{others.index[0]}`" if len(others) else ""
            raise BadInput(f"this machine (`{mine}`) has no rows under {out}: run "
                           f"`tvr run {suite or 'quick'}`, then `tvr compare` compares it{ref}")
        if not len(others):
            raise BadInput(f"only this machine (`{mine}`) has rows under {out}: nothing to "
                           "compare it with")
        shared = set(every.loc[names == mine, "suite"]) & \
            set(every.loc[names == others.index[0], "suite"])
        every, names = every[every["suite"].isin(shared)], names[every["suite"].isin(shared)]
        if every.empty:
            raise BadInput(f"this machine and the reference `{others.index[0]}` share no "
                           f"suite: run `tvr run quick`, then `tvr compare`")
    label_b, rows_b = side(b, mine)
    label_a, rows_a = side(a, others.index[0] if len(others) else mine)
    return label_a, rows_a, label_b, rows_b
