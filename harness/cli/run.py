"""`tvr run` and `tvr bench`: measure points into results CSVs (and MLflow)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import click

import experiments
from experiments.spec import Point, TrainOptions
from harness.cli.common import (
    DTYPE_CHOICE,
    OUT_HELP,
    Bytes,
    Seconds,
    output_folder,
    store_uri,
)
from harness.cli.translation import corpus_choice
from harness.errors import BadInput
from harness.run.store import mask


@click.command("run")
@click.argument("suite", type=click.Choice(experiments.suite_names()))
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="auto = cuda when available, else cpu.")
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
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
@click.option("--corpus", type=click.Path(exists=True, dir_okay=False, readable=True),
              default=None, help="A local UTF-8 text file for the character-level corpus "
                                 "task instead of the King James Bible.")
@click.option("--parallel", multiple=True, metavar="PATH",
              help="Translation points: a user corpus instead of the Bible, one TSV "
                   "(source<TAB>target) or two line-aligned files (give --parallel twice).")
@click.option("--reverse", is_flag=True,
              help="Translation points: the reverse direction (Bible: English -> Chichewa).")
@click.option("--only", multiple=True, metavar="NAME",
              help="Only the points of this mixer or model (repeatable), e.g. --only lstm.")
def run_cmd(suite: str, device: str, out: str, tracking_uri: str | None, resume: bool,
            dry_run: bool, max_memory: int | None, min_run_time: float, dtype: str | None,
            compile_: bool, corpus: str | None, parallel: tuple[str, ...], reverse: bool,
            only: tuple[str, ...]) -> None:
    """Measure every point of SUITE; one results row and one MLflow run per point."""
    from harness.run import sweep

    points = experiments.points(suite)
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
    dev = sweep.resolve_device(device)
    out_dir = output_folder(out)
    uri = store_uri(out_dir, tracking_uri)
    summary = _sweep(name, points, dev, out_dir, uri, resume, max_memory, min_run_time)
    click.echo(summary.line())
    if variant:
        click.echo(f"tables and figures: tvr table --suite {name}; tvr plot all --suite {name}")
    if uri and summary.tracking_off is None:
        click.echo(f"MLflow: {mask(uri)} (browse with `tvr ui --out {out}`)")


def _sweep(name: str, points: list[Point], dev, out_dir: Path, *args):  # noqa: ANN001, ANN202
    """run_suite, with a stop signal or a failed write ending the command in one line."""
    from harness.run import sweep

    with _stopping(out_dir / name / "results.csv"):
        return sweep.run_suite(name, points, dev, out_dir, *args)


@contextmanager
def _stopping(csv: Path) -> Iterator[None]:
    """A stop signal (exit 143/130) or a failed write (exit 1) ends the command in one line."""
    from harness.run.signals import Stopped, stop_on_signals

    try:
        with stop_on_signals():
            yield
    except Stopped as stop:
        click.echo(f"stopped by {stop.name}: the point in flight was dropped, every finished "
                   f"one is in {csv}; the same command resumes", err=True)
        raise SystemExit(stop.exit_code) from None
    except OSError as e:  # disk full, read-only, removed folder: nothing to measure into
        raise click.ClickException(f"cannot write the results under {csv.parent.parent}: "
                                   f"{e.strerror or e}") from None


def _check_utf8(path: str) -> None:
    """A corpus must be a regular file of UTF-8 text with something in it: a FIFO would
    block the read forever, and an empty or binary file would give a column of error rows."""
    if not Path(path).is_file():
        raise BadInput(f"--corpus {path}: not a regular file")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"--corpus {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None
    except OSError as exc:
        raise BadInput(f"--corpus {path}: cannot be read ({exc.strerror})") from None
    if not text.strip():
        raise BadInput(f"--corpus {path}: the file is empty")


def _with_corpus(point: Point, path: str) -> Point:
    """The point trained on the text at `path` if it is a corpus-task point."""
    opts = point.options
    if not isinstance(opts, TrainOptions) or opts.task.name != "corpus":
        return point
    keywords = tuple(sorted((dict(opts.task.keywords) | {"path": path}).items()))
    return replace(point, options=replace(opts, task=replace(opts.task, keywords=keywords)))


@click.command("bench")
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
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
def bench_cmd(out: str, device: str, dtype: str, tracking_uri: str | None, quick: bool,
              tiny: bool, min_run_time: float, threads: int | None, profile_: bool) -> None:
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
