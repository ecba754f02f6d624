"""The `tvr` command: one thin subcommand per verb.

Exit codes: 0 done; 2 bad input, one line naming the value, no traceback; 1 else (and a
sweep with `--fail-on` statuses). Every option also reads an environment variable,
TVR_<COMMAND>_<OPTION> (e.g. TVR_RUN_OUT), shown in each command's --help.

Nothing heavy is imported here: torch, pandas, MLflow and the suites load inside the
command that needs them, so `tvr --help` and shell completion answer at once.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

from harness import signals

# The `tvr` command itself (not a test importing it): a stop signal from the first instant
# exits with 143/130 and one line, even while click and the rest still import.
if os.path.basename(sys.argv[0]) in ("tvr", "-m"):
    signals.early()

import click  # noqa: E402

from harness.cli import docs, estimate, migrate, report, run, tracking  # noqa: E402
from harness.cli.common import FORMAT_JSON, echo_json  # noqa: E402
from harness.errors import BadInput  # noqa: E402


class _BadInputError(click.ClickException):
    exit_code = 2


class _Group(click.Group):
    """Turns BadInput raised anywhere below a command into exit code 2 and one line, and so
    an error the system gives for a path (harness.inputs.PATH_ERRNOS: a loop of links, a name
    too long, no permission, a read-only file system) that no check before caught."""

    def make_context(self, *args, **kwargs) -> click.Context:  # noqa: ANN002, ANN003
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:  # a stop signal while the arguments are read
            raise signals.stopped_exit() from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (BadInput, click.ClickException, OSError) as exc:
            _disk_full(exc)  # whatever said it first (a damaged study, a failed write)
            if isinstance(exc, BadInput):
                raise _BadInputError(str(exc)) from None
            if isinstance(exc, click.ClickException):
                raise
            from harness.inputs import PATH_ERRNOS, path_error

            if exc.errno not in PATH_ERRNOS:
                raise
            raise _BadInputError(str(path_error(exc))) from None
        except KeyboardInterrupt:  # a stop signal: 143/130 and one line, never "Aborted!"
            raise signals.stopped_exit() from None


def _disk_full(exc: BaseException) -> None:
    """A full disk said as one (exit 1), whatever the error that met it says: an SQLite
    study that cannot grow is not a damaged one, and moving it aside would not help."""
    from harness.files import disk_full

    full = disk_full(exc)
    if full is not None:
        why, where = full
        raise click.ClickException(
            f"the disk is full{f' at {where}' if where else ''} ({why}): free space there, or "
            "choose another --out; what was written before it filled is kept") from None


def _version() -> str:
    """The installed version; a checkout run with PYTHONPATH=. (scripts/gpu-check) has none."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tvr-bench")
    except PackageNotFoundError:
        return "(not installed; run from a source checkout)"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"tvr {_version()}")
        ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="""\b
Shell completion (bash; zsh and fish alike, see click's docs):
  eval "$(_TVR_COMPLETE=bash_source tvr)"
Every option reads TVR_<COMMAND>_<OPTION> too, e.g. TVR_RUN_OUT=/data/results.""")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version and exit.")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE", envvar="TVR_PLUGIN",
              show_envvar=True,
              help="Import MODULE first (repeatable): a module that adds mixers, models or "
                   "suites with models.register_mixer / register_model / "
                   "experiments.register_suite. Installed packages need no flag: their "
                   "tvr.mixers, tvr.models and tvr.suites entry points are read on use.")
def cli(plugins: tuple[str, ...]) -> None:
    """tvr-bench: measure what "Attention is all you need" claims about self-attention
    versus recurrence (LSTM, GRU), on the same work.

    \b
    Start with:  tvr suites;  tvr run quick;  tvr table;  tvr plot;  tvr ui
    """
    if not plugins:  # models.plugins imports torch: not for `tvr run --help`
        return
    from harness.inputs import check_lookup
    from models.plugins import import_module

    for module in plugins:
        if module.endswith(".py") or os.sep in module:  # a path: a loop, a long name said
            check_lookup(module, "--plugin")
        try:
            import_module(module)
        except ValueError as exc:
            raise BadInput(str(exc)) from None


@cli.command("models", epilog="Example: tvr models --preset base --format json")
@click.option("--preset", type=click.Choice(["tiny", "small", "base", "big"]), default="tiny",
              show_default=True, help="Preset whose sizes the parameter counts use.")
@FORMAT_JSON
def models_cmd(preset: str, fmt: str) -> None:
    """List model names and mixer kinds with their parameter counts."""
    import torch

    import models

    if preset not in models.PRESETS:  # the Choice above mirrors models.PRESETS
        raise BadInput(f"unknown preset {preset!r}; valid: {', '.join(models.PRESETS)}")
    cfg = models.model_config("transformer", preset)
    rows = []
    for name in models.names():
        with torch.device("meta"):  # shapes only: counting --preset big allocates nothing
            n = _params(lambda name=name: models.build(name, preset))
        rows.append({"kind": "model", "name": name, "parameters": n,
                     "description": models.describe(name), "from": models.provider(name, "model")})
    for kind in models.mixer_kinds():
        n = _params(lambda kind=kind: models.mixer(kind, cfg.d_model))
        rows.append({"kind": "mixer", "name": kind, "parameters": n, "d_model": cfg.d_model,
                     "from": models.provider(kind, "mixer")})
    if fmt == "json":
        echo_json({"preset": preset, "entries": rows})
        return
    click.echo(f"models (preset {preset!r}):")
    for r in rows:
        if r["kind"] == "model":
            click.echo(f"  {r['name']:<16} {_count(r['parameters'], 12)}  {r['description']}"
                       f"{_origin(r['from'])}")
    click.echo(f"mixers (d_model={cfg.d_model}):")
    for r in rows:
        if r["kind"] == "mixer":
            click.echo(f"  {r['name']:<20} {_count(r['parameters'], 10)}{_origin(r['from'])}")


def _params(make) -> int | str:  # noqa: ANN001
    """The parameter count of make(); for a plugin's component that its defaults cannot
    build (a knob without a default), why not."""
    try:
        return sum(p.numel() for p in make().parameters())
    except ValueError as exc:
        return f"? ({exc})"


def _count(n: int | str, width: int) -> str:
    return f"{n:>{width},d}" if isinstance(n, int) else f"{n:>{width}}"


def _origin(source: str) -> str:
    """"  [from PACKAGE]" for a plugin's model, mixer or suite; nothing for a built-in one."""
    from models.plugins import BUILTIN

    return "" if source == BUILTIN else f"  [from {source}]"


@cli.command("suites", epilog="Example: tvr suites --long")
@FORMAT_JSON
@click.option("--long", "long_", is_flag=True, help="Each suite's full description.")
def suites_cmd(fmt: str, long_: bool) -> None:
    """List the suites with their point counts, one line each (--long: full descriptions)."""
    rows = docs.suite_rows()
    if fmt == "json":
        echo_json(rows)
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        head = f"{r['name']:<{width}} {r['points']:>4} points  "
        if long_:
            click.echo(f"{head}{_origin(r['from']).strip()}".rstrip() + "\n"
                       f"{textwrap.indent(textwrap.fill(r['description'], 88), '    ')}\n")
            continue
        room = max(20, shutil.get_terminal_size((100, 24)).columns - len(head) - 1)
        click.echo(head + textwrap.shorten(r["description"], room, placeholder="...")
                   + _origin(r["from"]))


for command in (run.run_cmd, estimate.estimate_cmd, run.tune_cmd, run.bench_cmd,
                report.table_cmd, report.plot_cmd, report.report_cmd, report.compare_cmd,
                tracking.sync_cmd, tracking.doctor_cmd, tracking.ui_cmd, report.claims_cmd,
                migrate.migrate_ids_cmd):
    cli.add_command(command)
for command in cli.commands.values():  # TVR_<COMMAND>_<OPTION>, shown in --help
    for param in command.params:
        if isinstance(param, click.Option) and param.envvar is None:
            flag = max(param.opts, key=len).lstrip("-").replace("-", "_").upper()
            param.envvar = f"TVR_{command.name.upper().replace('-', '_')}_{flag}"
            param.show_envvar = True


def main() -> None:
    cli.main(prog_name="tvr")


if __name__ == "__main__":  # `python3 -m harness.cli` from a checkout (scripts/gpu-check)
    main()
