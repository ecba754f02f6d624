"""`tvr table`, `plot`, `report`, `compare`: read stored results, measure nothing."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.common import OUT_HELP
from harness.errors import BadInput


def _load(out: str, suite: str):
    from harness.results import load_results

    return load_results(Path(out), [suite])


@click.command("table")
@click.option("--format", "fmt", type=click.Choice(["markdown", "csv", "latex"]),
              default="markdown", show_default=True)
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
@click.option("--suite", default=None,
              help="Suite whose results to use [default: table1, or quick with --crossover].")
@click.option("--crossover", is_flag=True, help="The n-versus-d crossover table instead.")
def table_cmd(fmt: str, out: str, suite: str | None, crossover: bool) -> None:
    """Table 1 of the paper beside what was measured (from `tvr run table1`); with --suite
    a layer sweep's fitted exponents; with --crossover where attention stops being cheaper."""
    from harness.report import tables
    from harness.report.table1 import is_table1, table1
    from harness.results import this_machine

    suite = suite or ("quick" if crossover else "table1")
    df = _load(out, suite)
    if crossover:
        click.echo(tables.render(tables.crossover_table(df), fmt), nl=False)
    elif is_table1(df):
        table, notes = table1(df)
        click.echo(tables.render(table, fmt), nl=False)
        if fmt == "markdown":
            click.echo("\n" + "\n".join(f"- {n}" for n in notes))
    else:
        click.echo(tables.render(tables.complexity_table(df), fmt), nl=False)
    if fmt == "markdown" and "machine" in df and len(df):
        name = str(df["machine"].iloc[0])
        whose = "this machine" if name == this_machine() else \
            f"the reference; `tvr run {suite}` measures this machine"
        click.echo(f"\nMeasured on `{name}` ({whose}).")


@click.command("plot")
@click.argument("name", default="all")
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
@click.option("--suite", default="quick", show_default=True, help="Suite whose results to use.")
def plot_cmd(name: str, out: str, suite: str) -> None:
    """Draw figure NAME (or all that suit SUITE's results) into <out>/<suite>/NAME.png.
    Figures read stored results only; nothing is re-measured or retrained."""
    from harness.report import figures as plots

    valid = ["all", *plots.FIGURES]
    if name not in valid:
        raise BadInput(f"unknown figure {name!r}; valid: {', '.join(valid)}")
    skipped: list[str] = []
    for path in plots.draw(Path(out), suite, None if name == "all" else name, skipped):
        click.echo(str(path))
    for reason in skipped:
        click.echo(f"skipped {reason}", err=True)


@click.command("report")
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
@click.option("--suite", default=None, help="Only this suite [default: every suite in --out].")
def report_cmd(out: str, suite: str | None) -> None:
    """Write <out>/REPORT.md: the claims ledger and every suite's tables and figures, with
    the machine they ran on; then the generated blocks of the README.md beside <out>."""
    from harness.report import document as report
    from harness.report.readme import update_readme

    click.echo(str(report.write_report(Path(out), suite)))
    readme = Path(out).resolve().parent / "README.md"
    if suite is None and readme.is_file() and update_readme(readme, Path(out)):
        click.echo(str(readme))


@click.command("claims")
@click.option("--format", "fmt", type=click.Choice(["markdown", "csv", "json"]),
              default="markdown", show_default=True)
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
def claims_cmd(fmt: str, out: str) -> None:
    """The claims ledger: each claim of the paper, the points that test it, the measured
    numbers with their uncertainty, a verdict and the rule that chose it. Reads stored
    results only; a claim without them names the suite to run."""
    from harness.report.claims import ledger, render

    click.echo(render(ledger(Path(out)), fmt), nl=False)


@click.command("compare")
@click.argument("a", required=False)
@click.argument("b", required=False)
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
@click.option("--suite", default=None, help="Only this suite [default: every suite].")
@click.option("--points", "per_point", is_flag=True, help="One line per point and metric.")
def compare_cmd(a: str | None, b: str | None, out: str, suite: str | None,
                per_point: bool) -> None:
    """Machine B against machine A on the points both measured: B/A per metric (time
    depends on the machine; counted FLOPs and bytes should not). A and B are machine names
    in --out, or results folders (their machine with the most rows). Defaults: A = the
    machine with the most rows other than this one (the reference), B = this machine."""
    import pandas as pd

    from harness.report.machines import machine_ratios, summary
    from harness.report.markdown import markdown_table
    from harness.results import load_results, this_machine

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
    label_b, rows_b = side(b, mine)
    label_a, rows_a = side(a, others.index[0] if len(others) else mine)
    ratios = machine_ratios(rows_a, rows_b)
    if ratios.empty:
        raise BadInput(f"machines {label_a} and {label_b} have no ok point in common")
    click.echo(f"B/A with A = {label_a}, B = {label_b}\n")
    table = ratios if per_point else summary(ratios)
    click.echo(markdown_table(table.round(4)))
