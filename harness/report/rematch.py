"""The rematch's tables and figures (experiments/rematch.py's suites): training throughput of
sequential and scanned recurrences beside LSTM, GRU and attention, and MQAR recall against
the size of a model's state. Read from stored rows only."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter, ScalarFormatter

from harness.errors import BadInput
from harness.report.curves import (
    FRACTION,
    clip_text,
    interval_of,
    resolved_line,
    rows,
    titled,
)
from harness.report.labels import BUSY_LABEL, busy, busy_note
from harness.results import load_results

# Feng et al. 2024: training speed-up of the parallel scan over the sequential form at
# n = 512, measured on their GPU (not this harness's hardware)
PAPER_SPEEDUP = {"min-gru": 175.0, "min-lstm": 235.0}
PAPER_N = 512
SCANS = ("levels", "log")
# the step-by-step loops (the explicit LSTM/GRU cell and minGRU/minLSTM's sequential scan)
# had an O(n^2) backward before this (commits 04cd2c1 and 6ac373e): rows measured earlier
# time those loops too slow, and every speed-up over them too large
LOOP_FIX = "2026-12-01T20:19:29+00:00"
LOOPS = {("lstm", "cell"), ("gru", "cell"), ("min-gru", "sequential"),
         ("min-lstm", "sequential")}
STUDY = "mqar-state"
MIXER_ORDER = ["self-attention", "lstm", "gru", "min-gru", "min-lstm"]


def variant(row: pd.Series) -> str:
    """"lstm (cell)", "min-gru (log)", "self-attention": a throughput point's layer and form."""
    form = _form(row)
    return f"{row['mixer']} ({form})" if form else str(row["mixer"])


def before_loop_fix(df: pd.DataFrame) -> pd.Series:
    """Rows measured before the loop's O(n^2) backward was fixed (their loop time, and so
    every speed-up over it, is too large)."""
    if "measured_at" not in df:
        return pd.Series(False, index=df.index)
    return df["measured_at"].astype(str) < LOOP_FIX


def _form(row: pd.Series) -> str | None:
    return next((row[k] for k in ("rnn_impl", "scan") if k in row and pd.notna(row[k])), None)


def throughput_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The ok fwdbwd rows with a `variant` column."""
    ok = df[(df["runner"] == "fwdbwd") & (df["status"] == "ok")].copy()
    if ok.empty:
        raise BadInput("no forward+backward timings here; run `tvr run rematch-quick`")
    ok["seq_len"] = ok["seq_len"].astype(int)
    ok["variant"] = ok.apply(variant, axis=1)
    return ok


def throughput_table(df: pd.DataFrame) -> pd.DataFrame:
    """Forward+backward ms per n (rows) and variant (columns), in the order they ran."""
    ok = throughput_frame(df)
    table = ok.pivot_table(index="seq_len", columns="variant", values="fwdbwd_ms",
                           aggfunc="median", sort=False)
    return table[list(dict.fromkeys(ok["variant"]))].reset_index()


def speedup_table(df: pd.DataFrame) -> pd.DataFrame:
    """Sequential time / scan time per (layer, scan form) and n, with the paper's figure."""
    ms = throughput_frame(df).set_index(["variant", "seq_len"])["fwdbwd_ms"]
    ms = ms.groupby(level=[0, 1]).median()
    out = []
    for kind, paper in PAPER_SPEEDUP.items():
        if f"{kind} (sequential)" not in ms.index.get_level_values(0):
            continue
        seq = ms[f"{kind} (sequential)"]
        for scan in SCANS:
            if f"{kind} ({scan})" not in ms.index.get_level_values(0):
                continue
            ratio = (seq / ms[f"{kind} ({scan})"]).dropna()
            out.append({"layer": kind, "scan": scan}
                       | {f"n={n}": r for n, r in ratio.items()}
                       | {f"paper, n={PAPER_N} (GPU)": paper})
    if not out:
        raise BadInput("no sequential and scanned timings of one layer to compare")
    return pd.DataFrame(out)


def throughput(out_dir: Path, suite: str) -> plt.Figure:
    """Forward+backward time against n, one line per layer and form (log-log): colour by
    layer, marker and dashes by form; a loop timed before its O(n^2) backward was fixed is
    drawn faint with open markers and named so in the legend."""
    ok = throughput_frame(load_results(out_dir, [suite]))
    ok["form"] = ok.apply(lambda r: _form(r) or "", axis=1)
    ok["stale"] = before_loop_fix(ok) & ok.apply(lambda r: (r["mixer"], r["form"]) in LOOPS,
                                                 axis=1)
    layers = [m for m in MIXER_ORDER if m in set(ok["mixer"])] + sorted(
        set(ok["mixer"]) - set(MIXER_ORDER))
    colors = dict(zip(layers, sns.color_palette("tab10", len(layers)).as_hex(), strict=True))
    forms = list(dict.fromkeys(ok["form"]))
    styles = dict(zip(forms, [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."),
                              ("v", (0, (5, 1, 1, 1))), ("P", (0, (1, 2)))], strict=False))
    fig, ax = plt.subplots(figsize=(7.5, 4.6), layout="constrained")
    ok["busy"] = busy(ok)
    for name, mine in ok.groupby("variant", sort=False):
        # an n timed on an idle machine is the median of its idle timings; one timed only
        # on a busy machine is an open square off the line
        idle = mine[~mine["busy"]]
        hot = mine[mine["busy"] & ~mine["seq_len"].isin(idle["seq_len"])]
        g, b = (part.groupby("seq_len", as_index=False).agg(
            fwdbwd_ms=("fwdbwd_ms", "median"), mixer=("mixer", "first"),
            form=("form", "first"), stale=("stale", "any")) for part in (idle, hot))
        first = mine.iloc[0]
        marker, dashes = styles.get(first["form"], ("o", "-"))
        stale = bool(mine["stale"].any())
        color = colors[first["mixer"]]
        label = f"{name}, before the loop fix" if stale else name
        if len(g):
            ax.plot(g["seq_len"], g["fwdbwd_ms"], marker=marker, ls=dashes, color=color,
                    alpha=0.45 if stale else 1, ms=5, mfc="none" if stale else color,
                    label=label)
        if len(b):
            ax.plot(b["seq_len"], b["fwdbwd_ms"], marker="s", ls="none", color=color, ms=6,
                    mfc="none", label="_" if len(g) else label)
    if ok["busy"].any():
        ax.plot([], [], marker="s", ls="", mfc="none", mec="0.3", label=BUSY_LABEL)
    ax.set(xscale="log", yscale="log", xlabel="sequence length n (log scale)",
           ylabel="forward+backward ms (median, log scale)")
    first = ok.iloc[0]
    note = ""
    if ok["stale"].any():
        note = (f"\nfaint, open markers: loops timed before their O(n²) backward was fixed "
                f"({LOOP_FIX[:10]}): too slow, and every speed-up over them too large")
    if ok["busy"].any():
        note += f"\n{busy_note(ok)}"
    ax.set_title(f"One layer's training step, d={int(first['d_model'])}, batch "
                 f"{int(first['batch_size'])}, {first.get('device', '?')}{note}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def scan_error_table(df: pd.DataFrame) -> pd.DataFrame:
    """Largest relative float32 error per (layer, form) (rows) and n (columns)."""
    ok = df[(df["runner"] == "scan-error") & (df["status"] == "ok")]
    if ok.empty:
        raise BadInput("no scan-error rows here; run `tvr run scan-error`")
    table = ok.pivot_table(index=["mixer", "scan"], columns="seq_len",
                           values="scan_rel_error", aggfunc="max")
    table.columns = [f"n={int(n)}" for n in table.columns]
    return table.reset_index()


# ---------------------------------------------------------------- recall and state size


def state_floats(row: pd.Series) -> float:
    """Numbers a layer carries from one position to the next at the end of the sequence:
    LSTM h and c (2d), GRU/minGRU/minLSTM h (d), attention every key and value so far
    (2 d per token; MQAR's LM stream has 4 tokens per pair)."""
    d, kind = float(row["d_model"]), row["mixer_kind"]
    if kind == "lstm":
        return 2 * d
    if "attention" in str(kind):
        return 2 * d * 4 * float(row["seq_len"])
    return d


def mqar_frame(out_dir: Path, suite: str) -> pd.DataFrame:
    """The MQAR study's finished rows with pairs, width, state size and pairs per state."""
    pts = rows(out_dir, suite, STUDY)
    pts = pts.assign(pairs=pts["seq_len"].astype(int), d_model=pts["d_model"].astype(int))
    pts["state_floats"] = pts.apply(state_floats, axis=1)
    pts["pairs_per_state"] = pts["pairs"] / pts["state_floats"]
    return pts


MIXER_STYLE = {"self-attention": ("#1f77b4", "o", "-"), "lstm": ("#ff7f0e", "X", "--"),
               "gru": ("#2ca02c", "s", ":"), "min-gru": ("#d62728", "P", "-."),
               "min-lstm": ("#9467bd", "D", (0, (5, 1, 1, 1)))}
APART = 4.0  # points between the mixers' markers along x, on the page (data unmoved)


def _mixer_styles(mixers: list[str]) -> dict[str, tuple]:
    """(colour, marker, dashes) per mixer: MIXER_STYLE's, a plugin's from Dark2."""
    extra = [m for m in mixers if m not in MIXER_STYLE]
    more = zip(sns.color_palette("Dark2", len(extra)).as_hex(), "v^<>*h", strict=False)
    return MIXER_STYLE | {m: (c, mk, (0, (1, 1))) for m, (c, mk) in zip(extra, more,
                                                                       strict=False)}


def mqar_state(out_dir: Path, suite: str) -> plt.Figure:
    """Final held-out accuracy against the numbers of state a layer carries, one panel per
    number of key-value pairs (a mean never mixes two task settings): one series per mixer
    (colour, marker and dashes its own), its widths along x, the seeds' interval as bars, a
    line only between widths whose step exceeds that spread; the no-recall floor of the
    panel's pairs as a dotted line; each mixer at its best learning rate per setting where
    the rows sweep it (best_lr), the title naming those swept."""
    frame = mqar_frame(out_dir, suite)
    pts = best_lr(frame)
    lrs = sorted(pd.to_numeric(frame["lr"], errors="coerce").dropna().unique()) \
        if "lr" in frame else []
    swept = (f"; each mixer at its best learning rate per setting (of "
             f"{', '.join(f'{v:g}' for v in lrs)})" if len(lrs) > 1 else "")
    order = [m for m in MIXER_ORDER if m in set(pts["mixer_kind"])] + sorted(
        set(pts["mixer_kind"]) - set(MIXER_ORDER))
    styles = _mixer_styles(order)
    interval = interval_of(pts, FRACTION)
    pairs = sorted(int(p) for p in pts["pairs"].unique())
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.6 * len(pairs) + 1.8, 4), sharey=True,
                             squeeze=False, layout="constrained")
    for ax, p in zip(axes[0], pairs, strict=True):
        mine = pts[pts["pairs"] == p]
        for i, mixer in enumerate(order):
            g = mine[mine["mixer_kind"] == mixer]
            if g.empty:
                continue
            at = g.groupby("state_floats")["final_accuracy"]
            lo, hi = zip(*(interval(v) for _, v in at), strict=True)
            color, marker, dashes = styles[mixer]
            resolved_line(ax, at.mean().index, at.mean(), lo, hi, color=color, marker=marker,
                          ls=dashes, label=mixer, dx=APART * (i - (len(order) - 1) / 2))
        ax.axhline(floor(p), ls=":", color="0.3", lw=1.2)  # its value in the panel's title
        widths = ", ".join(str(d) for d in sorted(mine["d_model"].unique()))
        ax.set(xscale="log", ylim=(0, 1.02), xlabel="numbers of state per layer (log scale)")
        ax.set_title(f"{p} key-value pairs (d = {widths})\nno recall (dotted): {floor(p):.2f}",
                     fontsize=10)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(sorted(mine["state_floats"].unique()))
        ax.tick_params(axis="x", labelrotation=45)
    axes[0, 0].set_ylabel("final held-out accuracy")
    drawn = {label: handle for ax in axes[0]  # a mixer drawn in any panel
             for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    entries = {m: drawn[m] for m in order if m in drawn}
    entries["no recall (dotted: guessing among the values in context)"] = \
        Line2D([], [], ls=":", color="0.3", lw=1.2)
    fig.legend(list(entries.values()), list(entries), loc="outside right center", fontsize=8,
               title="mixer")
    return titled(fig, "MQAR against state size: mixer-lm, only the mixer changed; one panel "
                  f"per number of pairs; markers {APART:g} pt apart horizontally; a line joins "
                  f"two widths only where their step exceeds the seeds' spread{swept}", pts,
                  clip_text(FRACTION), drawn="bars")


def chance(pts: pd.DataFrame) -> float:
    """Guessing among every value symbol (half the alphabet): below what a model reaches
    without recall, see `floor`."""
    return float(2 / pts["alphabet_size"].astype(float).max())


def floor(pairs: int) -> float:
    """Accuracy without recall: guessing among the values given in context, each query's
    answer among the values not yet asked (queries are distinct keys): the mean of 1/P,
    1/(P-1), ..., 1 over the P queries (0.75 at 2 pairs, 0.52 at 4)."""
    return sum(1 / k for k in range(1, pairs + 1)) / pairs


def best_lr(pts: pd.DataFrame) -> pd.DataFrame:
    """Per mixer, pairs and width, the rows of the learning rate with the best mean final
    accuracy (an lr sweep per model, as Zoology reports it); all rows without an lr sweep."""
    if "lr" not in pts or pts["lr"].nunique() < 2:
        return pts
    keys = ["mixer_kind", "pairs", "d_model"]
    mean = pts.groupby([*keys, "lr"])["final_accuracy"].mean().reset_index()
    best = mean.loc[mean.groupby(keys)["final_accuracy"].idxmax(), [*keys, "lr"]]
    return pts.merge(best, on=[*keys, "lr"])


def mqar_table(pts: pd.DataFrame) -> pd.DataFrame:
    """Per mixer and (pairs, width), at the mixer's best learning rate for the setting
    (best_lr; `lr` names it where the rows sweep it): final held-out accuracy over seeds,
    mean and range, and the seeds that reached 99% (the early stop) with the median updates
    they took."""
    pts = best_lr(pts)
    keys = ["mixer_kind", "pairs", "d_model", *(["lr"] if "lr" in pts else [])]
    g = pts.groupby(keys)
    out = g["final_accuracy"].agg(["mean", "min", "max", "count"])
    if "steps_to_target" in pts:
        steps = pd.to_numeric(pts["steps_to_target"], errors="coerce")
        out["reached_99"] = steps.notna().groupby([pts[k] for k in keys]).sum()
        out["median_steps_to_99"] = steps.groupby([pts[k] for k in keys]).median()
    out = out.reset_index()
    out["mixer_kind"] = pd.Categorical(out["mixer_kind"], [*MIXER_ORDER, *sorted(
        set(out["mixer_kind"]) - set(MIXER_ORDER))])
    return out.sort_values(["pairs", "d_model", "mixer_kind"]).rename(
        columns={"count": "seeds"}).reset_index(drop=True)


def mqar_caption(pts: pd.DataFrame) -> str:
    """What the MQAR table shows: seeds, learning rates swept, and each setting's
    no-recall floor."""
    lrs = sorted(pd.to_numeric(pts["lr"], errors="coerce").dropna().unique()) \
        if "lr" in pts else []
    swept = (f"; each mixer at its best learning rate per setting, of "
             f"{', '.join(f'{v:g}' for v in lrs)} (`lr`)" if len(lrs) > 1 else "")
    return ("Final held-out accuracy over seeds (mean, min, max)" + swept + "; without "
            "recall (guessing among the values in context): " + ", ".join(
                f"{p} pairs {floor(p):.3f}" for p in sorted(set(pts["pairs"]))) + ".")


LAYER_FIGURES = {"scan-throughput": (throughput, "fwdbwd")}
