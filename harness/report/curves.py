"""Figures of the convergence study, and the helpers every study figure reads its data with.

Each figure reads a suite's stored results (and series.csv for curves) and never retrains. A
point's `study` column names its study and `runner` what measured it; harness.report.studies
names each figure with its study and runner. Each title states seeds and scale (caption()).
Intervals are the mean's 95% t-interval over 5 or more seeds (the ledger's interval,
harness.report.stats.t_interval) clipped to the metric's range (an accuracy's [0, 1]), the
range of the seeds below that (band()); each caption says which.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D
from matplotlib.transforms import offset_copy

from harness.errors import BadInput
from harness.report.claim_training import RECALLED
from harness.report.evidence import seeds_per_configuration
from harness.report.labels import (
    ARCH_ORDER,
    METRIC_LABELS,
    arch_colors,
    arch_styles,
    labelled,
    present,
    task_order,
    title_above,
)
from harness.report.stats import t_interval
from harness.results import load_results, read_series

MIN_CI_SEEDS = 5  # a bootstrap over fewer seeds is not an interval worth the name
SEED = 0  # seaborn bootstraps its CI: a fixed seed draws the same bands every time
FRACTION = (0.0, 1.0)  # an accuracy's range
NONNEGATIVE = (0.0, None)  # a loss, a norm, a count, a rate


def clipped_t(values, within: tuple[float | None, float | None]) -> tuple[float, float]:
    """The mean's 95% t-interval cut to the metric's range `within` (low, high; None: no
    bound): symmetric, it reaches past an accuracy of 1 where seeds sit near the ceiling."""
    lo, hi = t_interval(values)
    return (lo if within[0] is None else max(lo, within[0]),
            hi if within[1] is None else min(hi, within[1]))


def band(pts: pd.DataFrame, within: tuple[float | None, float | None] | None = None
         ) -> tuple[str, int] | Callable:
    """seaborn's errorbar: the mean's 95% t-interval over >= MIN_CI_SEEDS seeds (the interval
    the claims ledger states), cut to the metric's range `within` when given, else the range
    (min to max) of the seeds, so the band shows the seeds' own values (inside any range)."""
    if pts["seed"].nunique() < MIN_CI_SEEDS:
        return ("pi", 100)
    return t_interval if within is None else partial(clipped_t, within=within)


def clip_text(within: tuple[float | None, float | None]) -> str:
    """"to [0, 1]", "at 0": a range as the caption names it."""
    lo, hi = within
    return f"to [{lo:g}, {hi:g}]" if hi is not None else f"at {lo:g}"


def caption(pts: pd.DataFrame, clip: str = "", drawn: str | None = "band") -> str:
    """Seeds, what the interval is (`drawn`: "band", "bars", or None where none is drawn;
    `clip`: where the t-interval was cut, clip_text), and the scale: parameters,
    steps, device."""
    low, high = seeds_per_configuration(pts)
    parts = [f"{low}{f'-{high}' if high > low else ''} seed{'s' if high != 1 else ''} per "
             "configuration"]
    if drawn:
        what = (f"{drawn}: the mean's 95% t-interval over seeds"
                + (f", clipped {clip}" if clip else "")
                if pts["seed"].nunique() >= MIN_CI_SEEDS else f"{drawn}: min to max of the seeds")
        parts[0] += f"; {what}"
    if "n_params" in pts and pts["n_params"].notna().any():
        lo, hi = pts["n_params"].min(), pts["n_params"].max()
        parts.append(f"{lo / 1e3:.0f}k" + (f"-{hi / 1e3:.0f}k" if hi != lo else "")
                     + " parameters")
    if "steps" in pts and pts["steps"].fillna(0).max() > 0:
        parts.append(f"up to {int(pts['steps'].max()):,} steps")
    first = pts.iloc[0]
    parts.append(f"{first.get('device', '?')} ({first.get('device_name', '?')})")
    return ", ".join(parts)


# metrics a run reports only sometimes (target reached, length_gen asked, a text corpus)
OPTIONAL = ("steps_to_target", "accuracy_2n", "accuracy_4n", "final_bits_per_char")

Draw = Callable[[Path, str], plt.Figure]


# ---------------------------------------------------------------- data


def rows(out_dir: Path, suite: str, study: str, runner: str = "train") -> pd.DataFrame:
    """The suite's finished (ok or diverged) points of one study and runner, labelled."""
    df = load_results(out_dir, [suite])
    keep = (df["study"] == study) & (df["runner"] == runner) & df["status"].isin(["ok",
                                                                                  "diverged"])
    if not keep.any():
        raise BadInput(f"no finished {runner!r} points of study {study!r} in suite {suite!r};"
                       f" run `tvr run {study}` (or convergence-quick) first")
    out = labelled(df[keep])
    for col in OPTIONAL:
        if col not in out:
            out[col] = np.nan
    return out


def curves_of(out_dir: Path, suite: str, points: pd.DataFrame, metrics: list[str]
              ) -> pd.DataFrame:
    """Long frame of the points' stored curves (metric, step, value) joined to their rows."""
    series = read_series(out_dir, suite)
    series = series[series["metric"].isin(metrics)].copy()
    if "machine" not in points:
        return series.drop(columns="machine").merge(points, on="point_id")
    # curves stored before rows named their machine belong to the row of their point
    legacy = series["machine"] == ""
    owner = points.drop_duplicates("point_id").set_index("point_id")["machine"]
    series.loc[legacy, "machine"] = owner.reindex(series.loc[legacy, "point_id"]).to_numpy()
    return series.merge(points, on=["point_id", "machine"])


def fill_stopped(long: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Carry the last value of each run that stopped early at its target to every later
    step of its group (`by`: one curve's columns), so the mean and CI at a step average all
    seeds, not only the slower ones still running (survivor bias). A stopped run reached the
    target, so its last value is the honest reading; runs that diverged or ran out of steps
    are left as they are."""
    stopped = long[long["steps_to_target"].notna()]
    if stopped.empty:
        return long
    last = stopped.sort_values("step").groupby(["point_id", "metric"]).tail(1)
    grid = long[[*by, "metric", "step"]].drop_duplicates()  # every step the group evaluated
    later = last.rename(columns={"step": "stop"}).merge(grid, on=[*by, "metric"])
    later = later[later["step"] > later["stop"]]
    return pd.concat([long, later[long.columns]], ignore_index=True)


def by_length(pts: pd.DataFrame) -> pd.DataFrame:
    """Accuracy at n, 2n, 4n as a long frame with an `eval length` column (x n)."""
    cols = {"final_accuracy": 1, "accuracy_2n": 2, "accuracy_4n": 4}
    pts = pts[pts["accuracy_2n"].notna()] if "accuracy_2n" in pts else pts.iloc[:0]
    if pts.empty:
        raise BadInput("no points were evaluated at 2n and 4n (knob length_gen)")
    long = pts.melt(id_vars=[c for c in pts.columns if c not in cols], value_vars=list(cols),
                    var_name="at", value_name="accuracy")
    long["eval length"] = np.log2(long["at"].map(cols))  # 0, 1, 2 -> n, 2n, 4n
    return long


# ---------------------------------------------------------------- axes


def log_ticks(ax: plt.Axes, values: list[float], axis: str = "x") -> None:
    """Plain tick labels at the measured values of a log axis, no minor ticks."""
    values = sorted(values)
    labels = [f"{v:g}" for v in values]
    if axis == "x":
        ax.set_xticks(values, labels)
    else:
        ax.set_yticks(values, labels)
    ax.minorticks_off()


def length_axes(g: sns.FacetGrid) -> None:
    """x axis of a by_length figure: n, 2n, 4n; accuracy from 0 to 1."""
    g.set(xticks=[0, 1, 2], ylim=(0, 1.05))
    for ax in g.axes.flat:
        ax.set_xticklabels(["n", "2n", "4n"])
        ax.tick_params(labelbottom=True)


def titled(fig: plt.Figure, text: str, pts: pd.DataFrame | None = None, clip: str = "",
           drawn: str | None = "band") -> plt.Figure:
    """The figure with `text` as its title, above seaborn's facet titles, and under it the
    seeds, interval and scale of `pts` (caption)."""
    return title_above(fig, text if pts is None else f"{text}\n{caption(pts, clip, drawn)}")


def _wrap(n: int) -> int:
    return min(n, 4)


# ---------------------------------------------------------------- convergence


def convergence_curves(out_dir: Path, suite: str, metric: str) -> plt.Figure:
    """Held-out `metric` vs step, one panel per task, hue = architecture (with its own marker
    and dashes, so coinciding curves stay apart), CI over seeds."""
    pts = rows(out_dir, suite, "convergence")
    long = fill_stopped(curves_of(out_dir, suite, pts, [metric]),
                        ["task_label", "architecture"])
    order = task_order(pts)
    within = FRACTION if metric == "accuracy" else NONNEGATIVE
    g = sns.relplot(data=long, x="step", y="value", hue="architecture", style="architecture",
                    col="task_label", col_order=order, col_wrap=_wrap(len(order)), kind="line",
                    errorbar=band(pts, within), seed=SEED, markersize=5,
                    hue_order=present(ARCH_ORDER, long["architecture"]),
                    palette=arch_colors(long["architecture"]), height=2.6, aspect=1.25,
                    facet_kws={"sharey": False, "sharex": False},
                    **arch_styles(long["architecture"]))
    hues = present(ARCH_ORDER, long["architecture"])
    spread(g.axes, arch_colors(long["architecture"]), hues)
    g.set_titles("{col_name}")
    g.set_axis_labels("training step", METRIC_LABELS[metric])
    if metric == "accuracy" and pts["target"].notna().any():
        target = float(pts["target"].dropna().iloc[0])
        for ax in g.axes.flat:
            ax.axhline(target, color="grey", ls="--", lw=1)
        relegend(g, {f"target ({target:.0%}): steps to it are compared":
                        Line2D([], [], color="grey", ls="--", lw=1)})
    return titled(g.figure, f"Convergence: {METRIC_LABELS[metric]} (parameter-matched; a seed "
                  "that stopped at the target keeps its last value; lines drawn 2.5 pt apart "
                  "horizontally)", pts, clip_text(within))


def spread(axes, colors: dict[str, str], order: list[str], points: float = 2.5) -> None:
    """Draw each hue's lines, markers and bands `points` apart horizontally on the page (the
    data are not moved), centred on the true x: equal curves (LSTM and GRU both at 100%) stay
    side by side instead of one under the other. An artist's hue is known by its colour."""
    shift = {tuple(np.round(to_rgb(colors[h]), 3)): points * (i - (len(order) - 1) / 2)
             for i, h in enumerate(order)}
    for ax in np.ravel(axes):
        for artist in [*ax.lines, *ax.collections]:
            color = artist.get_color() if isinstance(artist, Line2D) else \
                artist.get_facecolor()[0] if len(artist.get_facecolor()) else \
                artist.get_edgecolor()[0]
            dx = shift.get(tuple(np.round(to_rgb(color), 3)))
            if dx and artist.get_transform() == ax.transData:
                artist.set_transform(offset_copy(ax.transData, ax.figure, x=dx,
                                                 units="points"))


def interval_of(pts: pd.DataFrame, within: tuple[float | None, float | None]
                ) -> Callable[[pd.Series], tuple[float, float]]:
    """band()'s interval as a function of one group's values: (low, high) of the clipped
    t-interval over >= MIN_CI_SEEDS seeds, else of the seeds' range."""
    how = band(pts, within)
    return how if callable(how) else lambda v: (float(np.min(v)), float(np.max(v)))


def resolved_steps(y, lo, hi) -> np.ndarray:
    """For each pair of neighbouring points, whether the step between them exceeds the
    spread (hi - lo) of both: a line across a smaller step would draw a change the spread
    does not resolve. A point without a spread (NaN) has none to exceed."""
    y, spread_ = np.asarray(y, float), np.nan_to_num(np.asarray(hi, float)
                                                     - np.asarray(lo, float))
    return np.abs(np.diff(y)) > np.maximum(spread_[:-1], spread_[1:])


def resolved_line(ax: plt.Axes, x, y, lo, hi, *, color: str, marker: str, label: str,
                  ls="-", dx: float = 0.0, ms: float = 5.0) -> None:
    """Points at (x, y) with bars from lo to hi (NaN: no bar), joined by a line only where
    resolved_steps says the step exceeds the spread; `dx` points apart horizontally on the
    page (the data are not moved), so equal points of several series stay side by side."""
    order = np.argsort(np.asarray(x, float))
    x, y, lo, hi = (np.asarray(v, float)[order] for v in (x, y, lo, hi))
    # clipped at 0: the mean of equal values can sit a rounding error past their min or max;
    # NaN draws no bar. No caps: a bar shorter than its caps would draw them on each other
    below, above = (np.clip(v, 0, None) for v in (y - lo, hi - y))
    bars = ax.errorbar(x, y, yerr=[below, above], fmt=marker, ls="none", color=color, ms=ms,
                       capsize=0, elinewidth=1.2, label=label, zorder=3)
    runs, start = [], 0
    for i, joined in enumerate(resolved_steps(y, lo, hi), start=1):
        if not joined:
            runs.append((start, i))
            start = i
    runs.append((start, len(x)))
    lines = [ax.plot(x[a:b], y[a:b], ls=ls, color=color, lw=1.3, zorder=2)[0]
             for a, b in runs if b - a > 1]
    if dx:
        shifted = offset_copy(ax.transData, ax.figure, x=dx, units="points")
        for artist in [bars[0], *bars[1], *bars[2], *lines]:
            artist.set_transform(shifted)


def relegend(g: sns.FacetGrid, extra: dict | None = None, headings: tuple[str, ...] = (),
             title: str | None = None) -> None:
    """The grid's legend again: without seaborn's `headings` (entries with nothing drawn
    beside them, e.g. a style variable's name), with `extra` entries (label -> handle) after
    its own, under `title` (default: its own)."""
    data = {t.get_text(): h for t, h in zip(g.legend.texts, g.legend.legend_handles,
                                            strict=True) if t.get_text() not in headings}
    data |= extra or {}
    title = title if title is not None else g.legend.get_title().get_text() or None
    g.legend.remove()
    g.add_legend(data, title=title, label_order=list(data))


def steps_to_target(out_dir: Path, suite: str) -> plt.Figure:
    """Steps to the target accuracy per task and architecture, one marker per seed, the
    seeds side by side inside their architecture's slot: a filled dot where the seed reached
    the target, an open triangle at its budget labelled "> N" where it never did (censored:
    the budget is a lower bound, not a measurement)."""
    pts = rows(out_dir, suite, "convergence")
    pts = pts[pts["target"].notna()].copy()
    if pts.empty:
        raise BadInput(f"suite {suite!r} has no convergence points trained to a target")
    order = task_order(pts)
    hues = present(ARCH_ORDER, pts["architecture"])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(order)), 4))
    colors = arch_colors(pts["architecture"])
    slot = {task: i for i, task in enumerate(order)}
    width = 0.8 / max(1, len(hues))
    for j, arch in enumerate(hues):
        mine = pts[pts["architecture"] == arch]
        rank = mine.groupby("task_label")["seed"].rank(method="first") - 1
        count = mine.groupby("task_label")["seed"].transform("count")
        # the seeds spread over 70% of the slot, centred: no seed lands on a neighbour's
        x = (mine["task_label"].map(slot) - 0.4 + width * (j + 0.5)
             + (rank - (count - 1) / 2) * 0.7 * width / count.clip(lower=2).sub(1))
        reached = mine["steps_to_target"].notna()
        ax.scatter(x[reached], mine.loc[reached, "steps_to_target"], color=colors.get(arch),
                   label=arch, s=22, zorder=3)
        ax.scatter(x[~reached], mine.loc[~reached, "steps"], marker="^", facecolors="none",
                   edgecolors=colors.get(arch), s=30, zorder=3)
        for task, budget in mine[~reached].groupby("task_label")["steps"].max().items():
            ax.annotate(f"> {int(budget)}", (slot[task] - 0.4 + width * (j + 0.5), budget),
                        xytext=(0, 6), ha="center", textcoords="offset points", fontsize=6,
                        color=colors.get(arch))
    if (pts["steps_to_target"].isna()).any():
        ax.scatter([], [], marker="^", facecolors="none", edgecolors="0.3", s=30,
                   label="never reached (> budget)")
    target = pts["target"].iloc[0]
    ax.set_xticks(range(len(order)), order, rotation=30, ha="right")
    top = float(pts["steps_to_target"].fillna(pts["steps"]).max())
    ax.set(xlabel="", ylabel=f"steps to {target:.0%} held-out accuracy",
           ylim=(0, top * 1.12))  # room for the "> N" notes inside the frame
    ax.set_title(f"Steps to {target:.0%}: dot = a seed that reached it; open triangle = "
                 f"never reached within its budget (> N)\n{caption(pts, drawn=None)}",
                 fontsize=8)
    ax.legend(title=None, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def accuracy_vs_distance(out_dir: Path, suite: str) -> plt.Figure:
    """Final held-out accuracy on distance-k against k: how far back each model can recall."""
    pts = rows(out_dir, suite, "convergence")
    pts = pts[pts["task"] == "distance-k"]
    if pts.empty:
        raise BadInput(f"suite {suite!r} has no distance-k points")
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    style = "seq_len" if pts["seq_len"].nunique() > 1 else None
    # markers and intervals only: a line between two measured distances would claim values
    # at the distances between them; architectures side by side so none hides another
    hues = present(ARCH_ORDER, pts["architecture"])
    shift = {a: 1.08 ** (i - (len(hues) - 1) / 2) for i, a in enumerate(hues)}
    pts = pts.assign(k_shown=pts["k"] * pts["architecture"].map(shift))
    sns.lineplot(data=pts, x="k_shown", y="final_accuracy", hue="architecture", style=style,
                 hue_order=hues,
                 palette=arch_colors(pts["architecture"]), marker="o",
                 errorbar=band(pts, FRACTION), err_style="bars", linestyle="", seed=SEED, ax=ax)
    ax.axhline(RECALLED, color="grey", ls="--", lw=1,
               label=f"recalled ({RECALLED:.0%}, the ledger's threshold)")
    if "alphabet_size" in pts and pts["alphabet_size"].notna().any():
        ax.axhline(1 / float(pts["alphabet_size"].iloc[0]), color="grey", ls=":", lw=1,
                   label="chance (1 / alphabet)")
    ax.legend(fontsize=7)
    ax.set(xscale="log",
           xlabel="distance k (output the token seen k steps earlier; log scale)",
           ylabel="final held-out accuracy", ylim=(0, 1.05))
    ax.set_title("Recall at distance k (after the same step budget)\n"
                 f"{caption(pts, clip_text(FRACTION), drawn='bars')}", fontsize=8)
    log_ticks(ax, list(pts["k"].unique()))
    return fig


def accuracy_vs_length(out_dir: Path, suite: str) -> plt.Figure:
    """Train at n, evaluate at n, 2n, 4n: accuracy per architecture and task; architectures
    a little apart along x, each with its marker and dashes, so equal accuracies (LSTM and
    GRU both at 100%) stay visible."""
    long = by_length(rows(out_dir, suite, "convergence"))
    order = task_order(long)
    hues = present(ARCH_ORDER, long["architecture"])
    g = sns.relplot(data=long, x="eval length", y="accuracy", hue="architecture",
                    style="architecture", col="task_label", col_order=order,
                    col_wrap=_wrap(len(order)), kind="line", errorbar=band(long, FRACTION),
                    seed=SEED, palette=arch_colors(long["architecture"]), hue_order=hues,
                    height=2.6, aspect=1.2, **arch_styles(long["architecture"]))
    spread(g.axes, arch_colors(long["architecture"]), hues, points=4)
    length_axes(g)
    g.set_titles("trained on {col_name}")
    g.set_axis_labels("evaluation length", "held-out token accuracy")
    return titled(g.figure, "Length generalisation: trained at n, evaluated at 2n and 4n "
                  "(lines drawn 4 pt apart horizontally)", long,
                  clip_text(FRACTION))
