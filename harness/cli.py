"""The `tvr` command: one thin subcommand per verb.

Exit codes: 0 done; 2 bad input, one line naming the value, no traceback; 1 else.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import click

import experiments
import models
from experiments.spec import Point, TrainOptions
from harness.errors import BadInput

OUT_HELP = "Results directory (suite CSVs, tables, figures, MLflow store)."


class _BadInputError(click.ClickException):
    exit_code = 2


class _Group(click.Group):
    """Turns BadInput raised anywhere below a command into exit code 2 and one line."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BadInput as exc:
            raise _BadInputError(str(exc)) from None


class _Bytes(click.ParamType):
    """A byte count: 123, 512MB, 8GiB, 1.5G."""

    name = "BYTES"
    _UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
              "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]i?)?b?\s*", str(value), re.I)
        if not m:
            self.fail(f"{value!r} is not a byte count (e.g. 4000000000, 512MB, 8GiB)", param, ctx)
        return int(float(m.group(1)) * self._UNITS[(m.group(2) or "").lower()])


def _out_dir(out: str) -> Path:
    """The output directory, created if needed; unwritable -> bad input before any work."""
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".tvr-write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot write there ({exc.strerror})") from None
    return path


def _version() -> str:
    """The installed version; a checkout run with PYTHONPATH=. (scripts/gpu-check) has none."""
    try:
        return version("tvr-bench")
    except PackageNotFoundError:
        return "(not installed; run from a source checkout)"


def _tracking_uri(out_dir: Path, tracking_uri: str | None) -> str | None:
    """resolve_tracking_uri, plus bad input (not a traceback later) when MLflow is missing."""
    from harness.run.store import resolve_tracking_uri

    uri = resolve_tracking_uri(out_dir, tracking_uri)
    if uri is not None and importlib.util.find_spec("mlflow") is None:
        raise BadInput(f"tracking URI {uri}: MLflow is not installed here; install it or "
                       "pass --tracking-uri none")
    return uri


DTYPE_CHOICE = click.Choice(["float32", "bfloat16", "float16"])


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), prog_name="tvr")
def cli() -> None:
    """tvr-bench: measure what "Attention is all you need" claims about self-attention
    versus recurrence (LSTM, GRU), on the same work.

    \b
    Start with:  tvr suites;  tvr run quick;  tvr table;  tvr plot;  tvr ui
    """


@cli.command("models")
@click.option("--preset", type=click.Choice(list(models.PRESETS)), default="tiny",
              show_default=True, help="Preset whose sizes the parameter counts use.")
def models_cmd(preset: str) -> None:
    """List model names and mixer kinds with their parameter counts."""
    import torch

    cfg = models.model_config("transformer", preset)
    click.echo(f"models (preset {preset!r}):")
    for name in models.names():
        with torch.device("meta"):  # shapes only: counting --preset big allocates nothing
            n = sum(p.numel() for p in models.build(name, preset).parameters())
        click.echo(f"  {name:<16} {n:>12,d}  {models.describe(name)}")
    click.echo(f"mixers (d_model={cfg.d_model}):")
    for kind in models.mixer_kinds():
        n = sum(p.numel() for p in models.mixer(kind, cfg.d_model).parameters())
        click.echo(f"  {kind:<20} {n:>10,d}")


@cli.command("suites")
def suites_cmd() -> None:
    """List the suites with their point counts."""
    names = experiments.suite_names()
    width = max(map(len, names))
    for name in names:
        click.echo(f"{name:<{width}} {len(experiments.points(name)):>4} points  "
                   f"{experiments.describe(name)}")


@cli.command("run")
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
@click.option("--max-memory", type=_Bytes(), default=None,
              help="Skip points whose predicted footprint exceeds this (e.g. 8GiB).")
@click.option("--min-run-time", type=click.FloatRange(min=0.01), default=0.2,
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
@click.option("--only", multiple=True, metavar="NAME",
              help="Only the points of this mixer or model (repeatable), e.g. --only lstm.")
def run_cmd(suite: str, device: str, out: str, tracking_uri: str | None, resume: bool,
            dry_run: bool, max_memory: int | None, min_run_time: float, dtype: str | None,
            compile_: bool, corpus: str | None, only: tuple[str, ...]) -> None:
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
    out_dir = _out_dir(out)
    uri = _tracking_uri(out_dir, tracking_uri)
    summary = sweep.run_suite(name, points, dev, out_dir, uri, resume, max_memory, min_run_time)
    click.echo(summary.line())
    if variant:
        click.echo(f"tables and figures: tvr table --suite {name}; tvr plot all --suite {name}")
    if uri:
        click.echo(f"MLflow: {uri} (browse with `tvr ui --out {out}`)")


def _check_utf8(path: str) -> None:
    """A corpus that is not UTF-8 text is bad input, not a column of error rows."""
    try:
        Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"--corpus {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None


def _with_corpus(point: Point, path: str) -> Point:
    """The point trained on the text at `path` if it is a corpus-task point."""
    opts = point.options
    if not isinstance(opts, TrainOptions) or opts.task.name != "corpus":
        return point
    keywords = tuple(sorted((dict(opts.task.keywords) | {"path": path}).items()))
    return replace(point, options=replace(opts, task=replace(opts.task, keywords=keywords)))


@cli.command("bench")
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="auto = cuda when available, else cpu.")
@click.option("--dtype", type=click.Choice(["auto", *DTYPE_CHOICE.choices]), default="auto",
              show_default=True, help="auto = float32 on CPU, bfloat16 on CUDA.")
@click.option("--tracking-uri", default=None, help="As for `tvr run`.")
@click.option("--quick", is_flag=True, help="Only the headline sizes, 5 repetitions.")
@click.option("--tiny", is_flag=True,
              help="Toy sizes that test the plumbing in seconds; their numbers mean nothing.")
@click.option("--min-run-time", type=click.FloatRange(min=0.01), default=0.05,
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
    out_dir = _out_dir(out)
    uri = _tracking_uri(out_dir, tracking_uri)
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
    result = bench.run_bench(dev, dtype, grid, out_dir, uri, min_run_time)
    markdown = bench_report.bench_markdown(result.rows, result.facts, grid, result.dtype,
                                           dev.type)
    path = bench_report.write_markdown(out_dir / bench.SUITE, bench_report.TABLE_FILE, markdown)
    click.echo(markdown, nl=False)
    click.echo(result.summary.line())
    click.echo(f"table: {path}")


def _load(out: str, suite: str):
    from harness.results import load_results

    return load_results(Path(out), [suite])


@cli.command("table")
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


@cli.command("plot")
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


@cli.command("report")
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
@click.option("--suite", default=None, help="Only this suite [default: every suite in --out].")
def report_cmd(out: str, suite: str | None) -> None:
    """Write <out>/REPORT.md: every suite's tables and figures, with the machine they ran on."""
    from harness.report import document as report

    click.echo(str(report.write_report(Path(out), suite)))


@cli.command("ui")
@click.option("--port", type=click.IntRange(1, 65535), default=5000, show_default=True)
@click.option("--out", default="results", show_default=True, help=OUT_HELP)
@click.option("--tracking-uri", default=None, help="As for `tvr run`.")
def ui_cmd(port: int, out: str, tracking_uri: str | None) -> None:
    """Browse the runs: start the MLflow UI on 127.0.0.1 with the same store."""
    from harness.run.store import resolve_tracking_uri
    from harness.run.ui import serve_ui

    out_dir = _out_dir(out)
    uri = resolve_tracking_uri(out_dir, tracking_uri)
    if uri is None:
        raise BadInput("--tracking-uri none: there is no store to browse")
    raise SystemExit(serve_ui(uri, out_dir, port))


def main() -> None:
    cli.main(prog_name="tvr")


if __name__ == "__main__":  # `python3 -m harness.cli` from a checkout (scripts/gpu-check)
    main()
