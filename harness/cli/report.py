"""`tvr table`, `plot`, `report`, `compare`: read stored results, measure nothing."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.cli.common import complete_stored_suites, echo_json, out_option, suite_option
from harness.errors import BadInput


def _load(out: str, suite: str):
    from harness.results import load_results

    return load_results(Path(out), [suite])


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
    notes: list[str] = []
    if crossover:
        table = tables.crossover_table(df)
    elif is_table1(df):
        table, notes = table1(df)
    else:
        table = tables.complexity_table(df)
    if fmt == "json":
        machine = str(df["machine"].iloc[0]) if "machine" in df and len(df) else ""
        echo_json({"suite": suite, "machine": machine, "notes": notes,
                   "rows": json.loads(table.to_json(orient="records"))})
        return
    click.echo(tables.render(table, fmt), nl=False)
    if fmt == "markdown" and notes:
        click.echo("\n" + "\n".join(f"- {n}" for n in notes))
    if fmt == "markdown" and "machine" in df and len(df):
        name = str(df["machine"].iloc[0])
        whose = "this machine" if name == this_machine() else \
            f"the reference; `tvr run {suite}` measures this machine"
        click.echo(f"\nMeasured on `{name}` ({whose}).")


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
              shell_complete=complete_stored_suites, help="Suite whose results to use.")
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


@click.command("report", epilog="Example: tvr report --out results")
@out_option
@suite_option
def report_cmd(out: str, suite: str | None) -> None:
    """Write <out>/REPORT.md: the claims ledger and every suite's tables and figures, with
    the machine they ran on; then the generated blocks of the README.md beside <out>."""
    from harness.report import document as report
    from harness.report.readme import update_readme

    click.echo(str(report.write_report(Path(out), suite)))
    readme = Path(out).resolve().parent / "README.md"
    if suite is None and readme.is_file() and update_readme(readme, Path(out)):
        click.echo(str(readme))


@click.command("claims", epilog="""\b
Examples:
  tvr claims                         # the ledger of the results in results/
  tvr claims --format json | jq '.[] | select(.verdict == "contradicts")'""")
@click.option("--format", "fmt", type=click.Choice(["markdown", "csv", "json"]),
              default="markdown", show_default=True)
@out_option
def claims_cmd(fmt: str, out: str) -> None:
    """The claims ledger: each claim of the paper, the points that test it, the measured
    numbers with their uncertainty, a verdict and the rule that chose it. Reads stored
    results only; a claim without them names the suite to run."""
    from harness.report.claims import ledger, render

    click.echo(render(ledger(Path(out)), fmt), nl=False)


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
