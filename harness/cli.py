"""The `tvr` command: one thin subcommand per verb."""

from __future__ import annotations

import sys
from importlib.metadata import version

import click

import models


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version("tvr-bench"), prog_name="tvr")
def cli() -> None:
    """tvr-bench: measure what "Attention is all you need" claims about self-attention
    versus recurrence (LSTM, GRU), on the same work."""


@cli.command("models")
@click.option("--preset", type=click.Choice(list(models.PRESETS)), default="tiny",
              show_default=True, help="Preset whose sizes the parameter counts use.")
def models_cmd(preset: str) -> None:
    """List model names and mixer kinds with their parameter counts."""
    cfg = models.model_config("transformer", preset)
    click.echo(f"models (preset {preset!r}):")
    for name in models.names():
        n = sum(p.numel() for p in models.build(name, preset).parameters())
        click.echo(f"  {name:<16} {n:>12,d}  {models.describe(name)}")
    click.echo(f"mixers (d_model={cfg.d_model}):")
    for kind in models.mixer_kinds():
        n = sum(p.numel() for p in models.mixer(kind, cfg.d_model).parameters())
        click.echo(f"  {kind:<20} {n:>10,d}")


def main() -> None:
    """Console entry point: bad input exits 2 with one line; see DESIGN.md exit codes."""
    sys.exit(cli.main(standalone_mode=True))
