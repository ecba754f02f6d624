"""Figures of the ablation studies: positional encodings, heads, FFN width, the 1/sqrt(d_k)
scale, Post-LN vs Pre-LN with warm-up, and gradient reach over distance.

Like harness.report.curves (whose data helpers these use), each figure reads a suite's stored
results and curves and never retrains; harness.report.studies names them.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from harness.report.claim_training import (
    EXTRAPOLATES,
    FLOP_TOL,
    KEPT,
    SPEED_TOL,
    VANISHED,
    VAR_TOL,
)
from harness.report.curves import (
    FRACTION,
    NONNEGATIVE,
    SEED,
    band,
    by_length,
    clip_text,
    curves_of,
    fill_stopped,
    length_axes,
    log_ticks,
    relegend,
    rows,
    titled,
)
from harness.report.labels import (
    ARCH_ORDER,
    METRIC_LABELS,
    arch_colors,
    present,
    task_order,
)

SCALES = ["scaled by 1/√d_k", "unscaled"]
QK = ("model's q, k", "i.i.d. N(0, 1) q, k")
NORMS = {"post": "Post-LN", "pre": "Pre-LN"}
NORM_COLORS = {"Post-LN": "#d62728", "Pre-LN": "#1f77b4"}


def _scaled(pts: pd.DataFrame) -> pd.Series:
    """"1/sqrt(d_k)" or "unscaled" per row, from the attn_scale column."""
    return pts["attn_scale"].map(lambda v: SCALES[0] if str(v) == "True" else SCALES[1])


# ---------------------------------------------------------------- architecture choices


def positional(out_dir: Path, suite: str) -> plt.Figure:
    """sinusoidal vs learned vs none: accuracy at n, 2n, 4n on order-dependent tasks."""
    long = by_length(rows(out_dir, suite, "positional"))
    order = task_order(long)
    g = sns.relplot(data=long, x="eval length", y="accuracy", hue="pos_encoding",
                    hue_order=["sinusoidal", "learned", "none"], col="task_label",
                    col_order=order, kind="line", marker="o", errorbar=band(long, FRACTION),
                    seed=SEED,
                    height=3,
                    aspect=1.2)
    length_axes(g)
    for task, ax in g.axes_dict.items():
        mine = long[(long["task_label"] == task)]
        sin_n = mine[(mine["pos_encoding"] == "sinusoidal") & (mine["eval length"] == 0)]
        ax.axhline(EXTRAPOLATES * sin_n["accuracy"].mean(), color="grey", ls="--", lw=1,
                   label=f"{EXTRAPOLATES:.0%} of sinusoidal at n (extrapolates above)")
        if "alphabet_size" in mine and mine["alphabet_size"].notna().any():
            ax.axhline(1 / float(mine["alphabet_size"].iloc[0]), color="grey", ls=":", lw=1,
                       label="chance (1 / alphabet)")
    g.set_titles("trained on {col_name}")
    g.set_axis_labels("evaluation length", "held-out token accuracy")
    _legend_with_lines(g, "positions")
    return titled(g.figure, "Positional encodings: order and length extrapolation", long,
                  clip_text(FRACTION))


def _legend_with_lines(g: sns.FacetGrid, title: str | None) -> None:
    """The grid's legend, with the threshold lines drawn on its first panel added."""
    handles, labels = g.axes.flat[0].get_legend_handles_labels()
    known = dict(zip(labels, handles, strict=True)) | g._legend_data
    g.legend.remove()
    g.add_legend(known, title=title)


def heads(out_dir: Path, suite: str) -> plt.Figure:
    """Counted forward FLOPs per token, measured training tokens/s and final accuracy vs h
    at fixed d_model (the seed: total cost like single-head attention with full d): one dot
    per seed, the mean with its interval beside them."""
    pts = rows(out_dir, suite, "heads").sort_values("n_heads")
    pts["h"] = pts["n_heads"].astype(int).astype(str)
    order = list(dict.fromkeys(pts["h"]))
    pts["kflops"] = pts["flops_fwd_per_token"] / 1e3
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6), layout="constrained")
    panels = [("kflops", "counted forward kFLOP / token"),
              ("tokens_per_s", "training tokens / s (measured)"),
              ("final_accuracy", "final held-out accuracy")]
    for ax, (col, label) in zip(axes, panels, strict=False):
        # a swarm, not a strip: stripplot's jitter draws from numpy's global generator,
        # so the figure changed at every `tvr report`
        sns.swarmplot(data=pts, x="h", y=col, order=order, color="#1f77b4", alpha=0.6,
                      size=4, ax=ax)
        sns.pointplot(data=pts, x="h", y=col, order=order, color="black",
                      errorbar=band(pts, FRACTION if col == "final_accuracy" else NONNEGATIVE),
                      linestyle="none", markers="_", markersize=14, capsize=0.15, ax=ax)
        ax.set(xlabel="heads h", ylabel=label,
               ylim=(0, 1.05 if col == "final_accuracy" else None))
    one = pts[pts["h"] == order[0]]
    axes[0].axhspan(*(one["kflops"].mean() * (1 + t) for t in (-FLOP_TOL, FLOP_TOL)),
                    color="grey", alpha=0.3, label=f"h=1 ± {FLOP_TOL:.0%} (equal cost)")
    axes[1].axhspan(*(one["tokens_per_s"].median() * (1 + t) for t in (-SPEED_TOL, SPEED_TOL)),
                    color="grey", alpha=0.3, label=f"h=1 median ± {SPEED_TOL:.0%}")
    for ax in axes[:2]:
        ax.legend(fontsize=7, loc="lower right")
    _steps_panel(axes[3], pts, order)
    task = pts["task_label"].iloc[0]
    return titled(fig, f"Heads at d_model={int(pts['d_model'].iloc[0])} ({task}): d_k = d/h; "
                  "dots: seeds, black: mean and interval", pts,
                  "to each metric's range (accuracy [0, 1])", drawn="bars")


def _steps_panel(ax: plt.Axes, pts: pd.DataFrame, order: list[str]) -> None:
    """Steps to the target per seed against h; a censored seed is an open triangle at its
    budget, labelled "> N"."""
    spread_x = (pts.groupby("h").cumcount() - 2) * 0.06  # seeds side by side, none hidden
    x = pts["h"].map({h: i for i, h in enumerate(order)}) + spread_x
    reached = pts["steps_to_target"].notna()
    ax.scatter(x[reached], pts.loc[reached, "steps_to_target"], color="#1f77b4", s=22)
    ax.scatter(x[~reached], pts.loc[~reached, "steps"], marker="^", facecolors="none",
               edgecolors="#1f77b4", s=30, label="never reached (> budget)")
    ax.set_xticks(range(len(order)), order)
    ax.set(xlabel="heads h", ylabel="steps to 99% (one dot per seed)", ylim=(0, None))
    if (~reached).any():
        ax.legend(fontsize=7)


def ffn_width(out_dir: Path, suite: str) -> plt.Figure:
    """Held-out bits/char curves and final value for d_ff/d_model in 1, 2, 4, 8."""
    pts = rows(out_dir, suite, "ffn-width")
    pts["d_ff / d_model"] = (pts["d_ff"] / pts["d_model"]).astype(int).astype(str)
    order = sorted(pts["d_ff / d_model"].unique(), key=int)
    metric = "bits_per_char" if pts["final_bits_per_char"].notna().any() else "loss"
    long = curves_of(out_dir, suite, pts, [metric])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    sns.lineplot(data=long, x="step", y="value", hue="d_ff / d_model", hue_order=order,
                 palette="viridis", errorbar=band(pts, NONNEGATIVE), seed=SEED, ax=axes[0])
    axes[0].set(xlabel="training step", ylabel=METRIC_LABELS[metric], title="curves")
    # no line between widths: one would draw steps smaller than the intervals as changes
    sns.pointplot(data=pts, x="d_ff / d_model", y=f"final_{metric}", order=order,
                  errorbar=band(pts, NONNEGATIVE), seed=SEED, linestyle="none", ax=axes[1])
    # a fixed one-unit span around the values: a narrow automatic axis would magnify a
    # spread of a tenth of a bit into the whole panel
    mid = float(pts[f"final_{metric}"].mean())
    axes[1].set(xlabel="d_ff / d_model", ylabel=f"final {METRIC_LABELS[metric]}",
                title="after the step budget (y axis spans 1 unit)", ylim=(mid - 0.5, mid + 0.5))
    return titled(fig, f"FFN width ({pts['task_label'].iloc[0]}); left: band, right: bars",
                  pts, clip_text(NONNEGATIVE), drawn="interval")


# ---------------------------------------------------------------- the 1/sqrt(d_k) scale


def scaling_curves(out_dir: Path, suite: str) -> plt.Figure:
    """Training with and without the 1/sqrt(d_k) factor, one panel per d_k."""
    pts = rows(out_dir, suite, "scaling-factor")
    pts["scaled"] = _scaled(pts)
    long = fill_stopped(curves_of(out_dir, suite, pts, ["accuracy"]), ["d_model", "scaled"])
    g = sns.relplot(data=long, x="step", y="value", hue="scaled", hue_order=SCALES,
                    col="d_model", kind="line", errorbar=band(pts, FRACTION), seed=SEED,
                    height=3, aspect=1.2,
                    facet_kws={"sharex": False})
    g.set_titles("d_k = {col_name} (one head)")
    g.set_axis_labels("training step", "held-out token accuracy")
    g.legend.set_title(None)
    return titled(g.figure, f"Scaled vs unscaled dot products: {pts['task_label'].iloc[0]} "
                  "(a seed that stopped at 99% keeps its last value)", pts, clip_text(FRACTION))


# one colour and one style meaning over qk_variance's panels: colour = the scale factor,
# marker and dashes = which q, k
SCALE_COLORS = dict(zip(SCALES, ("#1f77b4", "#ff7f0e"), strict=True))
NORMALISED = "model's q, k, divided by Var(q_i) Var(k_i)"
QK_STYLES = {QK[0]: ("o", ""), QK[1]: ("X", (3, 2)), NORMALISED: ("s", (1, 1.5))}


def _qk_lines(ax: plt.Axes, data: pd.DataFrame, pts: pd.DataFrame) -> None:
    """`value` vs d_k: colour by `scaled`, marker and dashes by `q, k`, as QK_STYLES."""
    kinds = [k for k in QK_STYLES if k in set(data["q, k"])]
    sns.lineplot(data=data, x="d_k", y="value", hue="scaled",
                 hue_order=[s for s in SCALES if s in set(data["scaled"])],
                 palette=SCALE_COLORS, style="q, k", style_order=kinds,
                 markers={k: QK_STYLES[k][0] for k in kinds},
                 dashes={k: QK_STYLES[k][1] for k in kinds},
                 errorbar=band(pts, NONNEGATIVE), seed=SEED, ax=ax, legend=False)


def _variance_panel(ax: plt.Axes, pts: pd.DataFrame, d: list[float]) -> None:
    """Var(q.k) of the unscaled dot product vs d_k, for i.i.d. N(0, 1) q, k and the model's
    (as measured and divided by Var(q_i) Var(k_i)), against Var = d_k. q.k does not depend
    on the scale factor: the unscaled rows are read (each seed's q, k once)."""
    once = pts[pts["scaled"] == SCALES[1]] if (pts["scaled"] == SCALES[1]).any() else \
        pts.drop_duplicates(["d_k", "seed"])
    var = once.melt(id_vars=["d_k", "seed"], value_vars=["qk_var_unit", "qk_var_normalised",
                                                         "qk_var"], var_name="q, k")
    var["q, k"] = var["q, k"].map({"qk_var_unit": QK[1], "qk_var": QK[0],
                                   "qk_var_normalised": NORMALISED})
    _qk_lines(ax, var.assign(scaled=SCALES[1]), pts)
    ax.plot(d, d, "k--", lw=1)
    ax.fill_between(d, [(1 - VAR_TOL) * v for v in d], [(1 + VAR_TOL) * v for v in d],
                    color="grey", alpha=0.3)
    ax.set(xscale="log", yscale="log", xlabel="d_k (log scale)",
           ylabel="Var(q · k), unscaled (log scale)", title="dot-product variance")
    log_ticks(ax, d)


def _softmax_panel(ax: plt.Axes, pts: pd.DataFrame, d: list[float], col: str, label: str
                   ) -> None:
    """`col` vs d_k, scaled and unscaled, for the model's q, k and i.i.d. N(0, 1) ones."""
    both = pts.melt(id_vars=["d_k", "seed", "scaled"], value_vars=[col, f"{col}_unit"],
                    var_name="q, k")
    both["q, k"] = both["q, k"].map({col: QK[0], f"{col}_unit": QK[1]})
    _qk_lines(ax, both, pts)
    if col == "attn_entropy":
        ax.plot(d, pts.groupby("d_k")["attn_entropy_max"].mean().loc[d].to_numpy(), "k:",
                lw=1)
    name, unit = label.split(" (")
    ax.set(xscale="log", xlabel="d_k (log scale)", ylabel=unit.rstrip(")"), title=name)
    log_ticks(ax, d)


def qk_variance(out_dir: Path, suite: str) -> plt.Figure:
    """At init: Var(q.k) vs d_k against the seed's Var = d_k; attention entropy and the
    softmax Jacobian norm with and without the scale factor, for the model's q, k and for
    i.i.d. N(0, 1) ones. One legend: a colour is the scale factor and a marker the q, k in
    every panel."""
    pts = rows(out_dir, suite, "scaling-factor", "attn-init")
    pts["scaled"] = _scaled(pts)
    d = sorted(float(v) for v in pts["d_k"].unique())
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.9), layout="constrained")
    _variance_panel(axes[0], pts, d)
    _softmax_panel(axes[1], pts, d, "attn_entropy", "attention entropy (nats)")
    _softmax_panel(axes[2], pts, d, "softmax_jacobian_norm",
                   "softmax Jacobian (Frobenius norm, per row)")
    entries = {s: Line2D([], [], color=SCALE_COLORS[s], lw=2) for s in SCALES
               if s in set(pts["scaled"])}
    entries |= {k: Line2D([], [], color="0.2", marker=m, ls=(0, dash) if dash else "-",
                          lw=1.2) for k, (m, dash) in QK_STYLES.items()}
    entries |= {"Var = d_k (the identity)": Line2D([], [], color="black", ls="--", lw=1),
                f"d_k ± {VAR_TOL:.0%} (identity check)": Patch(color="grey", alpha=0.3),
                "uniform attention (the maximum)": Line2D([], [], color="black", ls=":",
                                                          lw=1)}
    fig.legend(list(entries.values()), list(entries), loc="outside lower center",
               ncol=5, fontsize=8, frameon=False)
    titled(fig, "Why 1/√d_k: the first attention layer of an initialised model (colour: "
           "the scale factor, marker and dashes: the q, k, in every panel)", pts,
           clip_text(NONNEGATIVE))
    return fig


# ---------------------------------------------------------------- normalisation, gradients


def norm_warmup(out_dir: Path, suite: str) -> plt.Figure:
    """Held-out loss curves of Post-LN and Pre-LN with and without warm-up, per depth."""
    pts = rows(out_dir, suite, "norm-warmup")
    pts["LN"] = pts["norm"].map(NORMS)
    pts["warm-up"] = pts["warmup"].astype(int).map(lambda w: f"warm-up {w} steps" if w else
                                                    "no warm-up")
    long = curves_of(out_dir, suite, pts, ["loss"])
    g = sns.relplot(data=long, x="step", y="value", hue="LN", hue_order=list(NORM_COLORS),
                    style="warm-up",
                    style_order=sorted(pts["warm-up"].unique(), key=lambda w: w == "no warm-up"),
                    col="n_layers", kind="line", errorbar=band(pts, NONNEGATIVE), seed=SEED,
                    height=3, aspect=1.15,
                    palette=NORM_COLORS)
    relegend(g, headings=("LN", "warm-up"), title="")
    g.set_titles("depth {col_name}")
    g.set_axis_labels("training step", METRIC_LABELS["loss"])
    unigram = pts.get("unigram_bits_per_char", pd.Series(dtype=float)).dropna()
    for depth, ax in g.axes_dict.items():
        if len(unigram):  # the baseline the warm-up claims are gated on, in nats
            ax.axhline(float(unigram.iloc[0]) * np.log(2), color="grey", ls=":", lw=1)
            ax.text(0.98, 0.55, "unigram model (dotted)", transform=ax.transAxes,
                    ha="right", fontsize=7, color="0.3")
        bad = pts[(pts["n_layers"] == depth) & (pts["status"] == "diverged")]
        if len(bad):
            ax.text(0.5, 0.9, f"diverged: {', '.join(bad['LN'] + ' / ' + bad['warm-up'])}",
                    transform=ax.transAxes, ha="center", fontsize=7, color="black")
    return titled(g.figure, "Post-LN vs Pre-LN, with and without learning-rate warm-up "
                  f"({pts['task_label'].iloc[0]})", pts, clip_text(NONNEGATIVE))


def layer_grad_norms(out_dir: Path, suite: str) -> plt.Figure:
    """Gradient norm of each layer's parameters at init, Post-LN vs Pre-LN, per depth."""
    pts = rows(out_dir, suite, "norm-warmup", "layer-grads")
    pts["LN"] = pts["norm"].map(NORMS)
    long = curves_of(out_dir, suite, pts, ["layer_grad_norm"])
    g = sns.relplot(data=long, x="step", y="value", hue="LN", hue_order=list(NORM_COLORS),
                    col="n_layers", kind="line", marker="o", errorbar=band(pts, NONNEGATIVE),
                    seed=SEED, height=3, aspect=1.1, palette=NORM_COLORS,
                    facet_kws={"sharex": False})
    g.set(yscale="log")
    # plain 2 and 0.5, not 2x10^0; minor ticks labelled at 2, 3, 5 only, so labels never touch
    plain = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}".lstrip("0.")[:1] in "1235" else "")
    for depth, ax in g.axes_dict.items():
        ax.set_xticks(range(1, int(depth) + 1, max(1, int(depth) // 6)))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    for depth, ax in g.axes_dict.items():  # the number the Post-LN depth claim judges
        mine = pts[pts["n_layers"] == depth].groupby("LN")["grad_norm_last_over_first"].mean()
        ax.text(0.03, 0.03, "last / first: " + ", ".join(f"{ln} {v:.2f}" for ln, v in
                                                         mine.items()),
                transform=ax.transAxes, fontsize=7, color="0.2")
    g.set_titles("depth {col_name}")
    g.set_axis_labels("layer (1 = input side)",
                      "||grad|| of the layer's\nparameters (log scale)")
    return titled(g.figure, "Per-layer gradient norm at initialisation (Xiong et al. 2020)",
                  pts, clip_text(NONNEGATIVE))


RESIDUAL_ARMS = {"True": "with residual branch", "False": "without"}
RESIDUAL_COLORS = {"with residual branch": "#2ca02c", "without": "#7f7f7f"}


def residual_depth(out_dir: Path, suite: str) -> plt.Figure:
    """Against depth, at initialisation, Post-LN and Pre-LN apart, with and without the
    residual branch: the token diversity the last layer keeps of the input (log scale; 0
    is every position the same vector) and the gradient norm reaching the input over the
    one leaving the last layer (log10; the dotted lines bound "passed back", 10x)."""
    pts = rows(out_dir, suite, "residual", "layer-grads")
    pts["LN"] = pts["norm"].map(NORMS)
    pts["arm"] = pts["residual"].astype(str).map(RESIDUAL_ARMS)
    pts["log10 gradient passed back"] = np.log10(pts["grad_input_over_output"].astype(float))
    panels = (("signal_last_over_input", "signal kept by the last layer\n(log scale)"),
              ("log10 gradient passed back", "log10 ||grad at input|| /\n||grad at last layer||"))
    order = [ln for ln in NORM_COLORS if ln in set(pts["LN"])]
    fig, axes = plt.subplots(2, len(order), figsize=(4.2 * len(order), 6.4), squeeze=False,
                             sharex=True)
    for col, ln in enumerate(order):
        mine = pts[pts["LN"] == ln]
        for row, (metric, label) in enumerate(panels):
            ax = axes[row][col]
            sns.lineplot(data=mine, x="n_layers", y=metric, hue="arm", marker="o",
                         hue_order=list(RESIDUAL_COLORS), palette=RESIDUAL_COLORS,
                         errorbar=band(mine), seed=SEED, ax=ax, legend=row == col == 0)
            if row == 0:
                ax.set(yscale="log", title=ln)
            else:
                for bound in (-1, 1):
                    ax.axhline(bound, color="grey", ls=":", lw=1)
                ax.text(0.02, 0.9, "dotted: 10x either way", transform=ax.transAxes,
                        fontsize=7, color="0.3")
            ax.set(xscale="log", xlabel="layers (log scale)", ylabel=label if col == 0 else "")
            depths = sorted(int(d) for d in pts["n_layers"].unique())
            ax.set_xticks(depths, [str(d) for d in depths])
            ax.minorticks_off() if row else None
    axes[0][0].legend(title=None, fontsize=8)
    fig.tight_layout()
    return titled(fig, "Residual branches through depth, at initialisation", pts)


def grad_distance(out_dir: Path, suite: str) -> plt.Figure:
    """log10 ||dL_t/dx_{t-k}|| vs k per architecture, at init and after training (exponential
    decay is a straight line)."""
    pts = rows(out_dir, suite, "gradient-distance", "grad-distance")
    long = curves_of(out_dir, suite, pts, ["grad_norm_init", "grad_norm_trained"])
    long["when"] = long["metric"].map({"grad_norm_init": "at initialisation",
                                       "grad_norm_trained": "after training"})
    long = long[(long["step"] > 0) & (long["value"] > 0)]  # log axes: k = 0 is the token itself
    # seeds averaged in log space (as the ledger's log10 ratios are): an interval on the raw
    # norms would reach below zero where they spread over orders of magnitude
    long = long.assign(value=np.log10(long["value"]))
    g = sns.relplot(data=long, x="step", y="value", hue="architecture", col="when",
                    col_order=["at initialisation", "after training"], kind="line",
                    errorbar=band(pts), seed=SEED, palette=arch_colors(long["architecture"]),
                    height=3.2, aspect=1.2, hue_order=present(ARCH_ORDER, long["architecture"]))
    for when, column in (("at initialisation", "grad_decay_init"),
                         ("after training", "grad_decay_trained")):
        if column in pts and pts[column].notna().any():  # the ratio the ledger judges
            ratio = pts.groupby("architecture")[column].mean()
            g.axes_dict[when].text(
                0.03, 0.03, "log10 far / near: " + ", ".join(
                    f"{a} {v:.1f}" for a, v in ratio.items()) +
                f"\n(vanished <= {VANISHED:g}, kept >= {KEPT:g})",
                transform=g.axes_dict[when].transAxes, fontsize=7, color="0.2")
    g.set_titles("{col_name}")
    g.set_axis_labels("distance k back from the scored position", "log10 ||dL_t / dx_(t-k)||")
    return titled(g.figure, "Gradient reaching an input k steps back "
                  f"({pts['task_label'].iloc[0]}, parameter-matched)", pts)
