"""Names shown in figures and tables: architectures, their colours, a task's panel label.

Figures and summary tables label rows with the same functions, so a table row and a figure
panel of the same configuration read the same.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import pandas as pd
import seaborn as sns

from models import catalog

if TYPE_CHECKING:
    import matplotlib.pyplot as plt

# the built-in architectures in catalog order (a plugin's comes after, sorted: `present`)
ARCH_ORDER = list(catalog.arch_colors())
# a marker and a dash pattern per architecture besides its colour: where two lines coincide
# (LSTM and GRU both at 100%), the one drawn later shows the one under it between its dashes
ARCH_MARKERS = {"Transformer": "o", "LSTM": "s", "GRU": "^"}
ARCH_DASHES = {"Transformer": "", "LSTM": (5, 2), "GRU": (1.5, 1.5)}
METRIC_LABELS = {"accuracy": "held-out token accuracy", "loss": "held-out loss (nats/token)",
                 "bits_per_char": "held-out bits per character"}


def architecture(df: pd.DataFrame) -> pd.Series:
    """"Transformer", "LSTM", "GRU" for each row's model; "mixer-lm (KIND)" for the LM around
    a mixer kind; another model keeps its name."""
    arch = df["model"].map(catalog.arch_labels()).fillna(df["model"])
    if "mixer_kind" in df:
        wrapped = df["model"] == "mixer-lm"
        arch = arch.where(~wrapped, "mixer-lm (" + df["mixer_kind"].astype(str) + ")")
    return arch


def arch_colors(values: pd.Series) -> dict[str, str]:
    """The catalog's architecture colours plus one for each other architecture in values."""
    declared = catalog.arch_colors()
    extra = sorted(set(values) - set(declared))
    return declared | dict(zip(extra, sns.color_palette("Dark2", len(extra)).as_hex(),
                               strict=True))


def arch_styles(values: pd.Series) -> dict[str, dict]:
    """seaborn's `markers` and `dashes` for a style by architecture, every value covered (a
    plugin's architecture: a diamond, dash-dot)."""
    seen = present(ARCH_ORDER, values)
    return {"markers": {a: ARCH_MARKERS.get(a, "D") for a in seen},
            "dashes": {a: ARCH_DASHES.get(a, (4, 1.5, 1, 1.5)) for a in seen}}


def task_label(df: pd.DataFrame) -> pd.Series:
    """"copy n=8", "distance-k k=4 n=16", "sort n=8 seq2seq": one panel per such label."""
    label = df["task"].astype(str)
    if "k" in df:
        # .astype(str): mapping no rows gives a float column, which text cannot be added to
        k = df["k"].map(lambda v: "" if pd.isna(v) else f" k={int(v)}").astype(str)
        label = label + k
    label = label + " n=" + df["seq_len"].astype(int).astype(str)
    if "framing" in df:
        label = label + df["framing"].map(
            lambda f: " seq2seq" if f == "seq2seq" else "").astype(str)
    return label


def task_order(df: pd.DataFrame) -> list[str]:
    """Panel order: by task, then k and n numerically (so k=4 comes before k=12)."""
    keys = df.assign(_k=df["k"] if "k" in df else 0).sort_values(
        ["task", "_k", "seq_len", "task_label"], na_position="first")
    return list(dict.fromkeys(keys["task_label"]))


def labelled(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of df with `architecture` and, where rows have a task, `task_label` columns."""
    out = df.copy()
    out["architecture"] = architecture(out)
    if "task" in out:
        out["task_label"] = task_label(out)
    return out


def present(order: list[str], values: pd.Series) -> list[str]:
    """The entries of `order` that occur in `values`, in order, then the other values sorted
    (a plugin's architecture): a hue order for seaborn that drops nothing."""
    seen = set(values)
    return [v for v in order if v in seen] + sorted(seen - set(order))


def title_above(fig: plt.Figure, text: str, fontsize: float = 10) -> plt.Figure:
    """`text` as the figure's title, its bottom just above the top of everything drawn (panel
    titles included), so it never overprints them; saving with bbox_inches="tight" keeps it.
    A figure with a layout engine that runs at draw time places its own title."""
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    text = _wrapped(text, fig, fontsize)
    engine = fig.get_layout_engine()
    if engine is not None and not isinstance(engine, PlaceHolderLayoutEngine):
        fig.suptitle(text, fontsize=fontsize)
        return fig
    fig.draw_without_rendering()  # titles settle where drawing puts them
    renderer = fig.canvas.get_renderer()
    top = max((ax.get_tightbbox(renderer).y1 for ax in fig.axes if ax.get_visible()),
              default=fig.bbox.y1)
    fig.suptitle(text, y=top / fig.bbox.height + 0.01, va="bottom", fontsize=fontsize)
    return fig


def _wrapped(text: str, fig: plt.Figure, fontsize: float) -> str:
    """Each line of `text` broken at words to the figure's width (a character of the default
    font averages about 0.55 of its size), so a title does not widen a narrow figure."""
    chars = max(40, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) for line in text.splitlines())


# ---------------------------------------------------------------- units of plotted series

UNIT = "tvr_unit"  # the attribute a plotted artist carries its y values' unit in


def declare_unit(artists, unit: str) -> None:
    """Say in which unit the artists' y values are ("layers", "time steps", "ops"): a panel
    whose series come in several units names each in its y label, and the figure tests
    check every declared unit against the label of the axis it is drawn on."""
    for artist in artists:
        setattr(artist, UNIT, unit)


def unit_of(artist) -> str | None:
    """The unit declare_unit gave an artist; None if none was declared."""
    return getattr(artist, UNIT, None)


# ------------------------------------------------------------ timings on a busy machine

BUSY_LABEL = "timed on a busy machine (open square: not joined)"


def busy(df: pd.DataFrame) -> pd.Series:
    """The rows flagged `busy`: timed while other work held the machine (its load average
    above the CPUs the process could use, or the process's CPU share low), so their times do
    not compare; a row from before the flag counts as idle."""
    if "busy" not in df:
        return pd.Series(False, index=df.index)
    return df["busy"].astype(str).str.lower().eq("true")


def busy_note(rows: pd.DataFrame) -> str:
    """A figure's line on its busy points ("" where none is): every one is drawn as such."""
    n = int(busy(rows).sum())
    return (f"open squares, joined to nothing: the {n} of {len(rows)} timings flagged busy "
            "(timed on a busy machine: they do not compare)") if n else ""


def busy_flag(rows: pd.DataFrame, rerun: str) -> str:
    """REPORT.md's line for a suite some of whose timings were taken on a busy machine ("" for
    none): how many, out of its timed rows, and what measures them again."""
    n = int(busy(rows).sum())
    if not n:
        return ""
    timed = int(rows["busy"].notna().sum())
    return (f"**Timed on a busy machine: {n} of {timed} timed rows** (flagged `busy`: other "
            "work held the machine while they were timed), so their times do not compare "
            "(a figure of timings draws them as open squares, off its lines); on an idle "
            f"machine `{rerun}` measures them again.")
