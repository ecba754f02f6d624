"""The `tvr` command: one thin subcommand per verb.

Exit codes: 0 done; 2 bad input, one line naming the value, no traceback; 1 else.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import click

import experiments
import models
from harness.cli import report, run, store
from harness.errors import BadInput


class _BadInputError(click.ClickException):
    exit_code = 2


class _Group(click.Group):
    """Turns BadInput raised anywhere below a command into exit code 2 and one line."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BadInput as exc:
            raise _BadInputError(str(exc)) from None


def _version() -> str:
    """The installed version; a checkout run with PYTHONPATH=. (scripts/gpu-check) has none."""
    try:
        return version("tvr-bench")
    except PackageNotFoundError:
        return "(not installed; run from a source checkout)"


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), prog_name="tvr")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
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
    from models.plugins import import_module

    for module in plugins:
        try:
            import_module(module)
        except ValueError as exc:
            raise BadInput(str(exc)) from None


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
            count = _params(lambda name=name: models.build(name, preset), 12)
        click.echo(f"  {name:<16} {count}  {models.describe(name)}{_origin(name, 'model')}")
    click.echo(f"mixers (d_model={cfg.d_model}):")
    for kind in models.mixer_kinds():
        count = _params(lambda kind=kind: models.mixer(kind, cfg.d_model), 10)
        click.echo(f"  {kind:<20} {count}{_origin(kind, 'mixer')}")


def _params(make, width: int) -> str:  # noqa: ANN001
    """The parameter count of make(), right-aligned; for a plugin's component that its
    defaults cannot build (a knob without a default), "?" and why."""
    try:
        return f"{sum(p.numel() for p in make().parameters()):>{width},d}"
    except ValueError as exc:
        return f"{'?':>{width}} ({exc})"


def _origin(name: str, kind: str) -> str:
    """"  [from PACKAGE]" for a plugin's model or mixer; nothing for a built-in one."""
    from models.plugins import BUILTIN

    source = models.provider(name, kind)
    return "" if source == BUILTIN else f"  [from {source}]"


@cli.command("suites")
def suites_cmd() -> None:
    """List the suites with their point counts."""
    from models.plugins import BUILTIN

    names = experiments.suite_names()
    width = max(map(len, names))
    for name in names:
        source = experiments.provider(name)
        origin = "" if source == BUILTIN else f"  [from {source}]"
        click.echo(f"{name:<{width}} {len(experiments.points(name)):>4} points  "
                   f"{experiments.describe(name)}{origin}")


for command in (run.run_cmd, run.bench_cmd, report.table_cmd, report.plot_cmd,
                report.report_cmd, report.compare_cmd, store.sync_cmd, store.doctor_cmd,
                store.ui_cmd):
    cli.add_command(command)


def main() -> None:
    cli.main(prog_name="tvr")


if __name__ == "__main__":  # `python3 -m harness.cli` from a checkout (scripts/gpu-check)
    main()
