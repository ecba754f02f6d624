"""What the subcommands share: option types that refuse bad values, the output folder,
the tracking URI."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import click

from harness.errors import BadInput

OUT_HELP = "Results directory (suite CSVs, tables, figures, MLflow store)."


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

    def convert(self, value, param, ctx) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number) or not self.low <= number <= self.high:
            self.fail(f"{value!r} is not between {self.low} and {self.high} seconds", param, ctx)
        return number


def output_folder(out: str) -> Path:
    """The output directory, created if needed; unwritable -> bad input before any work."""
    if not out.strip():
        raise BadInput("--out '': name a folder (default: results)")
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".tvr-write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot write there ({exc.strerror})") from None
    return path


def store_uri(out_dir: Path, tracking_uri: str | None) -> str | None:
    """resolve_tracking_uri, plus bad input (not a traceback later) when MLflow is missing."""
    from harness.run.store import mask, resolve_tracking_uri

    uri = resolve_tracking_uri(out_dir, tracking_uri)
    if uri is not None and importlib.util.find_spec("mlflow") is None:
        raise BadInput(f"tracking URI {mask(uri)}: MLflow is not installed here; install it "
                       "or pass --tracking-uri none")
    return uri


DTYPE_CHOICE = click.Choice(["float32", "bfloat16", "float16"])
