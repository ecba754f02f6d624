"""`tvr run` and `tvr bench`: measure points into results CSVs (and MLflow)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.common import (
    DTYPE_CHOICE,
    Bytes,
    CheckedPath,
    Seconds,
    complete_suites,
    out_option,
    output_folder,
    store_uri,
)
from harness.errors import BadInput
from harness.run.store import mask

if TYPE_CHECKING:
    from experiments.spec import Point

STATUSES = ("ok", "oom", "diverged", "error", "skipped")  # harness.results.STATUSES
# Threads of the reference rows committed in results/ (column `threads`): a timed suite
# runs with as many by default, so this machine's rows compare with them.
REFERENCE_THREADS = 1

RUN_EXAMPLES = """\b
Examples:
  tvr run smoke                      # seconds: every runner once, tiny sizes
  tvr run quick                      # the complexity sweep and crossover
  tvr run table1 --device cuda --max-memory 60GiB
  tvr run convergence-quick --only lstm --only transformer
  tvr run quick --fail-on error,oom  # exit 1 if any point failed (for CI)
  tvr run quick --threads 2          # timed points on 2 threads (default 1, as the reference)
  tvr run quick --dry-run            # list the points, measure nothing
  tvr run --suite-file my-suite.toml # a suite declared in a file
"""


class StatusList(click.ParamType):
    """Comma-separated point statuses: error,oom."""

    name = "STATUSES"

    def convert(self, value, param, ctx) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        names = tuple(v.strip() for v in str(value).split(",") if v.strip())
        for name in names:
            if name not in STATUSES:
                self.fail(f"{name!r} is not a status; valid: {', '.join(STATUSES)}", param, ctx)
        return names

    def shell_complete(self, ctx, param, incomplete):  # noqa: ANN001, ANN201
        from click.shell_completion import CompletionItem

        done, _, last = incomplete.rpartition(",")
        prefix = f"{done}," if done else ""
        return [CompletionItem(prefix + s) for s in STATUSES if s.startswith(last)]


def check_suite(suite: str) -> None:
    import experiments

    names = experiments.suite_names()
    if suite not in names:
        raise BadInput(f"unknown suite {suite!r}; valid: {', '.join(names)} (`tvr suites` "
                       "describes them)")


@click.command("run", epilog=RUN_EXAMPLES)
@click.argument("suite", required=False, metavar="SUITE", shell_complete=complete_suites)
@click.option("--suite-file", type=CheckedPath(dir_okay=False), default=None, metavar="FILE.toml",
              help="Run the suite declared in this TOML file instead of a named SUITE; its "
                   "results go to <out>/<its name>/.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="auto = cuda when available, else cpu.")
@out_option
@click.option("--tracking-uri", default=None,
              help="MLflow store; default $MLFLOW_TRACKING_URI, else sqlite:///<out>/mlflow.db; "
                   "'none' disables tracking.")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Skip points already done (ok or diverged) on this device in "
                   "<out>/<suite>/results.csv.")
@click.option("--dry-run", is_flag=True, help="List the points and exit without measuring.")
@click.option("--max-memory", type=Bytes(), default=None,
              help="Skip points whose predicted footprint exceeds this (e.g. 8GiB).")
@click.option("--min-run-time", type=Seconds(0.01, 60.0), default=0.2,
              show_default=True, help="Seconds of timed calls per measurement.")
@click.option("--dtype", type=DTYPE_CHOICE, default=None,
              help="Run every point in this dtype instead of the suite's: layer and compare "
                   "points cast the layer to it (native, not autocast); training points "
                   "accept float32 only for now.")
@click.option("--compile", "compile_", is_flag=True,
              help="Time torch.compile'd modules; compile time goes in column compile_s.")
@click.option("--corpus", type=CheckedPath(exists=True, dir_okay=False, readable=True),
              default=None, help="A local UTF-8 text file for the character-level corpus "
                                 "task instead of the King James Bible.")
@click.option("--parallel", multiple=True, metavar="PATH",
              help="Translation points: a user corpus instead of the Bible, one TSV "
                   "(source<TAB>target) or two line-aligned files (give --parallel twice).")
@click.option("--reverse", is_flag=True,
              help="Translation points: the reverse direction (Bible: English -> Chichewa).")
@click.option("--only", multiple=True, metavar="NAME",
              help="Only the points of this mixer or model (repeatable), e.g. --only lstm.")
@click.option("--fail-on", type=StatusList(), default="", metavar="STATUSES",
              help="Exit 1 when any point ends with one of these statuses, e.g. error,oom "
                   "(default: a finished sweep exits 0 whatever its points' statuses).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
              show_default=True,
              help="local: the points one by one in this process; ray: Ray tasks on a cluster.")
@click.option("--ray-address", default=None, metavar="ADDR",
              help="The Ray cluster to join (HOST:PORT, ray://HOST:PORT, auto); default "
                   "$RAY_ADDRESS, else a Ray instance started on this machine.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help=f"CPU threads for torch (--executor local). Default for a suite with timed "
                   f"points: {REFERENCE_THREADS}, the threads the committed reference was "
                   "measured with, so that rows compare; otherwise torch's choice. Every row "
                   "records its threads.")
@click.option("--cpus-per-point", type=click.IntRange(min=1), default=None,
              help="With --executor ray: CPUs (and torch threads) a training point reserves "
                   "(default 1); a timed point reserves its node's every CPU, or one GPU.")
@click.option("--keep-checkpoints", is_flag=True,
              help="Keep the checkpoints of finished training points (in "
                   "<out>/<suite>/checkpoints/); by default a finished point removes its own.")
def run_cmd(suite: str | None, suite_file: str | None, device: str, out: str,
            tracking_uri: str | None, resume: bool, dry_run: bool, max_memory: int | None,
            min_run_time: float, dtype: str | None, compile_: bool, corpus: str | None,
            parallel: tuple[str, ...], reverse: bool, only: tuple[str, ...],
            fail_on: tuple[str, ...], executor: str, ray_address: str | None,
            threads: int | None, cpus_per_point: int | None,
            keep_checkpoints: bool) -> None:
    """Measure every point of SUITE (`tvr suites` lists them) or of --suite-file; one
    results row and one MLflow run per point."""

    suite, description, points = _suite_points(suite, suite_file)
    if only:
        names = sorted({p.subject for p in points})
        unknown = [o for o in only if o not in names]
        if unknown:
            raise BadInput(f"--only {unknown[0]}: suite {suite!r} has no such mixer or model; "
                           f"valid: {', '.join(names)}")
        points = [p for p in points if p.subject in only]
    variant = []  # a run that changes what is measured gets its own results folder
    if corpus is not None:  # the path becomes a knob of the corpus-task points
        _check_utf8(corpus)
        points = [_with_corpus(p, str(Path(corpus).resolve())) for p in points]
        variant.append(f"corpus-{Path(corpus).stem}")
    from harness.cli.translation import corpus_choice

    points, corpus_variant = corpus_choice(points, parallel, reverse)
    variant += corpus_variant
    if dtype is not None or compile_:
        from harness.run.runners import CAST_RUNNERS

        if not any(p.runner in CAST_RUNNERS for p in points):
            raise BadInput(f"--dtype/--compile: suite {suite!r} has no point that honours them "
                           f"(only {', '.join(CAST_RUNNERS)} points do)")
        points = [replace(p, dtype=dtype or p.dtype, compile=compile_)
                  if p.runner in CAST_RUNNERS else p for p in points]
        variant += [dtype] if dtype else []
        variant += ["compiled"] if compile_ else []
    name = "-".join([suite, *variant])
    if dry_run:
        for p in points:
            click.echo(p.point_id)
        click.echo(f"{len(points)} points in suite {suite!r} (dry run: nothing measured)")
        return
    out_dir = output_folder(out)
    uri = store_uri(out_dir, tracking_uri)
    threads_before = _set_threads(threads, points, executor)
    if uri is not None:
        from harness.run.store import check_reachable

        check_reachable(uri)  # a server that does not answer: bad input before any point
    from harness.run.executor import make_executor

    where = make_executor(executor, ray_address, cpus_per_point)  # joins a cluster first
    try:
        dev = where.resolve_device(device)
        summary = _sweep(name, points, dev, out_dir, uri, resume, max_memory, min_run_time,
                         description=_describe(description, name),
                         outputs=lambda: _outputs(out_dir, name), executor=where,
                         headline=lambda: headline_of(out_dir, name),
                         keep_checkpoints=keep_checkpoints)
    finally:
        where.close()
        _restore_threads(threads_before)
    click.echo(summary.line())
    if summary.busy_warning():
        click.echo(summary.busy_warning(), err=True)
    if variant:
        click.echo(f"tables and figures: tvr table --suite {name}; tvr plot all --suite {name}")
    if uri and summary.tracking_off is None:
        _print_links(uri, name, out)
    failed = {s: n for s, n in summary.statuses.items() if s in fail_on}
    if failed:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(failed.items()))
        click.echo(f"failing: {counts} (--fail-on {','.join(fail_on)}); see "
                   f"{summary.results.parent / 'errors.log'}", err=True)
        raise SystemExit(1)


def _set_threads(threads: int | None, points: list[Point], executor: str) -> int | None:
    """torch's threads for this process's points: --threads, else the reference's for a
    suite with timed points (a Ray task sets its own: the CPUs it reserved); returns the
    threads before, to restore, or None if unchanged."""
    from harness.run.runners import CAST_RUNNERS

    if threads is not None and executor != "local":
        raise BadInput("--threads applies to --executor local; a Ray task runs with the CPUs "
                       "it reserves (--cpus-per-point for training points)")
    if threads is None and executor == "local" and any(p.runner in CAST_RUNNERS for p in points):
        threads = REFERENCE_THREADS
    if threads is None:
        return None
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # recorded in every row (machine facts: threads)
    return before


def _restore_threads(before: int | None) -> None:
    """The process's threads as before the sweep (a caller in the same process, a test)."""
    if before is not None:
        import torch

        torch.set_num_threads(before)


def _describe(description: str, name: str) -> str:
    """The suite's MLflow experiment description."""
    return (f"{description}\n\nEach child run is one point of suite `{name}` "
            "(named by what tells it apart: mixer or model, n, d, config); the parent run of "
            "each `tvr run` holds the summary, the results CSV, tables, figures and the "
            "machine's environment report. Written by tvr-bench.")


def _outputs(out_dir: Path, name: str) -> list[Path]:
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


def _print_links(uri: str, name: str, out: str) -> None:
    """Where to see the runs: the link to this suite's runs table in the MLflow UI."""
    from harness.run.store import is_remote, without_credentials
    from harness.run.ui import DEFAULT_PORT, runs_links

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


def _suite_points(suite: str | None, suite_file: str | None
                  ) -> tuple[str, str, list[Point]]:
    """(name, description, points) of a named suite or of a suite file, checked before
    anything runs."""
    if (suite is None) == (suite_file is None):
        raise BadInput("name a SUITE (`tvr suites` lists them) or give --suite-file FILE.toml"
                       if suite is None else f"SUITE {suite!r} and --suite-file: give one")
    if suite is not None:
        import experiments

        suite = experiments.current_name(suite)
        check_suite(suite)
        return suite, experiments.describe(suite), experiments.points(suite)
    from experiments.suitefile import load
    from harness.train.points import train_spec

    try:
        name, description, points = load(suite_file)
        for p in points:  # tasks are the harness's: checked here, before the first point
            if p.runner == "train":
                train_spec(p)
    except ValueError as exc:  # SuiteFileError names the file; a task error gets it here
        msg = str(exc)
        raise BadInput(msg if msg.startswith("suite file") else
                       f"suite file {suite_file}: [grid.train]: {msg}") from None
    return name, description, points


def _sweep(name: str, points: list[Point], dev, out_dir: Path, *args, **kwargs):  # noqa: ANN001, ANN202
    """run_suite, with a stop signal or a failed write ending the command in one line."""
    from harness.run import sweep

    with _stopping(out_dir / name / "results.csv"):
        return sweep.run_suite(name, points, dev, out_dir, *args, **kwargs)


@contextmanager
def _stopping(csv: Path) -> Iterator[None]:
    """A stop signal (exit 143/130) or a failed write (exit 1) ends the command in one line."""
    from harness.run.signals import stop_on_signals, stopped_exit

    try:
        with stop_on_signals():
            yield
    except KeyboardInterrupt:  # Stopped, or what Ray's wait made of it
        raise stopped_exit(csv) from None
    except OSError as e:  # disk full, read-only, removed folder: nothing to measure into
        raise click.ClickException(f"cannot write the results under {csv.parent.parent}: "
                                   f"{e.strerror or e}") from None


def _check_utf8(path: str) -> None:
    """A corpus must be a regular file of UTF-8 text with something in it: a FIFO would
    block the read forever, and an empty or binary file would give a column of error rows."""
    from harness.inputs import read_bounded
    from harness.train.translation.corpus import MAX_CORPUS_BYTES

    try:
        text = read_bounded(path, MAX_CORPUS_BYTES, "--corpus").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"--corpus {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None
    except OSError as exc:
        raise BadInput(f"--corpus {path}: cannot be read ({exc.strerror})") from None
    if not text.strip():
        raise BadInput(f"--corpus {path}: the file is empty")


def _with_corpus(point: Point, path: str) -> Point:
    """The point trained on the text at `path` if it is a corpus-task point."""
    from experiments.spec import TrainOptions

    opts = point.options
    if not isinstance(opts, TrainOptions) or opts.task.name != "corpus":
        return point
    keywords = tuple(sorted((dict(opts.task.keywords) | {"path": path}).items()))
    return replace(point, options=replace(opts, task=replace(opts.task, keywords=keywords)))


@click.command("bench", epilog="""\b
Examples:
  tvr bench --quick             # the headline sizes only
  tvr bench --threads 1         # steadier on cores shared with other jobs
  tvr bench --profile           # torch.profiler's per-op table instead of timing
  tvr bench --no-onednn         # as on a machine without oneDNN: F.linear, torch.mm peak""")
@out_option
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="auto = cuda when available, else cpu.")
@click.option("--dtype", type=click.Choice(["auto", *DTYPE_CHOICE.choices]), default="auto",
              show_default=True, help="auto = float32 on CPU, bfloat16 on CUDA.")
@click.option("--tracking-uri", default=None, help="As for `tvr run`.")
@click.option("--quick", is_flag=True, help="Only the headline sizes, 5 repetitions.")
@click.option("--tiny", is_flag=True,
              help="Toy sizes that test the plumbing in seconds; their numbers mean nothing.")
@click.option("--min-run-time", type=Seconds(0.01, 60.0), default=0.05,
              show_default=True,
              help="Seconds of timed calls per contestant and repetition (a call longer than "
                   "this is timed once: more, shorter turns interleave better than long ones).")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="CPU threads for torch (default: torch's choice); one thread is steadier "
                   "on cores shared with other jobs.")
@click.option("--profile", "profile_", is_flag=True,
              help="Instead of timing: torch.profiler's per-op table of our transformer layer "
                   "vs PyTorch's, written to <out>/bench/profile.md.")
@click.option("--no-onednn", is_flag=True,
              help="Remove oneDNN from the kernel candidates (linear maps and the peak "
                   "matmul), as $TVR_DISABLE_ONEDNN=1 does: F.linear and torch.mm only.")
def bench_cmd(out: str, device: str, dtype: str, tracking_uri: str | None, quick: bool,
              tiny: bool, min_run_time: float, threads: int | None, profile_: bool,
              no_onednn: bool) -> None:
    """Our transformer layer, LSTM and GRU against PyTorch's own layers (weights copied,
    outputs checked), forward+backward, timed interleaved; prints ratios, MFU and the
    harness-timer check, writes <out>/bench/results.csv and table.md."""
    from harness.report import bench as bench_report
    from harness.run import bench, sweep

    if quick and tiny:
        raise BadInput("--quick and --tiny: choose one")
    dev = sweep.resolve_device(device)
    out_dir = output_folder(out)
    uri = store_uri(out_dir, tracking_uri)
    grid = "tiny" if tiny else "quick" if quick else "full"
    if no_onednn:  # read by models.kernels wherever it picks a kernel, in this process
        from models.kernels import DISABLE_ONEDNN_ENV

        os.environ[DISABLE_ONEDNN_ENV] = "1"
    if threads is not None:
        import torch

        torch.set_num_threads(threads)  # recorded in every row (machine facts: threads)
    if profile_:
        setup, profiles = bench.run_profile(dev, dtype, grid)
        markdown = bench_report.profile_markdown(setup, profiles)
        path = bench_report.write_markdown(out_dir / bench.SUITE, bench_report.PROFILE_FILE,
                                           markdown)
        click.echo(markdown + f"profile: {path}")
        return
    with _stopping(out_dir / bench.SUITE / "results.csv"):
        result = bench.run_bench(dev, dtype, grid, out_dir, uri, min_run_time)
        markdown = bench_report.bench_markdown(result.rows, result.facts, grid, result.dtype,
                                               dev.type)
        path = bench_report.write_markdown(out_dir / bench.SUITE, bench_report.TABLE_FILE,
                                           markdown)
    click.echo(markdown, nl=False)
    click.echo(result.summary.line())
    click.echo(f"table: {path}")
