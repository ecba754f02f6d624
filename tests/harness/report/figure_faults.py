"""Checks on a drawn matplotlib Figure for the ways a figure misleads that its objects show
(the Figure's artists, legends and axes; never its pixels):

- colour_problems: a colour that means one thing in one legend and another in another (a
  hue whose meaning changes between panels);
- unit_problems: a series whose declared unit (harness.report.labels.declare_unit) its axis
  label does not name;
- join_problems: a line joining two points whose drawn spread (their error bars) exceeds the
  step between them;
- log_problems: a labelled log axis whose label does not say "log";
- between_values: drawn points strictly between two values, where only a mean of rows of
  different settings can land (made-up rows whose values depend on one setting only).

test_figures_render.py runs the first four on every figure of the committed results, and
test_figures_faults.py each one on the figures review named."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import Collection, LineCollection, PolyCollection
from matplotlib.colors import rgb_to_hsv, to_hex, to_rgba
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from harness.report.labels import unit_of

GREY = 0.15  # a colour whose channels differ by less than this is a grey: a reference line
TOL = 1e-9  # relative: two x values of one point


def colors(artist) -> set[tuple[float, ...]]:
    """The opaque colours an artist (or a legend handle) shows, as rounded RGB."""
    found = []
    if isinstance(artist, Line2D):
        if artist.get_linestyle() not in ("None", "", " ") and artist.get_linewidth() > 0:
            found.append(artist.get_color())
        if artist.get_marker() not in ("None", "", " ", None):
            found += [artist.get_markerfacecolor(), artist.get_markeredgecolor()]
    elif isinstance(artist, Patch):
        if artist.get_fill():
            found.append(artist.get_facecolor())
        if artist.get_linewidth() > 0:
            found.append(artist.get_edgecolor())
    elif isinstance(artist, Collection):
        found += [*artist.get_facecolors(), *artist.get_edgecolors()]
    rgba = [to_rgba(c) for c in found if not (isinstance(c, str) and c.lower() == "none")]
    return {tuple(float(v) for v in np.round(c[:3], 3)) for c in rgba if c[3] > 0}


def _rgb(artist) -> set[tuple[float, ...]]:
    """The chromatic colours an artist or legend handle shows (greys and black are the
    reference lines' and the style entries' colours: they mean nothing by themselves)."""
    return {c for c in colors(artist) if rgb_to_hsv(c)[1] * max(c) > GREY}


def _legends(fig: plt.Figure) -> list[Legend]:
    return [lg for lg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
            if lg is not None and lg.get_visible()]


def colour_meanings(legend: Legend) -> dict[tuple, set[str]]:
    """Each chromatic colour of a legend -> the labels of the entries that show it."""
    out: dict[tuple, set[str]] = {}
    for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
        if handle is None or not text.get_text().strip():
            continue
        for colour in _rgb(handle):
            out.setdefault(colour, set()).add(text.get_text())
    return out


def colour_problems(fig: plt.Figure) -> list[str]:
    """A colour two legends of one figure give no label in common: it means one thing in
    the panels one legend explains and another in the others'. (One legend may give a
    colour several labels, "lstm (cell)" and "lstm (scan)", colour by layer and marker by
    form; two legends naming the same series alike share a label.)"""
    out = []
    meanings = [colour_meanings(lg) for lg in _legends(fig)]
    for a, b in itertools.combinations(meanings, 2):
        for colour in sorted(a.keys() & b.keys()):
            if not a[colour] & b[colour]:
                out.append(f"colour {to_hex(colour)} means {sorted(a[colour])} in one legend "
                           f"and {sorted(b[colour])} in another")
    return out


def unit_problems(fig: plt.Figure) -> list[str]:
    """A series whose declared unit its panel's y label does not name."""
    out = []
    for ax in fig.axes:
        label = ax.get_ylabel()
        for artist in [*ax.lines, *ax.collections]:
            unit = unit_of(artist)
            if unit is not None and unit not in label:
                out.append(f"{artist.get_label()!r} is in {unit!r}, plotted on an axis "
                           f"labelled {label!r}")
    return out


def _in_data(artist, ax: plt.Axes) -> bool:
    """Whether an artist's x and y are the panel's data coordinates (up to a constant shift
    on the page): plotted data, not an axvline or axhline, whose other coordinate spans the
    panel."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    probe = np.array([[x0, y0], [x1, y1], [(x0 + x1) / 2, (y0 + y1) / 3]])
    shift = artist.get_transform().transform(probe) - ax.transData.transform(probe)
    return bool((np.ptp(shift, axis=0) < 1e-6 * max(1.0, np.abs(shift).max())).all())


def error_bars(ax: plt.Axes) -> list[tuple[float, float, float, set]]:
    """(x, low, high, colours) of every vertical bar in a panel: an error bar's segments
    (a LineCollection) or a two-point vertical line, in data coordinates."""
    bars = []
    for artist in ax.collections:
        if isinstance(artist, LineCollection) and _in_data(artist, ax):
            for seg in artist.get_segments():
                seg = np.asarray(seg, float)
                if len(seg) == 2 and seg[0, 0] == seg[1, 0] and seg[0, 1] != seg[1, 1]:
                    bars.append((seg[0, 0], *sorted(seg[:, 1]), _rgb(artist)))
    for line in ax.lines:
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        if len(x) == 2 and x[0] == x[1] and y[0] != y[1] and _in_data(line, ax):
            bars.append((x[0], *sorted(y), _rgb(line)))
    return bars


def _spread_at(bars: list, x: float, y: float, colours: set) -> float | None:
    """The longest bar drawn through point (x, y) in the point's colour; None if none is."""
    found = [hi - lo for bx, lo, hi, c in bars
             if abs(bx - x) <= TOL * max(1.0, abs(x)) and lo <= y <= hi
             and (not colours or not c or c & colours)]
    return max(found) if found else None


def join_problems(fig: plt.Figure) -> list[str]:
    """A drawn segment between two points whose spread (the longer of their bars) exceeds
    the step between them: the line shows a change the measurement does not resolve."""
    out = []
    for ax in fig.axes:
        bars = error_bars(ax)
        if not bars:
            continue
        for line in ax.lines:
            if line.get_linestyle() in ("None", "", " ") or not line.get_visible():
                continue
            x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
            if len(x) < 2 or (len(x) == 2 and x[0] == x[1]):
                continue  # a bar itself
            colours = _rgb(line)
            for i in range(len(x) - 1):  # matplotlib draws no segment to a NaN
                if not np.isfinite([x[i], y[i], x[i + 1], y[i + 1]]).all():
                    continue
                spreads = [_spread_at(bars, x[j], y[j], colours) for j in (i, i + 1)]
                if None in spreads:
                    continue
                if max(spreads) > abs(y[i + 1] - y[i]):
                    out.append(f"{line.get_label()!r} in panel {ax.get_title()!r} joins "
                               f"x = {x[i]:g} and {x[i + 1]:g}, a step of "
                               f"{abs(y[i + 1] - y[i]):.4g} within their spread "
                               f"{max(spreads):.4g}")
    return out


def log_problems(fig: plt.Figure) -> list[str]:
    """A labelled log axis whose label does not say so."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        for name, scale, label in (("x", ax.get_xscale(), ax.get_xlabel()),
                                   ("y", ax.get_yscale(), ax.get_ylabel())):
            if scale in ("log", "symlog", "logit") and label.strip() and \
                    "log" not in label.lower():
                out.append(f"{name} axis {label!r} of panel {ax.get_title()!r} is on a "
                           f"{scale} scale and does not say so")
    return out


def _drawn_values(ax: plt.Axes) -> np.ndarray:
    """The y values of a panel's data points: lines drawn in data coordinates (not an
    axhline's) and scatter offsets; bands and bars are intervals, not points."""
    values = []
    for line in ax.lines:
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        if not _in_data(line, ax):
            continue  # an axhline: a reference, not a point
        if len(x) == 2 and x[0] == x[1]:
            continue  # a bar
        values.append(y)
    for coll in ax.collections:
        if isinstance(coll, PolyCollection | LineCollection):
            continue
        offsets = np.asarray(coll.get_offsets(), float)
        if offsets.ndim == 2 and len(offsets):
            values.append(offsets[:, 1])
    return np.concatenate(values) if values else np.empty(0)


def between_values(fig: plt.Figure, lo: float, hi: float) -> list[str]:
    """Drawn points strictly between lo and hi: with rows whose value is lo at one setting
    and hi at the other, only a mean over both settings lands there."""
    out = []
    for ax in fig.axes:
        y = _drawn_values(ax)
        mixed = y[np.isfinite(y) & (y > lo + 1e-9) & (y < hi - 1e-9)]
        if len(mixed):
            out.append(f"panel {ax.get_title()!r} ({ax.get_xlabel()!r}) draws "
                       f"{len(mixed)} point(s) between {lo:g} and {hi:g}, a mean across "
                       f"settings: {sorted({round(float(v), 4) for v in mixed})}")
    return out
