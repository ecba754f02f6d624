"""One seaborn function per figure; each reads stored results and returns the figure."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from harness.errors import BadInput  # noqa: E402
from harness.results import load_results, write_atomic  # noqa: E402
from harness.tables import crossover_table, layer_frame  # noqa: E402

PALETTE = {"self-attention": "#1f77b4", "lstm": "#d62728", "gru": "#2ca02c",
           "transformer-layer": "#9467bd", "convolutional": "#8c564b",
           "restricted-attention": "#17becf"}


def crossover(df: pd.DataFrame) -> plt.Figure:
    """Cost per sequence vs n, one column per d: counted FLOPs (top) and measured forward time
    (bottom). Dashed: measured n* against the LSTM; dotted: the paper's n = d."""
    ok = layer_frame(df)
    long = ok.melt(id_vars=["mixer", "seq_len", "d_model"],
                   value_vars=["gflop_per_seq", "ms_per_seq"], var_name="cost")
    long["cost"] = long["cost"].map({"gflop_per_seq": "GFLOP / sequence (counted)",
                                     "ms_per_seq": "ms / sequence (forward, measured)"})
    g = sns.relplot(data=long, x="seq_len", y="value", hue="mixer", col="d_model", row="cost",
                    kind="line", marker="o", palette=PALETTE, height=2.8, aspect=1.1,
                    facet_kws={"sharey": False, "margin_titles": True})
    g.set(xscale="log", yscale="log")
    g.set_axis_labels("sequence length n", "")
    cross = crossover_table(df)
    cross = cross[cross["recurrent"] == "lstm"].set_index("d_model")
    for (cost, d), ax in g.axes_dict.items():
        ax.axvline(d, color="grey", ls=":", lw=1)
        col = "n_star_flops" if cost.startswith("GFLOP") else "n_star_time"
        if d in cross.index and pd.notna(cross.loc[d, col]):
            ax.axvline(cross.loc[d, col], color="black", ls="--", lw=1)
    g.set_titles(row_template="{row_name}", col_template="d = {col_name}")
    g.figure.suptitle("Where self-attention stops being cheaper than recurrence "
                      "(dashed: measured n* vs LSTM; dotted: n = d)", y=1.02)
    return g.figure


def throughput(df: pd.DataFrame) -> plt.Figure:
    """Training throughput (tokens/s, forward+backward) vs n, one column per d."""
    ok = layer_frame(df)
    g = sns.relplot(data=ok, x="seq_len", y="fwdbwd_tokens_per_s", hue="mixer", col="d_model",
                    kind="line", marker="o", palette=PALETTE, height=3, aspect=1.1)
    g.set(xscale="log", yscale="log")
    g.set_axis_labels("sequence length n", "tokens / s (fwd+bwd)")
    g.set_titles(col_template="d = {col_name}")
    return g.figure


def png_bytes(fig: plt.Figure) -> bytes:
    """Render and close a figure; the caller writes the bytes atomically."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


@dataclass(frozen=True)
class Figure:
    draw: Callable[[Path, str], plt.Figure]  # (out_dir, suite) -> figure
    measure: str  # the Point.measure whose rows it needs; `plot all` draws what applies


def _layer(fn: Callable[[pd.DataFrame], plt.Figure]) -> Callable[[Path, str], plt.Figure]:
    return lambda out_dir, suite: fn(load_results(out_dir, [suite]))


FIGURES: dict[str, Figure] = {
    "crossover": Figure(_layer(crossover), "layer"),
    "throughput": Figure(_layer(throughput), "layer"),
}


def draw(out_dir: Path, suite: str, name: str | None = None) -> list[Path]:
    """Write figure `name` (or every figure whose measure the suite has) as
    <out>/<suite>/<name>.png, atomically; returns the paths written."""
    measures = set(load_results(out_dir, [suite]).get("measure", pd.Series(dtype=str)))
    names = [name] if name else [n for n, f in FIGURES.items() if f.measure in measures]
    if not names:
        raise BadInput(f"no figure applies to suite {suite!r} (measures: {sorted(measures)})")
    paths = []
    for fig_name in names:
        path = out_dir / suite / f"{fig_name}.png"
        write_atomic(path, png_bytes(FIGURES[fig_name].draw(out_dir, suite)))
        paths.append(path)
    return paths
