"""Every figure by name, and how each is drawn to a PNG: FIGURES holds the layer suites'
figures (harness.report.layer_figures) beside those each study declares
(harness.report.studies) and the rematch's; `draw` writes them as PNG files.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from harness.errors import BadInput  # noqa: E402
from harness.files import write_atomic  # noqa: E402
from harness.report import rematch, studies  # noqa: E402
from harness.report.layer_figures import (  # noqa: E402
    crossover,
    fixed_tokens,
    memory,
    path_length,
    sequential_ops,
    throughput,
)
from harness.results import load_results  # noqa: E402


def png_bytes(fig: plt.Figure) -> bytes:
    """Render and close a figure; the caller writes the bytes atomically."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _values(rows: pd.DataFrame, column: str) -> set[str]:
    """The values of `column` in rows, "" standing for rows in none (all, if it is absent)."""
    if column not in rows:
        return {""} if len(rows) else set()
    return {"" if pd.isna(v) else str(v) for v in rows[column]}


def _wants(value: str | None, present: set[str]) -> bool:
    """None: anything; "": some rows in none (a plain sweep, maybe beside Table 1 groups);
    else that value among those present."""
    return value is None or value in present


@dataclass(frozen=True)
class Figure:
    draw: Callable[[Path, str], plt.Figure]  # (out_dir, suite) -> figure
    runner: str  # the runner whose rows it needs; `plot all` draws what applies
    fit: str | None = None  # also needs rows of this Table 1 fit; "" = rows in no fit
    study: str | None = None  # also needs rows of this study; "" = rows in no study

    def applies(self, df: pd.DataFrame) -> bool:
        if self.runner not in set(df.get("runner", ())):
            return False
        mine = df[df["runner"] == self.runner]  # fit and study must be on this runner's rows
        return (_wants(self.fit, _values(mine, "fit"))
                and _wants(self.study, _values(mine, "study")))


def _layer(fn: Callable[[pd.DataFrame], plt.Figure]) -> Callable[[Path, str], plt.Figure]:
    return lambda out_dir, suite: fn(load_results(out_dir, [suite]))


FIGURES: dict[str, Figure] = {
    "crossover": Figure(_layer(crossover), "layer", fit="", study=""),
    "throughput": Figure(_layer(throughput), "layer", fit="", study=""),
    "sequential-ops": Figure(_layer(sequential_ops), "seq-ops", fit="seq-ops"),
    "path-length": Figure(_layer(path_length), "path", fit="path"),
    "memory": Figure(_layer(memory), "layer", fit="memory"),
    "fixed-tokens": Figure(_layer(fixed_tokens), "layer", fit="fixed-tokens"),
    **{name: Figure(fn, runner) for name, (fn, runner) in rematch.LAYER_FIGURES.items()},
    # the studies' figures (harness.report.studies)
    **{name: Figure(fn, runner, study=s.name)
       for s in studies.STUDIES for name, (fn, runner) in s.figures.items()},
}


def _sign(fig: plt.Figure, df: pd.DataFrame) -> None:
    """Name, right-aligned under everything drawn (titles and tick labels stay clear of it),
    the machine whose rows the figure shows."""
    if "machine" in df and len(df):
        date = str(df["measured_at"].dropna().max())[:10] if "measured_at" in df and \
            df["measured_at"].notna().any() else ""
        drawn = fig.get_tightbbox(fig.canvas.get_renderer())  # inches, figure origin
        fig.text(0.995, drawn.y0 / fig.get_figheight() - 0.01,
                 f"measured on {df['machine'].iloc[0]} {date}".strip(),
                 ha="right", va="top", fontsize=7, color="0.4")


def lacking(suite: str, exc: KeyError, columns: pd.Index) -> str:
    """A KeyError of pandas on columns the suite's rows lack, as one line; any other
    KeyError (a bug, not the data) is raised again."""
    key = exc.args[0] if exc.args else None
    text = str(key)
    if match := re.fullmatch(r"\[(.*)\] not in index", text):  # df[[...]]
        names = [n.strip().strip("'\"") for n in match.group(1).split(",")]
    else:
        names = [text.removeprefix("Column not found: ")] if isinstance(key, str) else []
    if not names or any(n in columns for n in names):
        raise exc
    return f"the {suite} results have no {', '.join(map(repr, names))} column"


def _unfit(suite: str, exc: Exception, columns: pd.Index) -> str:
    """Why the suite's rows cannot draw a figure: a BadInput's line, a column they lack
    (pandas' KeyError, seaborn's ValueError); any other error is raised again."""
    if isinstance(exc, KeyError):
        return lacking(suite, exc, columns)
    if isinstance(exc, ValueError) and "Could not interpret value" not in str(exc):
        raise exc
    if isinstance(exc, ValueError):  # seaborn: a column it was told to plot is not there
        return f"the {suite} results lack a column it plots: {str(exc).splitlines()[0]}"
    return str(exc)


def draw(out_dir: Path, suite: str, name: str | None = None,
         skipped: list[str] | None = None) -> list[Path]:
    """Write figure `name` (or every figure whose runner the suite has) as
    <out>/<suite>/<name>.png, atomically; returns the paths written. Drawing all, a figure
    the data cannot support is left out with its reason appended to `skipped`, instead of
    costing the others; a single named figure raises BadInput."""
    df = load_results(out_dir, [suite])
    names = [name] if name else [n for n, f in FIGURES.items() if f.applies(df)]
    if not names:
        runners = sorted(set(df.get("runner", ())))
        raise BadInput(f"no figure applies to suite {suite!r} (runners: {runners})")
    paths = []
    for fig_name in names:
        try:
            fig = FIGURES[fig_name].draw(out_dir, suite)
        except (BadInput, KeyError, ValueError) as exc:
            why = _unfit(suite, exc, df.columns)
            if name is not None:
                raise BadInput(why) from None
            (skipped if skipped is not None else []).append(f"{fig_name}: {why}")
            continue
        _sign(fig, df)
        path = out_dir / suite / f"{fig_name}.png"
        write_atomic(path, png_bytes(fig))
        paths.append(path)
    return paths
