"""What the subcommands share: option types that refuse bad values, the output folder,
the tracking URI."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

import click

from harness.errors import BadInput

OUT_HELP = "Results directory (suite CSVs, tables, figures, MLflow store)."


def complete_suites(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of a suite to run (loads the suites: about a second)."""
    import experiments

    return [n for n in experiments.suite_names() if n.startswith(incomplete)]


def complete_stored_suites(ctx: click.Context, _param: click.Parameter,
                           incomplete: str) -> list[str]:
    """Shell completion of a suite with results under --out, its variants' names
    (`SUITE/variants/VARIANT`) included (reads folder names only)."""
    from harness.variants import stored_names

    out = Path(ctx.params.get("out") or "results")
    return [n for n in stored_names(out) if n.startswith(incomplete)]


class CheckedPath(click.Path):
    """click.Path, with a NUL byte, a byte that is not UTF-8 or an overlong path refused in
    one line first (click's own check would raise ValueError from os.stat), and a path the
    system refuses to look up (a loop of links, a folder without permission on its way: click
    would call it missing, or let it through to fail later) said as what it is."""

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        from harness.inputs import check_lookup

        if isinstance(value, str):
            try:
                check_lookup(value, "path")
            except BadInput as exc:
                self.fail(str(exc).removeprefix("path "), param, ctx)
        return super().convert(value, param, ctx)


def out_option(func):  # noqa: ANN001, ANN201 -- a click decorator
    """--out: the results folder, completed as a directory."""
    return click.option("--out", default="results", show_default=True, help=OUT_HELP,
                        type=CheckedPath(file_okay=False))(func)


def suite_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A --suite or SUITE: one folder right under --out or a variant of one
    (`SUITE/variants/VARIANT`), never a path leading elsewhere (`--suite /some/where` would
    read and write there)."""
    from harness.variants import checked_name

    if value is None:
        return None
    try:
        return checked_name(value, "suite")
    except BadInput as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def suite_option(func):  # noqa: ANN001, ANN201 -- a click decorator
    """--suite: one suite with results under --out (optional)."""
    return click.option("--suite", default=None, metavar="SUITE",
                        shell_complete=complete_stored_suites, callback=suite_name,
                        help="Only this suite [default: every suite in --out].")(func)


FORMAT_JSON = click.option("--format", "fmt", type=click.Choice(["text", "json"]),
                           default="text", show_default=True,
                           help="json: machine-readable, one document on stdout.")


def echo_json(data: Any) -> None:
    """One JSON document on stdout (numpy and pandas scalars as plain numbers)."""
    click.echo(json.dumps(data, indent=2, default=_plain))


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy / pandas scalars
        return value.item()
    return str(value)


class Bytes(click.ParamType):
    """A byte count: 123, 512MB, 8GiB, 1.5G."""

    name = "BYTES"
    MAX = 2**50  # 1 PiB: no device has more, and float rounding stays exact far below it
    _UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
              "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        m = re.fullmatch(r"\s*([0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})\s*([kmgt]i?)?b?\s*",
                         str(value), re.I)
        if not m:
            self.fail(f"{value!r} is not a byte count (e.g. 4000000000, 512MB, 8GiB)", param, ctx)
        number = float(m.group(1)) * self._UNITS[(m.group(2) or "").lower()]
        if not 1 <= number <= self.MAX:
            self.fail(f"{value!r} is not between 1 byte and 1 PiB", param, ctx)
        return int(number)


class Seconds(click.ParamType):
    """A finite number of seconds within bounds: nan, inf or 1e308 would time forever."""

    name = "SECONDS"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    # ASCII digits only, as Bytes and --set take them: float() also reads "١٫٥"-style digits
    _NUMBER = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")

    def convert(self, value, param, ctx) -> float:
        if isinstance(value, (int, float)):
            number = float(value)
        elif not isinstance(value, str) or not self._NUMBER.fullmatch(value):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        else:
            number = float(value)
        if not math.isfinite(number) or not self.low <= number <= self.high:
            self.fail(f"{value!r} is not between {self.low} and {self.high} seconds", param, ctx)
        return number


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, as a container or taskset gives it),
    without importing torch (harness.measure.machine counts the same)."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Threads(click.IntRange):
    """A count of CPU threads: at least 1 and at most this machine's usable CPUs. More
    threads than cores would not run: the row would name a count the run never had."""

    name = "THREADS"

    def __init__(self) -> None:
        super().__init__(min=1)

    def convert(self, value, param, ctx) -> int:
        threads = super().convert(value, param, ctx)
        cpus = usable_cpus()
        if threads > cpus:
            self.fail(f"{threads} is more than this machine's {cpus} usable CPUs; at most "
                      f"{cpus}", param, ctx)
        return threads


def output_folder(out: str, what: str = "--out") -> Path:
    """The output directory, created if needed; unwritable -> bad input before any work."""
    if not out.strip():
        raise BadInput(f"{what} '': name a folder (default: results)")
    from harness.inputs import check_path

    path = check_path(out, what)
    try:
        path.mkdir(parents=True, exist_ok=True)
        # a probe of its own: two commands started together on one --out must not race
        with tempfile.NamedTemporaryFile(dir=path, prefix=".tvr-write-probe-"):
            pass
    except OSError as exc:
        raise BadInput(f"{what} {out}: cannot write there ({exc.strerror})") from None
    return path


def store_uri(out_dir: Path, tracking_uri: str | None) -> str | None:
    """resolve_tracking_uri, plus bad input (not a traceback later) when MLflow is missing
    or the store's server cannot be reached, whatever its scheme (check_reachable): one rule
    for `tvr run`, `bench`, `tune` and `sync`, before any work."""
    from harness.track.store import check_reachable, mask, resolve_tracking_uri

    uri = resolve_tracking_uri(out_dir, tracking_uri)
    if uri is not None and importlib.util.find_spec("mlflow") is None:
        raise BadInput(f"tracking URI {mask(uri)}: MLflow is not installed here; install it "
                       "or pass --tracking-uri none")
    if uri is not None:
        check_reachable(uri)
    return uri


DTYPE_CHOICE = click.Choice(["float32", "bfloat16", "float16"])
