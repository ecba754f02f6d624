"""Figures of the convergence study, and the helpers every study figure reads its data with.

Each figure reads a suite's stored results (and series.csv for curves) and never retrains. A
point's `study` column names its study and `runner` what measured it; harness.report.studies
names each figure with its study and runner. Each title states seeds and scale (caption()).
Intervals are the mean's 95% t-interval over 5 or more seeds (the ledger's interval,
harness.report.stats.t_interval), the range of the seeds below that (band()).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from harness.errors import BadInput
from harness.report.claim_training import RECALLED
from harness.report.labels import (
    ARCH_ORDER,
    METRIC_LABELS,
    arch_colors,
    labelled,
    present,
    task_order,
    title_above,
)
from harness.report.stats import t_interval
from harness.results import load_results, read_series

MIN_CI_SEEDS = 5  # a bootstrap over fewer seeds is not an interval worth the name
SEED = 0  # seaborn bootstraps its CI: a fixed seed draws the same bands every time


def band(pts: pd.DataFrame) -> tuple[str, int] | Callable:
    """seaborn's errorbar: the mean's 95% t-interval over >= MIN_CI_SEEDS seeds (the interval
    the claims ledger states), else the range (min to max) of the seeds, so the band shows
    the seeds' own values."""
    return t_interval if pts["seed"].nunique() >= MIN_CI_SEEDS else ("pi", 100)


def caption(pts: pd.DataFrame) -> str:
    """Seeds, what the band is, and the scale: parameters, steps, device."""
    seeds = int(pts.groupby([c for c in ("study", "model", "task_label") if c in pts])
                ["seed"].nunique().min())
    what = ("band: the mean's 95% t-interval over seeds" if pts["seed"].nunique() >=
            MIN_CI_SEEDS else "band: min to max of the seeds")
    parts = [f"{seeds} seed{'s' if seeds != 1 else ''} per configuration; {what}"]
    if "n_params" in pts and pts["n_params"].notna().any():
        lo, hi = pts["n_params"].min(), pts["n_params"].max()
        parts.append(f"{lo / 1e3:.0f}k" + (f"-{hi / 1e3:.0f}k" if hi != lo else "")
                     + " parameters")
    if "steps" in pts and pts["steps"].fillna(0).max() > 0:
        parts.append(f"up to {int(pts['steps'].max())} steps")
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


def titled(fig: plt.Figure, text: str, pts: pd.DataFrame | None = None) -> plt.Figure:
    """The figure with `text` as its title, above seaborn's facet titles, and under it the
    seeds and scale of `pts`."""
    return title_above(fig, text if pts is None else f"{text}\n{caption(pts)}")


def _wrap(n: int) -> int:
    return min(n, 4)


# ---------------------------------------------------------------- convergence


def convergence_curves(out_dir: Path, suite: str, metric: str) -> plt.Figure:
    """Held-out `metric` vs step, one panel per task, hue = architecture, CI over seeds."""
    pts = rows(out_dir, suite, "convergence")
    long = fill_stopped(curves_of(out_dir, suite, pts, [metric]),
                        ["task_label", "architecture"])
    order = task_order(pts)
    g = sns.relplot(data=long, x="step", y="value", hue="architecture", col="task_label",
                    col_order=order, col_wrap=_wrap(len(order)), kind="line", errorbar=band(pts),
                    seed=SEED, hue_order=present(ARCH_ORDER, long["architecture"]),
                    palette=arch_colors(long["architecture"]), height=2.6, aspect=1.25,
                    facet_kws={"sharey": False, "sharex": False})
    g.set_titles("{col_name}")
    g.set_axis_labels("training step", METRIC_LABELS[metric])
    if metric == "accuracy" and pts["target"].notna().any():
        for ax in g.axes.flat:
            ax.axhline(float(pts["target"].dropna().iloc[0]), color="grey", ls="--", lw=1)
        g.figure.text(0.01, 0.0, f"dashed: the target ({float(pts['target'].dropna().iloc[0]):.0%}"
                      "), steps to which the study compares", fontsize=8, va="top")
    return titled(g.figure, f"Convergence: {METRIC_LABELS[metric]} (parameter-matched; a seed "
                  "that stopped at the target keeps its last value)", pts)


def steps_to_target(out_dir: Path, suite: str) -> plt.Figure:
    """Steps to the target accuracy per task and architecture, one marker per seed: a filled
    dot where the seed reached the target, an open triangle at its budget labelled "> N"
    where it never did (censored: the budget is a lower bound, not a measurement)."""
    pts = rows(out_dir, suite, "convergence")
    pts = pts[pts["target"].notna()].copy()
    order = task_order(pts)
    hues = present(ARCH_ORDER, pts["architecture"])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(order)), 4))
    colors = arch_colors(pts["architecture"])
    slot = {task: i for i, task in enumerate(order)}
    width = 0.8 / max(1, len(hues))
    for j, arch in enumerate(hues):
        mine = pts[pts["architecture"] == arch]
        x = mine["task_label"].map(slot) - 0.4 + width * (j + 0.5)
        jitter = (mine["seed"].rank(method="first") - 1) * width * 0.15
        reached = mine["steps_to_target"].notna()
        ax.scatter(x[reached] + jitter[reached], mine.loc[reached, "steps_to_target"],
                   color=colors.get(arch), label=arch, s=22, zorder=3)
        ax.scatter(x[~reached] + jitter[~reached], mine.loc[~reached, "steps"], marker="^",
                   facecolors="none", edgecolors=colors.get(arch), s=30, zorder=3)
        for xi, budget in zip(x[~reached].unique(), mine.loc[~reached, "steps"].groupby(
                x[~reached]).max(), strict=True):
            ax.annotate(f"> {int(budget)}", (xi, budget), xytext=(0, 5), ha="center",
                        textcoords="offset points", fontsize=6, color=colors.get(arch))
    target = pts["target"].iloc[0]
    ax.set_xticks(range(len(order)), order, rotation=30, ha="right")
    ax.set(xlabel="", ylabel=f"steps to {target:.0%} held-out accuracy")
    ax.set_title(f"Steps to {target:.0%}: dot = a seed that reached it; open triangle = "
                 f"never reached within its budget (> N)\n{caption(pts)}", fontsize=8)
    ax.legend(title=None, fontsize=8)
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
                 palette=arch_colors(pts["architecture"]), marker="o", errorbar=band(pts),
                 err_style="bars", linestyle="", seed=SEED, ax=ax)
    ax.axhline(RECALLED, color="grey", ls="--", lw=1,
               label=f"recalled ({RECALLED:.0%}, the ledger's threshold)")
    if "alphabet_size" in pts and pts["alphabet_size"].notna().any():
        ax.axhline(1 / float(pts["alphabet_size"].iloc[0]), color="grey", ls=":", lw=1,
                   label="chance (1 / alphabet)")
    ax.legend(fontsize=7)
    ax.set(xscale="log", xlabel="distance k (output the token seen k steps earlier)",
           ylabel="final held-out accuracy", ylim=(0, 1.05))
    ax.set_title(f"Recall at distance k (after the same step budget)\n{caption(pts)}",
                 fontsize=8)
    log_ticks(ax, list(pts["k"].unique()))
    return fig


def accuracy_vs_length(out_dir: Path, suite: str) -> plt.Figure:
    """Train at n, evaluate at n, 2n, 4n: accuracy per architecture and task."""
    long = by_length(rows(out_dir, suite, "convergence"))
    order = task_order(long)
    g = sns.relplot(data=long, x="eval length", y="accuracy", hue="architecture",
                    col="task_label", col_order=order, col_wrap=_wrap(len(order)),
                    kind="line", marker="o", errorbar=band(long), seed=SEED,
                    palette=arch_colors(long["architecture"]),
                    hue_order=present(ARCH_ORDER, long["architecture"]),
                    height=2.6, aspect=1.2)
    length_axes(g)
    g.set_titles("trained on {col_name}")
    g.set_axis_labels("evaluation length", "held-out token accuracy")
    return titled(g.figure, "Length generalisation: trained at n, evaluated at 2n and 4n",
                  long)
