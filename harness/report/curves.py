"""Figures of the convergence and ablation studies: one seaborn function per figure.

Each reads a suite's stored results (and series.csv for curves) and never retrains. A point's
`role` names its study; FIGURES maps figure name -> (function, measure, role), which
harness.report.figures registers. Bands are 95% bootstrap CIs over seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter

from harness.errors import BadInput
from harness.results import load_results, read_series

ARCH = {"transformer-lm": "Transformer", "transformer": "Transformer", "lstm-lm": "LSTM",
        "lstm": "LSTM", "gru-lm": "GRU", "gru": "GRU"}
ARCH_ORDER = ["Transformer", "LSTM", "GRU"]
ARCH_COLORS = {"Transformer": "#1f77b4", "LSTM": "#d62728", "GRU": "#2ca02c"}
CI = ("ci", 95)
SEED = 0  # seaborn bootstraps its CI: a fixed seed draws the same bands every time
# metrics a run reports only sometimes (target reached, length_gen asked, a text corpus)
OPTIONAL = ("steps_to_target", "accuracy_2n", "accuracy_4n", "final_bits_per_char")
METRIC_LABELS = {"accuracy": "held-out token accuracy", "loss": "held-out loss (nats/token)",
                 "bits_per_char": "held-out bits per character"}


def rows(out_dir: Path, suite: str, role: str, measure: str = "train") -> pd.DataFrame:
    """The suite's finished (ok or diverged) points of one study and measure, labelled."""
    df = load_results(out_dir, [suite])
    keep = (df["role"] == role) & (df["measure"] == measure) & df["status"].isin(["ok",
                                                                                  "diverged"])
    out = df[keep].copy()
    if out.empty:
        raise BadInput(f"no finished {measure!r} points of study {role!r} in suite {suite!r};"
                       f" run `tvr run {role}` (or convergence-quick) first")
    for col in OPTIONAL:
        if col not in out:
            out[col] = np.nan
    out["architecture"] = out["model"].map(ARCH).fillna(out["model"])
    out["task_label"] = task_label(out)
    return out


def task_label(df: pd.DataFrame) -> pd.Series:
    """"copy n=8", "distance-k k=4 n=16", "sort n=8 seq2seq": one panel per such label."""
    label = df["task"].astype(str)
    if "k" in df:
        k = df["k"].map(lambda v: "" if pd.isna(v) else f" k={int(v)}")
        label = label + k
    label = label + " n=" + df["seq_len"].astype(int).astype(str)
    if "framing" in df:
        label = label + df["framing"].map(lambda f: " seq2seq" if f == "seq2seq" else "")
    return label


def task_order(df: pd.DataFrame) -> list[str]:
    """Panel order: by task, then k and n numerically (so k=4 comes before k=12)."""
    keys = df.assign(_k=df["k"] if "k" in df else 0).sort_values(
        ["task", "_k", "seq_len", "task_label"], na_position="first")
    return list(dict.fromkeys(keys["task_label"]))


def _log_ticks(ax: plt.Axes, values: list[float], axis: str = "x") -> None:
    """Plain tick labels at the measured values of a log axis, no minor ticks."""
    values = sorted(values)
    labels = [f"{v:g}" for v in values]
    if axis == "x":
        ax.set_xticks(values, labels)
    else:
        ax.set_yticks(values, labels)
    ax.minorticks_off()


def curves_of(out_dir: Path, suite: str, points: pd.DataFrame, metrics: list[str]
              ) -> pd.DataFrame:
    """Long frame of the points' stored curves (metric, step, value) joined to their rows."""
    series = read_series(out_dir, suite)
    series = series[series["metric"].isin(metrics)]
    return series.merge(points, on="point_id")


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


def _title(fig: plt.Figure, text: str) -> plt.Figure:
    fig.suptitle(text, y=1.02)
    return fig


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
                    col_order=order, col_wrap=_wrap(len(order)), kind="line", errorbar=CI,
                    seed=SEED,
                    hue_order=[a for a in ARCH_ORDER if a in set(long["architecture"])],
                    palette=ARCH_COLORS, height=2.6, aspect=1.25,
                    facet_kws={"sharey": False, "sharex": False})
    g.set_titles("{col_name}")
    g.set_axis_labels("training step", METRIC_LABELS[metric])
    return _title(g.figure, f"Convergence: {METRIC_LABELS[metric]} (parameter-matched; band ="
                  " 95% CI over seeds; a seed that stopped at the target keeps its last value)")


def steps_to_target(out_dir: Path, suite: str) -> plt.Figure:
    """Steps to the target accuracy per task and architecture; a run that never got there
    counts as its whole budget, and each bar says how many seeds reached the target."""
    pts = rows(out_dir, suite, "convergence")
    pts = pts[pts["target"].notna()].copy()
    pts["reached"] = pts["steps_to_target"].notna()
    pts["steps_shown"] = pts["steps_to_target"].fillna(pts["steps"])
    order = task_order(pts)
    hues = [a for a in ARCH_ORDER if a in set(pts["architecture"])]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(order)), 4))
    sns.barplot(data=pts, x="task_label", y="steps_shown", hue="architecture", order=order,
                hue_order=hues, palette=ARCH_COLORS, errorbar=CI, seed=SEED, ax=ax)
    for container, arch in zip(ax.containers, hues, strict=True):
        for bar, task in zip(container, order, strict=True):
            sel = pts[(pts["task_label"] == task) & (pts["architecture"] == arch)]
            if len(sel):
                ax.annotate(f"{int(sel['reached'].sum())}/{len(sel)}",
                            (bar.get_x() + bar.get_width() / 2, 0), xytext=(0, 3),
                            textcoords="offset points", ha="center", fontsize=7,
                            color="white", rotation=90, va="bottom")
    target = pts["target"].iloc[0]
    ax.set(xlabel="", ylabel=f"steps to {target:.0%} held-out accuracy",
           title=f"Steps to {target:.0%} (bar label: seeds that reached it; the others "
                 "count their whole budget)")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(title=None)
    return fig


def accuracy_vs_distance(out_dir: Path, suite: str) -> plt.Figure:
    """Final held-out accuracy on distance-k against k: how far back each model can recall."""
    pts = rows(out_dir, suite, "convergence")
    pts = pts[pts["task"] == "distance-k"]
    if pts.empty:
        raise BadInput(f"suite {suite!r} has no distance-k points")
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    style = "seq_len" if pts["seq_len"].nunique() > 1 else None
    sns.lineplot(data=pts, x="k", y="final_accuracy", hue="architecture", style=style,
                 hue_order=[a for a in ARCH_ORDER if a in set(pts["architecture"])],
                 palette=ARCH_COLORS, marker="o", errorbar=CI, seed=SEED, ax=ax)
    ax.set(xscale="log", xlabel="distance k (output the token seen k steps earlier)",
           ylabel="final held-out accuracy", ylim=(0, 1.05),
           title="Recall at distance k (after the same step budget)")
    _log_ticks(ax, list(pts["k"].unique()))
    return fig


def _by_length(pts: pd.DataFrame) -> pd.DataFrame:
    """Accuracy at n, 2n, 4n as a long frame with an `eval length` column (x n)."""
    cols = {"final_accuracy": 1, "accuracy_2n": 2, "accuracy_4n": 4}
    pts = pts[pts["accuracy_2n"].notna()] if "accuracy_2n" in pts else pts.iloc[:0]
    if pts.empty:
        raise BadInput("no points were evaluated at 2n and 4n (knob length_gen)")
    long = pts.melt(id_vars=[c for c in pts.columns if c not in cols], value_vars=list(cols),
                    var_name="at", value_name="accuracy")
    long["eval length"] = np.log2(long["at"].map(cols))  # 0, 1, 2 -> n, 2n, 4n
    return long


def _length_axes(g: sns.FacetGrid) -> None:
    g.set(xticks=[0, 1, 2], ylim=(0, 1.05))
    for ax in g.axes.flat:
        ax.set_xticklabels(["n", "2n", "4n"])
        ax.tick_params(labelbottom=True)


def accuracy_vs_length(out_dir: Path, suite: str) -> plt.Figure:
    """Train at n, evaluate at n, 2n, 4n: accuracy per architecture and task."""
    long = _by_length(rows(out_dir, suite, "convergence"))
    order = task_order(long)
    g = sns.relplot(data=long, x="eval length", y="accuracy", hue="architecture",
                    col="task_label", col_order=order, col_wrap=_wrap(len(order)),
                    kind="line", marker="o", errorbar=CI, seed=SEED, palette=ARCH_COLORS,
                    hue_order=[a for a in ARCH_ORDER if a in set(long["architecture"])],
                    height=2.6, aspect=1.2)
    _length_axes(g)
    g.set_titles("trained on {col_name}")
    g.set_axis_labels("evaluation length", "held-out token accuracy")
    return _title(g.figure, "Length generalisation: trained at n, evaluated at 2n and 4n")


# ---------------------------------------------------------------- ablations


def positional(out_dir: Path, suite: str) -> plt.Figure:
    """sinusoidal vs learned vs none: accuracy at n, 2n, 4n on order-dependent tasks."""
    long = _by_length(rows(out_dir, suite, "positional"))
    order = task_order(long)
    g = sns.relplot(data=long, x="eval length", y="accuracy", hue="pos_encoding",
                    hue_order=["sinusoidal", "learned", "none"], col="task_label",
                    col_order=order, kind="line", marker="o", errorbar=CI, seed=SEED, height=3,
                    aspect=1.2)
    _length_axes(g)
    g.set_titles("trained on {col_name}")
    g.set_axis_labels("evaluation length", "held-out token accuracy")
    g.legend.set_title("positions")
    return _title(g.figure, "Positional encodings: order and length extrapolation")


def heads(out_dir: Path, suite: str) -> plt.Figure:
    """Counted forward FLOPs per token, measured training tokens/s and final accuracy vs h
    at fixed d_model (the seed: total cost like single-head attention with full d)."""
    pts = rows(out_dir, suite, "heads").sort_values("n_heads")
    pts["h"] = pts["n_heads"].astype(int).astype(str)
    order = list(dict.fromkeys(pts["h"]))
    pts["kflops"] = pts["flops_fwd_per_token"] / 1e3
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), layout="constrained")
    panels = [("kflops", "counted forward kFLOP / token"),
              ("tokens_per_s", "training tokens / s (measured)"),
              ("final_accuracy", "final held-out accuracy")]
    for ax, (col, label) in zip(axes, panels, strict=True):
        sns.barplot(data=pts, x="h", y=col, order=order, color="#1f77b4", errorbar=CI,
                    seed=SEED, ax=ax)
        ax.set(xlabel="heads h", ylabel=label)
    task = pts["task_label"].iloc[0]
    fig.suptitle(f"Heads at d_model={int(pts['d_model'].iloc[0])} ({task}): d_k = d/h")
    return fig


def ffn_width(out_dir: Path, suite: str) -> plt.Figure:
    """Held-out bits/char curves and final value for d_ff/d_model in 1, 2, 4, 8."""
    pts = rows(out_dir, suite, "ffn-width")
    pts["d_ff / d_model"] = (pts["d_ff"] / pts["d_model"]).astype(int).astype(str)
    order = sorted(pts["d_ff / d_model"].unique(), key=int)
    metric = "bits_per_char" if pts["final_bits_per_char"].notna().any() else "loss"
    long = curves_of(out_dir, suite, pts, [metric])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    sns.lineplot(data=long, x="step", y="value", hue="d_ff / d_model", hue_order=order,
                 palette="viridis", errorbar=CI, seed=SEED, ax=axes[0])
    axes[0].set(xlabel="training step", ylabel=METRIC_LABELS[metric], title="curves")
    sns.pointplot(data=pts, x="d_ff / d_model", y=f"final_{metric}", order=order,
                  errorbar=CI, seed=SEED, ax=axes[1])
    axes[1].set(xlabel="d_ff / d_model", ylabel=f"final {METRIC_LABELS[metric]}",
                title="after the step budget")
    return _title(fig, f"FFN width ({pts['task_label'].iloc[0]})")


def scaling_curves(out_dir: Path, suite: str) -> plt.Figure:
    """Training with and without the 1/sqrt(d_k) factor, one panel per d_k."""
    pts = rows(out_dir, suite, "scaling-factor")
    pts["scaled"] = pts["attn_scale"].map(lambda v: "1/sqrt(d_k)" if str(v) == "True"
                                          else "unscaled")
    long = fill_stopped(curves_of(out_dir, suite, pts, ["accuracy"]), ["d_model", "scaled"])
    g = sns.relplot(data=long, x="step", y="value", hue="scaled",
                    hue_order=["1/sqrt(d_k)", "unscaled"], col="d_model", kind="line",
                    errorbar=CI, seed=SEED, height=3, aspect=1.2, facet_kws={"sharex": False})
    g.set_titles("d_k = {col_name} (one head)")
    g.set_axis_labels("training step", "held-out token accuracy")
    g.legend.set_title(None)
    return _title(g.figure, f"Scaled vs unscaled dot products: {pts['task_label'].iloc[0]} "
                  "(a seed that stopped at 99% keeps its last value)")


def qk_variance(out_dir: Path, suite: str) -> plt.Figure:
    """At init: Var(q.k) vs d_k against the seed's Var = d_k; attention entropy and the
    softmax Jacobian norm with and without the scale factor, for the model's q, k and for
    i.i.d. N(0, 1) ones."""
    pts = rows(out_dir, suite, "scaling-factor", "attn-init")
    pts["scaled"] = pts["attn_scale"].map(lambda v: "1/sqrt(d_k)" if str(v) == "True"
                                          else "unscaled")
    var = pts.melt(id_vars=["d_k", "seed"], value_vars=["qk_var_unit", "qk_var_normalised",
                                                        "qk_var"], var_name="q, k")
    var["q, k"] = var["q, k"].map({
        "qk_var_unit": "i.i.d. N(0,1)", "qk_var": "model at init (raw)",
        "qk_var_normalised": "model, / (Var q_i Var k_i)"})
    d = sorted(float(v) for v in pts["d_k"].unique())
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.9), layout="constrained")
    sns.lineplot(data=var, x="d_k", y="value", hue="q, k", marker="o", errorbar=CI, seed=SEED,
                 ax=axes[0])
    axes[0].plot(d, d, "k--", lw=1, label="Var = d_k (the seed)")
    axes[0].set(xscale="log", yscale="log", xlabel="d_k", ylabel="Var(q . k)",
                title="dot-product variance")
    _log_ticks(axes[0], d)
    axes[0].legend(fontsize=7, title=None)
    for ax, col, label in ((axes[1], "attn_entropy", "attention entropy (nats)"),
                           (axes[2], "softmax_jacobian_norm", "||softmax Jacobian||_F / row")):
        both = pts.melt(id_vars=["d_k", "seed", "scaled"], value_vars=[col, f"{col}_unit"],
                        var_name="q, k")
        both["q, k"] = both["q, k"].map({col: "model", f"{col}_unit": "i.i.d. N(0,1)"})
        sns.lineplot(data=both, x="d_k", y="value", hue="scaled",
                     hue_order=["1/sqrt(d_k)", "unscaled"], style="q, k",
                     style_order=["model", "i.i.d. N(0,1)"], markers={"model": "o",
                     "i.i.d. N(0,1)": "X"}, dashes={"model": "", "i.i.d. N(0,1)": (3, 2)},
                     errorbar=CI, seed=SEED, ax=ax)
        if col == "attn_entropy":
            ax.plot(d, pts.groupby("d_k")["attn_entropy_max"].mean().loc[d].to_numpy(), "k:",
                    lw=1, label="uniform (the maximum)")
        ax.set(xscale="log", xlabel="d_k", ylabel=label, title=label.split(" (")[0])
        _log_ticks(ax, d)
    handles, labels = axes[1].get_legend_handles_labels()  # one legend for panels 2 and 3
    for ax in axes[1:]:
        ax.get_legend().remove()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8)
    fig.suptitle("Why 1/sqrt(d_k): the first attention layer of an initialised model")
    return fig


def norm_warmup(out_dir: Path, suite: str) -> plt.Figure:
    """Held-out loss curves of Post-LN and Pre-LN with and without warm-up, per depth."""
    pts = rows(out_dir, suite, "norm-warmup")
    pts["LN"] = pts["norm"].map({"post": "Post-LN", "pre": "Pre-LN"})
    pts["warm-up"] = pts["warmup"].astype(int).map(lambda w: f"{w} steps" if w else "none")
    long = curves_of(out_dir, suite, pts, ["loss"])
    g = sns.relplot(data=long, x="step", y="value", hue="LN", hue_order=["Post-LN", "Pre-LN"],
                    style="warm-up", style_order=sorted(pts["warm-up"].unique()),
                    col="n_layers", kind="line", errorbar=CI, seed=SEED, height=3, aspect=1.15,
                    palette={"Post-LN": "#d62728", "Pre-LN": "#1f77b4"})
    g.set_titles("depth {col_name}")
    g.set_axis_labels("training step", METRIC_LABELS["loss"])
    for depth, ax in g.axes_dict.items():
        bad = pts[(pts["n_layers"] == depth) & (pts["status"] == "diverged")]
        if len(bad):
            ax.text(0.5, 0.9, f"diverged: {', '.join(bad['LN'] + ' / ' + bad['warm-up'])}",
                    transform=ax.transAxes, ha="center", fontsize=7, color="black")
    return _title(g.figure, "Post-LN vs Pre-LN, with and without learning-rate warm-up "
                  f"({pts['task_label'].iloc[0]})")


def layer_grad_norms(out_dir: Path, suite: str) -> plt.Figure:
    """Gradient norm of each layer's parameters at init, Post-LN vs Pre-LN, per depth."""
    pts = rows(out_dir, suite, "norm-warmup", "layer-grads")
    pts["LN"] = pts["norm"].map({"post": "Post-LN", "pre": "Pre-LN"})
    long = curves_of(out_dir, suite, pts, ["layer_grad_norm"])
    g = sns.relplot(data=long, x="step", y="value", hue="LN", hue_order=["Post-LN", "Pre-LN"],
                    col="n_layers", kind="line", marker="o", errorbar=CI, seed=SEED, height=3,
                    aspect=1.1, palette={"Post-LN": "#d62728", "Pre-LN": "#1f77b4"},
                    facet_kws={"sharex": False})
    g.set(yscale="log")
    # plain 2 and 0.5, not 2x10^0; minor ticks labelled at 2, 3, 5 only, so labels never touch
    plain = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}".lstrip("0.")[:1] in "1235" else "")
    for depth, ax in g.axes_dict.items():
        ax.set_xticks(range(1, int(depth) + 1, max(1, int(depth) // 6)))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    g.set_titles("depth {col_name}")
    g.set_axis_labels("layer (1 = input side)", "||grad|| of the layer's parameters")
    return _title(g.figure, "Per-layer gradient norm at initialisation (Xiong et al. 2020)")


def grad_distance(out_dir: Path, suite: str) -> plt.Figure:
    """||dL_t/dx_{t-k}|| vs k per architecture, at init and after training (log scale)."""
    pts = rows(out_dir, suite, "gradient-distance", "grad-distance")
    long = curves_of(out_dir, suite, pts, ["grad_norm_init", "grad_norm_trained"])
    long["when"] = long["metric"].map({"grad_norm_init": "at initialisation",
                                       "grad_norm_trained": "after training"})
    long = long[(long["step"] > 0) & (long["value"] > 0)]  # log axes: k = 0 is the token itself
    g = sns.relplot(data=long, x="step", y="value", hue="architecture", col="when",
                    col_order=["at initialisation", "after training"], kind="line",
                    errorbar=CI, seed=SEED, palette=ARCH_COLORS, height=3.2, aspect=1.2,
                    hue_order=[a for a in ARCH_ORDER if a in set(long["architecture"])])
    g.set(yscale="log")  # exponential decay is a straight line here
    g.set_titles("{col_name}")
    g.set_axis_labels("distance k back from the scored position", "||dL_t / dx_(t-k)||")
    return _title(g.figure, "Gradient reaching an input k steps back "
                  f"({pts['task_label'].iloc[0]}, parameter-matched)")


Draw = Callable[[Path, str], plt.Figure]
# name -> (draw, the Point.measure it reads, the study = Point.role it reads)
FIGURES: dict[str, tuple[Draw, str, str]] = {
    "convergence-accuracy": (partial(convergence_curves, metric="accuracy"), "train",
                             "convergence"),
    "convergence-loss": (partial(convergence_curves, metric="loss"), "train", "convergence"),
    "steps-to-target": (steps_to_target, "train", "convergence"),
    "accuracy-vs-distance": (accuracy_vs_distance, "train", "convergence"),
    "accuracy-vs-length": (accuracy_vs_length, "train", "convergence"),
    "scaling-curves": (scaling_curves, "train", "scaling-factor"),
    "qk-variance": (qk_variance, "attn-init", "scaling-factor"),
    "heads": (heads, "train", "heads"),
    "ffn-width": (ffn_width, "train", "ffn-width"),
    "positional": (positional, "train", "positional"),
    "norm-warmup": (norm_warmup, "train", "norm-warmup"),
    "layer-grad-norms": (layer_grad_norms, "layer-grads", "norm-warmup"),
    "grad-distance": (grad_distance, "grad-distance", "gradient-distance"),
}
