"""`tvr run` once its points are chosen: torch's threads, the executor, the sweep under stop
signals, and what the command prints after it (summary, links, --fail-on)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.errors import BadInput
from harness.plan import PLAN_FILE
from harness.track.store import mask

if TYPE_CHECKING:
    from experiments.spec import Point
    from harness.run.sweep import SweepSummary

# Threads of the reference rows committed in results/ (column `threads`): a timed suite
# runs with as many by default, so this machine's rows compare with them.
REFERENCE_THREADS = 1


@dataclass(frozen=True)
class RunOptions:
    """`tvr run`'s options, as click passes them."""

    suite: str | None
    suite_file: str | None
    device: str
    out: str
    tracking_uri: str | None
    resume: bool
    dry_run: bool
    max_memory: int | None
    min_run_time: float
    dtype: str | None
    compile_: bool
    corpus: str | None
    bitext: tuple[str, ...]
    parallel: tuple[str, ...]  # the old name of --bitext
    reverse: bool
    only: tuple[str, ...]
    set_: tuple[str, ...]
    fail_on: tuple[str, ...]
    executor: str
    ray_address: str | None
    threads: int | None
    cpus_per_point: int | None
    keep_checkpoints: bool


def sweep(name: str, description: str, points: list[Point], out_dir: Path, uri: str | None,
          o: RunOptions) -> SweepSummary:
    """Measure the points into <out>/<name>/ with the executor and threads asked for."""
    from harness.cli.common import output_folder
    from harness.plan import write_plan
    from harness.run import sweep as sweeps
    from harness.run.executor import make_executor

    folder = out_dir / name
    made = [f for f in (folder, *folder.parents) if f.is_relative_to(out_dir)
            and f != out_dir and not f.exists()]  # a variant's: its suite's folder too
    output_folder(str(folder), "results folder")  # no row could be written there: said
    # before any point is measured (a store that does not answer: store_uri said it)
    try:
        with threads_for(o.threads, points, o.executor):
            where = make_executor(o.executor, o.ray_address, o.cpus_per_point)  # joins first
            try:
                device = where.resolve_device(o.device)
                with stopping(folder / "results.csv"):
                    save_variant(folder, name, points, o)
                    if not o.only:  # the whole suite (or variant): what the ledger waits for
                        write_plan(folder, points)
                    if uri is not None:
                        sync_reference(out_dir, name, uri, describe(description, name))
                    return sweeps.run_suite(
                        name, points, device, out_dir, uri, o.resume, o.max_memory,
                        o.min_run_time, description=describe(description, name),
                        outputs=lambda: outputs(out_dir, name), executor=where,
                        headline=lambda: headline_of(out_dir, name),
                        keep_checkpoints=o.keep_checkpoints,
                        expected=expected_seconds(out_dir, name, points, device.type))
            finally:
                where.close()
    except BaseException:
        if made:  # an early error (no cluster, no GPU): no folder of this run left empty
            _remove_if_unused(made)
        raise


def _remove_if_unused(made: list[Path]) -> None:
    """Remove the results folder `made[0]`, made by this run, if nothing but its bookkeeping
    is in it (an empty claims folder, lock files no one holds, the configuration this run
    saved, its plan): a results folder with no row in it; then the folders above it this run made (a
    variant's `variants/` and suite folder), each if empty."""
    from harness.run.point_locks import tidy
    from harness.variants import CONFIG_FILE

    folder = made[0]
    tidy(folder / "results.csv")
    if not (folder / "results.csv").exists():
        (folder / CONFIG_FILE).unlink(missing_ok=True)
        (folder / PLAN_FILE).unlink(missing_ok=True)
    for each in made:  # the deepest first
        if not each.is_dir() or any(each.iterdir()):
            return
        each.rmdir()


def save_variant(folder: Path, name: str, points: list[Point], o: RunOptions) -> None:
    """A variant's configuration beside its rows (harness.variants.save_config): the suite,
    the overrides as given, and each point's fields as its row names them."""
    from harness.variants import save_config, split_name

    suite, variant = split_name(name)
    if not variant:
        return
    given = ["--suite-file", o.suite_file] if o.suite_file else [suite]
    given += [w for n in o.only for w in ("--only", n)]
    given += ["--corpus", o.corpus] if o.corpus is not None else []
    given += [w for p in o.bitext + o.parallel for w in ("--bitext", p)]
    given += ["--reverse"] if o.reverse else []
    given += ["--dtype", o.dtype] if o.dtype is not None else []
    given += ["--compile"] if o.compile_ else []
    given += [w for s in o.set_ for w in ("--set", s)]
    fields = [{"point_id": p.point_id, **p.fields(), **p.columns()} for p in points]
    save_config(folder, suite, variant, ["tvr", "run", *given], fields)


def expected_seconds(out_dir: Path, name: str, points: list[Point],
                     device: str) -> dict[str, float]:
    """Each point's reference point time, which the sweep's progress bar counts
    (harness.report.expected_time.point_weights); empty where the suite has no reference rows."""
    from harness.machines import this_machine
    from harness.report.expected_time import point_weights

    return point_weights(out_dir, name, [p.point_id for p in points], device, this_machine())


def sync_reference(out_dir: Path, name: str, uri: str, description: str) -> None:
    """The suite's reference rows (other machines', committed with the code) into the store
    before the sweep, once (harness.track.sync.sync_reference): a store `make run` builds
    holds them without a `tvr sync`. A store that fails here costs one warning line; the
    sweep then says what it makes of the store."""
    from harness.machines import machine_choice
    from harness.results import results_path
    from harness.run.point_locks import sync_lock
    from harness.track.sync import sync_reference as sync

    def headline(machine: str) -> tuple[dict[str, float], dict[str, str]]:
        with machine_choice(machine):  # the reference's numbers on the reference's parent
            return headline_of(out_dir, name)

    path = results_path(out_dir, name)
    if not path.is_file():
        return
    try:
        with sync_lock(path):  # one sweep logs them; one beside it finds them logged
            logged = sync(out_dir, name, uri, headline, description)
    except OSError as e:
        click.echo(f"warning: the reference rows of {name} were not logged to MLflow: "
                   f"{mask(str(e))}".splitlines()[0], err=True)
        return
    if logged:
        click.echo(f"{name}: {logged} reference rows (other machines', committed with the "
                   "code) logged to MLflow, tagged reference = true", err=True)


def tell(summary: SweepSummary, name: str, variant: bool, uri: str | None,
         o: RunOptions) -> None:
    """The summary line, the busy warning, where to look, and --fail-on's exit 1."""
    click.echo(summary.line())
    warning = summary.busy_warning(rerun_command())
    if warning:
        click.echo(warning, err=True)
    if variant:
        from harness.variants import CONFIG_FILE

        click.echo(f"variant {name}: its configuration in "
                   f"{summary.results.parent / CONFIG_FILE}; tables and figures: tvr table "
                   f"--suite {name}; tvr plot all --suite {name}")
    if uri and summary.tracking_off is None:
        print_links(uri, name, o.out)
    failed = {s: n for s, n in summary.statuses.items() if s in o.fail_on}
    if failed:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(failed.items()))
        click.echo(f"failing: {counts} (--fail-on {','.join(o.fail_on)}); see "
                   f"{summary.results.parent / 'errors.log'}", err=True)
        raise SystemExit(1)


def rerun_command() -> str:
    """This `tvr run` as typed, with --no-resume: the options given on its command line
    (a suite file, --only, --set, --out...), so it works for any suite or variant; a
    tracking URI's password shown as *** (retype it, or set $MLFLOW_TRACKING_URI)."""
    import shlex

    from click.core import ParameterSource

    from harness.track.store import mask  # a password never goes into the printed command

    ctx = click.get_current_context()
    words = ["tvr"]
    for c in (ctx.parent, ctx) if ctx.parent else (ctx,):
        words += [c.info_name] if c is ctx else []
        for param in c.command.params:
            name = param.name or ""
            if c.get_parameter_source(name) is not ParameterSource.COMMANDLINE or \
                    name == "resume":
                continue
            value = c.params[name]
            if isinstance(param, click.Argument):
                words.append(str(value))
            elif isinstance(param, click.Option) and param.is_flag:
                words.append(param.opts[0] if value else param.secondary_opts[0])
            else:
                values = value if isinstance(param, click.Option) and param.multiple else [value]
                for v in values:
                    text = ",".join(v) if isinstance(v, tuple) else str(v)
                    words += [param.opts[0], mask(text) if name == "tracking_uri" else text]
    return shlex.join([*words, "--no-resume"])


@contextmanager
def threads_for(threads: int | None, points: list[Point], executor: str) -> Iterator[None]:
    """torch's threads for this process's points: --threads, else the reference's for a
    suite with timed points (a Ray task sets its own: the CPUs it reserved); as before
    afterwards (a caller in the same process, a test)."""
    from experiments.spec import CAST_RUNNERS

    if threads is not None and executor != "local":
        raise BadInput("--threads applies to --executor local; a Ray task runs with the CPUs "
                       "it reserves (--cpus-per-point for training points)")
    if threads is None and executor == "local" and any(p.runner in CAST_RUNNERS for p in points):
        threads = REFERENCE_THREADS
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # recorded in every row (machine facts: threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def describe(description: str, name: str) -> str:
    """The suite's MLflow experiment description."""
    return (f"{description}\n\nEach child run is one point of suite `{name}` "
            "(named by what tells it apart: mixer or model, seq_len, d_model, config); the "
            "parent run of each `tvr run` holds the summary, the results CSV, tables, figures "
            "and the machine's environment report. Written by tvr-bench.")


def outputs(out_dir: Path, name: str) -> list[Path]:
    """The suite's tables and figures, regenerated from its results (MLflow artifacts). The
    rows are stored already: a report that fails here costs a warning, not the run."""
    from harness.report.document import suite_section

    try:
        return suite_section(out_dir, name)[1]
    except Exception as e:  # noqa: BLE001 -- said on stderr; `tvr report` shows it again
        click.echo(f"warning: the tables and figures of {name} were not attached to MLflow: "
                   f"{type(e).__name__}: {e}".splitlines()[0], err=True)
        return []


def headline_of(out_dir: Path, name: str) -> tuple[dict[str, float], dict[str, str]]:
    """The suite's headline numbers and verdicts for its parent run; like the outputs, a
    report that fails here costs a warning, not the run."""
    from harness.report.headline import headline

    try:
        return headline(out_dir, name)
    except BadInput:  # a damaged results file is the user's one line and exit 2
        raise
    except Exception as e:  # noqa: BLE001 -- said on stderr; `tvr report` shows it again
        click.echo(f"warning: the headline numbers of {name} were not logged to MLflow: "
                   f"{type(e).__name__}: {e}".splitlines()[0], err=True)
        return {}, {}


def print_links(uri: str, name: str, out: str) -> None:
    """Where to see the runs: the link to this suite's runs table in the MLflow UI."""
    from harness.track.store import is_remote, without_credentials
    from harness.track.ui import DEFAULT_PORT, runs_links

    if is_remote(uri):  # the credentials are in MLflow's environment by now, not in links
        plain = without_credentials(uri)[0]
        links = runs_links(plain, base=plain.rstrip("/"))
        click.echo(f"MLflow: {mask(uri)}")
    else:
        links = runs_links(uri, DEFAULT_PORT)
        click.echo(f"MLflow: {mask(uri)}; browse with `tvr ui --out {out}`, then open")
    for experiment, link in links:
        if experiment == name:
            click.echo(f"  {link}")


@contextmanager
def stopping(csv: Path) -> Iterator[None]:
    """A stop signal (exit 143/130) or a failed write (exit 1; 2 for a path the system
    refuses: no permission, a read-only file system) ends the command in one line."""
    from harness.inputs import PATH_ERRNOS, path_error
    from harness.signals import stop_on_signals, stopped_exit

    try:
        with stop_on_signals():
            yield
    except KeyboardInterrupt:  # Stopped, or what Ray's wait made of it
        raise stopped_exit(csv) from None
    except OSError as e:  # disk full, read-only, removed folder: nothing to measure into
        if e.errno in PATH_ERRNOS:
            raise BadInput(f"results under {csv.parent.parent}: {path_error(e)}") from None
        raise click.ClickException(f"cannot write the results under {csv.parent.parent}: "
                                   f"{e.strerror or e}") from None
