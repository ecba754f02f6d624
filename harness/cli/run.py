"""`tvr run` and `tvr bench`: measure points into results CSVs (and MLflow)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from harness.cli.common import (
    DTYPE_CHOICE,
    Bytes,
    CheckedPath,
    Seconds,
    Threads,
    complete_suites,
    out_option,
    output_folder,
    store_uri,
)
from harness.cli.sweeping import REFERENCE_THREADS, RunOptions, stopping
from harness.errors import BadInput
from harness.inputs import folder_name

STATUSES = ("ok", "oom", "diverged", "error", "skipped")  # harness.results.STATUSES

RUN_EXAMPLES = """\b
Examples:
  tvr run smoke                      # seconds: every runner once, tiny sizes
  tvr run quick                      # the complexity sweep and crossover
  tvr run table1 --device cuda --max-memory 60GiB
  tvr run convergence-quick --only lstm --only transformer
  tvr run convergence-quick --set steps=2000  # a variant: <out>/<suite>/variants/steps-2000/
  tvr run quick --fail-on error,oom  # exit 1 if any point failed (for CI)
  tvr run quick --threads 2          # timed points on 2 threads (default 1, as the reference)
  tvr run quick --dry-run            # the points to do and their expected time
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


def _renamed(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
             ) -> tuple[str, ...]:
    """--parallel, the old name of --bitext: still read, with one line saying so."""
    if value:
        click.echo("note: --parallel is now --bitext (a bilingual corpus); --parallel will go",
                   err=True)
    return value


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
@click.option("--dry-run", is_flag=True,
              help="List the points to do, count those already done, estimate their time "
                   "from the reference rows in <out>, and exit without measuring.")
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
@click.option("--bitext", multiple=True, metavar="PATH",
              help="Translation points: a user's bilingual corpus instead of the Bible, one "
                   "TSV (source<TAB>target) or two line-aligned files (give --bitext twice).")
@click.option("--parallel", multiple=True, metavar="PATH", hidden=True, callback=_renamed)
@click.option("--reverse", is_flag=True,
              help="Translation points: the reverse direction (Bible: English -> Chichewa).")
@click.option("--only", multiple=True, metavar="NAME",
              help="Only the points of this mixer or model (repeatable), e.g. --only lstm.")
@click.option("--set", "set_", multiple=True, metavar="KEY=VALUE",
              help="Change one setting of every point that has it (repeatable): a size "
                   "(seq_len, d_model, batch_size, seed), an option (steps=2000, lr=3e-4) or "
                   "a model config key (n_heads=4); the results go to the suite's variant "
                   "<suite>/variants/KEY-VALUE/, VALUE as the setting's type reads it "
                   "(dropout=0 and dropout=0.0: one variant).")
@click.option("--fail-on", type=StatusList(), default="", metavar="STATUSES",
              help="Exit 1 when any point ends with one of these statuses, e.g. error,oom "
                   "(default: a finished sweep exits 0 whatever its points' statuses).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
              show_default=True,
              help="local: the points one by one in this process; ray: Ray tasks on a cluster.")
@click.option("--ray-address", default=None, metavar="ADDR",
              help="The Ray cluster to join (HOST:PORT, ray://HOST:PORT, auto); default "
                   "$RAY_ADDRESS, else a Ray instance started on this machine.")
@click.option("--threads", type=Threads(), default=None,
              help=f"CPU threads for torch (--executor local; at most this machine's CPUs). "
                   f"Default for a suite with timed points: {REFERENCE_THREADS}, the threads "
                   "the committed reference was measured with, so that rows compare; "
                   "otherwise torch's choice. Every row records its threads.")
@click.option("--cpus-per-point", type=click.IntRange(min=1), default=None,
              help="With --executor ray: CPUs (and torch threads) a training point reserves "
                   "(default 1); a timed point reserves its node's every CPU, or one GPU.")
@click.option("--keep-checkpoints", is_flag=True,
              help="Keep the checkpoints of finished training points (in "
                   "<out>/<suite>/checkpoints/); by default a finished point removes its own.")
def run_cmd(**options: Any) -> None:
    """Measure every point of SUITE (`tvr suites` lists them) or of --suite-file; one
    results row and one MLflow run per point."""
    from harness.cli.points import chosen_points, suite_points
    from harness.cli.sweeping import sweep, tell
    from harness.variants import checked_name

    o = RunOptions(**options)
    suite, description, points = suite_points(o.suite, o.suite_file)
    points, name = chosen_points(points, suite, o.only, o.corpus, o.bitext + o.parallel,
                                 o.reverse, o.dtype, o.compile_, o.set_)
    folder_name(suite, "suite")  # <out>/<suite>/: a plugin's suite named "../x" stays under it
    checked_name(name)  # a variant: <out>/<suite>/variants/<variant>/
    moved_variant(Path(o.out), name)
    if any(getattr(p.options, "recipe", "") for p in points):  # a search's best, in the ids
        from harness.train.translation.recipe import apply

        points = apply(points, output_folder(o.out),
                       tuple(s.split("=", 1)[0].strip() for s in o.set_))
    if o.dry_run:
        from harness.cli.estimate import dry_run

        dry_run(suite, name, points, o)
        return
    out_dir = output_folder(o.out)
    uri = store_uri(out_dir, o.tracking_uri)
    summary = sweep(name, description, points, out_dir, uri, o)
    tell(summary, name, name != suite, uri, o)


def moved_variant(out: Path, name: str) -> None:
    """BadInput where a variant's rows are still in the folder a run with its overrides
    wrote before variants lived under their suite (`<out>/<suite>-<variant>/`, its rows
    naming the suite; a suite file's suite of that name has rows naming itself): resume
    would not find them, so the command says how to move them rather than measure them
    again."""
    from shlex import quote

    from harness.results import read_results
    from harness.variants import split_name

    suite, variant = split_name(name)
    old, new = out / f"{suite}-{variant}", out / name
    if not variant or not (old / "results.csv").is_file() or new.exists():
        return
    if set(read_results(old / "results.csv")["suite"].astype(str)) == {suite}:
        raise BadInput(f"the rows of this run are in {old}, where runs with overrides went "
                       f"before a suite's variants lived under it: move them with `mkdir -p "
                       f"{quote(str(new.parent))} && mv {quote(str(old))} {quote(str(new))}`"
                       " (`git mv` in a repository), then run again")


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
@click.option("--threads", type=Threads(), default=None,
              help="CPU threads for torch (default: torch's choice; at most this machine's "
                   "CPUs); one thread is steadier on cores shared with other jobs.")
@click.option("--profile", "profile_", is_flag=True,
              help="Instead of timing: torch.profiler's per-op table of our transformer layer "
                   "vs PyTorch's, written to <out>/bench/profile.md.")
@click.option("--no-onednn", is_flag=True,
              help="Remove oneDNN from the kernel candidates (linear maps and the peak "
                   "matmul), as $TVR_DISABLE_ONEDNN=1 does: F.linear and torch.mm only; "
                   "rows go to <out>/bench-no-onednn/.")
def bench_cmd(out: str, device: str, dtype: str, tracking_uri: str | None, quick: bool,
              tiny: bool, min_run_time: float, threads: int | None, profile_: bool,
              no_onednn: bool) -> None:
    """Our transformer layer, LSTM and GRU against PyTorch's own layers (weights copied,
    outputs checked), forward+backward, timed interleaved; prints ratios, MFU and the
    harness-timer check, writes <out>/bench/results.csv and table.md."""
    from harness.report import bench as bench_report
    from harness.run import bench_sweep
    from harness.run.point import resolve_device

    if quick and tiny:
        raise BadInput("--quick and --tiny: choose one")
    dev = resolve_device(device)
    out_dir = output_folder(out)
    uri = store_uri(out_dir, tracking_uri)
    grid = "tiny" if tiny else "quick" if quick else "full"
    if no_onednn:  # read by harness.measure.kernels wherever it picks a kernel, in this process
        from harness.measure.kernels import DISABLE_ONEDNN_ENV

        os.environ[DISABLE_ONEDNN_ENV] = "1"
    if threads is not None:
        import torch

        torch.set_num_threads(threads)  # recorded in every row (machine facts: threads)
    folder = out_dir / bench_sweep.suite()  # after --no-onednn set the environment it reads
    if profile_:
        setup, profiles = bench_sweep.run_profile(dev, dtype, grid)
        markdown = bench_report.profile_markdown(setup, profiles)
        path = bench_report.write_markdown(folder, bench_report.PROFILE_FILE, markdown)
        click.echo(markdown + f"profile: {path}")
        return
    with stopping(folder / "results.csv"):
        result = bench_sweep.run_bench(dev, dtype, grid, out_dir, uri, min_run_time)
        markdown = bench_report.bench_markdown(result.rows, result.facts, grid, result.dtype,
                                               dev.type)
        path = bench_report.write_markdown(folder, bench_report.TABLE_FILE, markdown)
    click.echo(markdown, nl=False)
    click.echo(result.summary.line())
    click.echo(f"table: {path}")


@click.command("tune", epilog="""\b
Examples:
  tvr tune translation-cpu-tune                     # every model, the search's trial count
  tvr tune translation-cpu-tune --only transformer  # one model (run another beside it,
                                                    #   or the same: two processes, one study)
  tvr tune translation-cpu-tune --trials 8          # stop once 8 trials per model finished
  tvr tune translation-cpu-tune --storage postgresql+psycopg://me@db.lan/tune
                                                    # one study for processes on several machines
  tvr tune translation-cpu-tune --summary           # the best recipe so far, nothing run""")
@click.argument("search", metavar="SEARCH")
@out_option
@click.option("--only", multiple=True, metavar="MODEL",
              help="Only the trials of this model (repeatable).")
@click.option("--trials", type=click.IntRange(min=1), default=None,
              help="Finished (completed or pruned) trials per model to reach; default: the "
                   "search's own count. A rerun continues the study.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
              show_default=True, help="auto = cuda when available, else cpu.")
@click.option("--threads", type=Threads(), default=1, show_default=True,
              help="CPU threads for torch (one search process per core).")
@click.option("--tracking-uri", default=None, help="As for `tvr run`.")
@click.option("--storage", default=None, metavar="URL",
              help="The studies' database, any URL Optuna accepts (PostgreSQL for processes "
                   "on several machines); default: sqlite:///<out>/SEARCH/optuna.db.")
@click.option("--heartbeat", type=click.IntRange(min=1), default=60, show_default=True,
              metavar="SECONDS", help="A trial under way beats this often in the study; one "
                                      "silent for 3 beats (its process gone) is asked again.")
@click.option("--summary", "summary_only", is_flag=True,
              help="Print the best recipe per model from the trials' rows and exit.")
def tune_cmd(search: str, out: str, only: tuple[str, ...], trials: int | None, device: str,
             threads: int, tracking_uri: str | None, storage: str | None, heartbeat: int,
             summary_only: bool) -> None:
    """Tune the recipe of each model of SEARCH with Optuna (TPE sampling, successive-halving
    pruning on the dev curve); each trial is a point of the suite SEARCH (rows in
    <out>/SEARCH/results.csv). A suite whose points name the search as their recipe
    (`tvr run translation-cpu-tuned`) then trains each model with its best trial's recipe."""
    import experiments

    if search not in experiments.SEARCHES:
        raise BadInput(f"unknown search {search!r}; valid: {', '.join(experiments.SEARCHES)}")
    import torch

    from harness.cli.sweeping import stopping
    from harness.run import tune
    from harness.run.point import resolve_device

    s = experiments.SEARCHES[search]()
    chosen = tune.bases(s, only)
    # --summary only reads: the rows and curves of a folder it may not write to
    out_dir = Path(out) if summary_only else output_folder(out)
    if not summary_only:
        uri = store_uri(out_dir, tracking_uri)
        dev = resolve_device(device)
        torch.set_num_threads(threads)
        with stopping(out_dir / search / "results.csv"):
            for base in chosen:
                st = tune.tune_model(s, base, out_dir, dev, uri, trials or s.trials, True,
                                     storage, heartbeat)
                click.echo(f"{search} {base.subject}: {tune.counts(st)}")
    from harness.files import write_atomic
    from harness.run.search_doc import document

    doc = document(s, out_dir)
    click.echo(doc.split("## Best finished trial per model", 1)[1].strip())
    if summary_only:
        return
    write_atomic(out_dir / search / "search.md", doc)
    click.echo(f"space, trials and best recipes: {out_dir / search / 'search.md'}")
