"""The rematch's tables and figures (experiments/rematch.py's suites): training throughput of
sequential and scanned recurrences beside LSTM, GRU and attention, and MQAR recall against
the size of a model's state. Read from stored rows only."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import NullFormatter, ScalarFormatter

from harness.errors import BadInput
from harness.report.curves import FRACTION, SEED, band, clip_text, rows, titled
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
    for name, g in ok.groupby("variant", sort=False):
        g = g.groupby("seq_len", as_index=False).agg(
            fwdbwd_ms=("fwdbwd_ms", "median"), mixer=("mixer", "first"),
            form=("form", "first"), stale=("stale", "any"))
        marker, dashes = styles.get(g["form"].iloc[0], ("o", "-"))
        stale = bool(g["stale"].any())
        ax.plot(g["seq_len"], g["fwdbwd_ms"], marker=marker, ls=dashes,
                color=colors[g["mixer"].iloc[0]], alpha=0.45 if stale else 1, ms=5,
                mfc="none" if stale else colors[g["mixer"].iloc[0]],
                label=f"{name}, before the loop fix" if stale else name)
    ax.set(xscale="log", yscale="log", xlabel="sequence length n",
           ylabel="forward+backward ms (median)")
    first = ok.iloc[0]
    note = ""
    if ok["stale"].any():
        note = (f"\nfaint, open markers: loops timed before their O(n²) backward was fixed "
                f"({LOOP_FIX[:10]}): too slow, and every speed-up over them too large")
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


def sweeps(pts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pairs swept at the most common width, widths swept at the most common pairs)."""
    d = int(pts["d_model"].mode().iloc[0])
    p = int(pts.loc[pts["d_model"] != d, "pairs"].mode().iloc[0]) \
        if (pts["d_model"] != d).any() else int(pts["pairs"].max())
    return pts[pts["d_model"] == d], pts[pts["pairs"] == p]


def mqar_state(out_dir: Path, suite: str) -> plt.Figure:
    """Final held-out accuracy against pairs (fixed width), width (fixed pairs) and pairs
    per number of state, one line per mixer; chance as a dotted line."""
    pts = best_lr(mqar_frame(out_dir, suite))
    by_pairs, by_width = sweeps(pts)
    order = [m for m in MIXER_ORDER if m in set(pts["mixer_kind"])]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
    panels = [(by_pairs, "pairs", f"key-value pairs (d={int(by_pairs['d_model'].iloc[0])})"),
              (by_width, "d_model", f"width d ({int(by_width['pairs'].iloc[0])} pairs)"),
              (pts, "state_floats", "numbers of state per layer (log)")]
    for ax, (data, x, label) in zip(axes, panels, strict=True):
        # a marker and dashes per mixer too: equal accuracies at equal state (GRU, minGRU
        # and minLSTM all carry d numbers) would hide one line under another
        sns.lineplot(data=data, x=x, y="final_accuracy", hue="mixer_kind", hue_order=order,
                     style="mixer_kind", style_order=order, markers=True,
                     errorbar=band(data, FRACTION), seed=SEED, ax=ax, legend=ax is axes[0])
        ax.set(xlabel=label, ylabel="final held-out accuracy", ylim=(0, 1.02))
        if x == "state_floats":
            ax.set_xscale("log")
        else:  # powers of two, labelled as numbers
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
        if x == "pairs":  # no recall: guessing among the in-context values
            ps = sorted(data["pairs"].unique())
            ax.plot(ps, [floor(int(p)) for p in ps], ls=":", color="0.3", marker="_",
                    label="no recall (in-context guess)")
        elif x == "d_model":
            ax.axhline(floor(int(data["pairs"].iloc[0])), ls=":", color="0.3",
                       label="no recall (in-context guess)")
    axes[0].legend(title="mixer", fontsize=8)
    return titled(fig, "MQAR against state size: mixer-lm, only the mixer changed", pts,
                  clip_text(FRACTION))


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
    """Mean and range of final accuracy over seeds per mixer and (pairs, width)."""
    g = pts.groupby(["mixer_kind", "pairs", "d_model"])["final_accuracy"]
    out = g.agg(["mean", "min", "max", "count"]).reset_index()
    out["mixer_kind"] = pd.Categorical(out["mixer_kind"], [*MIXER_ORDER, *sorted(
        set(out["mixer_kind"]) - set(MIXER_ORDER))])
    return out.sort_values(["pairs", "d_model", "mixer_kind"]).rename(
        columns={"count": "seeds"}).reset_index(drop=True)


LAYER_FIGURES = {"scan-throughput": (throughput, "fwdbwd")}
