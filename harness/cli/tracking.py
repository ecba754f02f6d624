"""`tvr sync`, `doctor`, `ui`: the MLflow store beside the results."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.common import complete_stored_suites, out_option, store_uri, suite_name
from harness.errors import BadInput
from harness.track.store import mask


@click.command("sync", epilog="""\b
Examples:
  tvr sync quick                     # rows the local store lacks
  tvr sync quick --tracking-uri http://mlflow.example:5000""")
@click.argument("suite", metavar="SUITE", shell_complete=complete_stored_suites,
                callback=suite_name)
@out_option
@click.option("--tracking-uri", default=None, help="As for `tvr run`.")
def sync_cmd(suite: str, out: str, tracking_uri: str | None) -> None:
    """Log to MLflow every stored row of SUITE the store lacks (by point id and machine):
    rows written while tracking was off, or just before a kill."""
    from harness.track.sync import sync_suite

    out_dir = Path(out)
    if not (out_dir / suite / "results.csv").is_file():
        raise BadInput(f"no results of suite {suite!r} under {out}: nothing to sync")
    uri = store_uri(out_dir, tracking_uri)  # a store that does not answer: bad input
    if uri is None:
        raise BadInput("tracking is off (--tracking-uri none): there is no store to sync to")
    from harness.track.store import problem

    reason = problem(uri)  # a store sync cannot write to: said before any row is read
    if reason is not None:
        raise BadInput(mask(reason) if reason.startswith("tracking URI") else
                       f"tracking URI {mask(uri)}: {mask(reason)}")
    try:
        logged, stored = sync_suite(out_dir, suite, uri, _headline(out_dir, suite),
                                    description(suite))
    except OSError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{suite}: {logged} rows logged to {mask(uri)}, {stored - logged} were there")


def _headline(out_dir: Path, suite: str) -> tuple[dict[str, float], dict[str, str]]:
    from harness.cli.sweeping import headline_of

    return headline_of(out_dir, suite)


def description(suite: str) -> str:
    """A suite's experiment description, as `tvr run` writes it; a suite this checkout does
    not declare (a suite file's, a plugin's not installed) is said to be one."""
    import experiments
    from harness.cli.sweeping import describe
    from harness.variants import split_name

    base, variant = split_name(suite)
    try:
        text = experiments.describe(base)
    except ValueError:  # unknown here
        text = (f"Suite `{base}`, declared outside this checkout (a suite file or a "
                "plugin): its stored rows.")
    if variant:
        text += f"\n\nVariant `{variant}`: the suite run with the overrides that name it."
    return describe(text, suite)


def build_store(out_dir: Path, uri: str) -> None:
    """Log every suite's stored rows (the reference committed with the code, on a fresh
    clone, GPU suites included) to the store, saying so suite by suite."""
    from harness.track.sync import suites_with_results, sync_suite

    found = suites_with_results(out_dir)
    for done, (folder, suite) in enumerate(found, 1):
        where = suite if folder == out_dir else f"{folder.relative_to(out_dir)}/{suite}"
        try:
            logged, _ = sync_suite(folder, suite, uri, _headline(folder, suite),
                                   description(suite))
        except OSError as e:
            raise click.ClickException(f"{where}: {e}") from None
        click.echo(f"{where}: {logged} rows logged ({done}/{len(found)} suites)")


@click.command("doctor", epilog="Example: tvr doctor --repair")
@out_option
@click.option("--repair", is_flag=True,
              help="Move a broken store aside (dated backup) and rebuild its runs from the "
                   "results CSVs.")
def doctor_cmd(out: str, repair: bool) -> None:
    """Check the MLflow store under --out (the default SQLite file): what a killed writer left
    (a hot journal, a WAL) is recovered in place; --repair moves aside only a store that
    cannot be opened, and rebuilds its runs from the results CSVs."""
    from harness.track.sqlitefile import REPAIR, leftovers
    from harness.track.store import problem, resolve_tracking_uri, sqlite_path
    from harness.track.sync import move_aside

    out_dir = Path(out)
    uri = resolve_tracking_uri(out_dir, None)
    db = sqlite_path(uri or "")
    if db is not None and not db.exists():
        click.echo(f"store {mask(uri or '')}: missing (nothing tracked here yet); "
                   f"{'building it' if repair else '`tvr doctor --repair` or `tvr ui` builds it'}"
                   " from the results CSVs")
        if repair:
            build_store(out_dir, uri or "")
        return  # missing is not broken: exit 0
    found = leftovers(db) if db is not None else []
    reason = problem(uri) if uri else None
    for what in found:
        click.echo(f"found {what}")
    if reason is None:
        recovered = "; recovered in place, no run lost" if found else ""
        click.echo(f"store {mask(uri or 'none')}: ok{recovered}")
        return
    click.echo(f"store {mask(uri or '')}: {reason}")
    if not repair or db is None or REPAIR not in reason:
        raise SystemExit(1)  # nothing to repair here: a store in use is not broken
    click.echo(f"moved the broken store to {move_aside(db)}")  # under the store's lock
    build_store(out_dir, uri or "")


@click.command("ui", epilog="""\b
Prints the link to each suite's runs table. Any signal (Ctrl-C, SIGTERM, even SIGKILL)
stops the server with it.
Example: tvr ui --port 5001""")
@click.option("--port", type=click.IntRange(1, 65535), default=5000, show_default=True)
@out_option
@click.option("--tracking-uri", default=None, help="As for `tvr run`.")
def ui_cmd(port: int, out: str, tracking_uri: str | None) -> None:
    """Browse the runs: start the MLflow UI on 127.0.0.1 with the same store."""
    from harness.track.store import resolve_tracking_uri, sqlite_path
    from harness.track.ui import serve_ui

    out_dir = Path(out)  # only read: a missing folder is serve_ui's "no store" message
    uri = resolve_tracking_uri(out_dir, tracking_uri)
    if uri is None:
        raise BadInput("--tracking-uri none: there is no store to browse")
    db = sqlite_path(uri)
    if db is not None and not db.exists() and any(out_dir.glob("*/results.csv")):
        # a fresh clone: the committed results become runs, once
        click.echo(f"no MLflow store at {db} yet: building it from the results CSVs "
                   "(once; `tvr sync SUITE` adds later rows)")
        build_store(out_dir, uri)
    raise SystemExit(serve_ui(uri, out_dir, port))
