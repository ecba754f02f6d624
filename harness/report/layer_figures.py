"""The layer suites' figures (complexity sweep, crossover, Table 1's sequential operations,
path length and memory, fixed tokens per batch): one seaborn function per figure, each
reading stored rows and returning the figure; harness.report.figures names and draws them.
"""

from __future__ import annotations

import textwrap

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from harness.errors import BadInput  # noqa: E402
from harness.report.curves import relegend, resolved_line  # noqa: E402
from harness.report.labels import (  # noqa: E402
    BUSY_LABEL,
    busy,
    busy_note,
    declare_unit,
    title_above,
)
from harness.report.tables import crossover_table, sweep_frame  # noqa: E402
from models import catalog  # noqa: E402


def _palette(mixers: pd.Series) -> dict[str, str]:
    """The catalog's mixer colours plus one for each mixer declaring none (minGRU, a
    plugin's), so no hue is missing."""
    declared = catalog.mixer_colors()
    extra = [m for m in dict.fromkeys(mixers) if m not in declared]
    return declared | dict(zip(extra, sns.color_palette("Dark2", len(extra)).as_hex(),
                               strict=True))


def _in_crossover(mixers: pd.Series) -> pd.Series:
    """The layers the crossover sets against each other: the attention sides, the layers
    with a closed form (LSTM, GRU, minGRU, minLSTM) and any mixer not built in."""
    drawn = [name for name, m in catalog.mixers().items()
             if m.crossover or m.flop_coef is not None or m.provider != catalog.BUILTIN]
    return mixers.isin(drawn) | ~mixers.isin(list(catalog.mixers()))


N_LABEL = "sequence length n (log scale)"


def _n_axis(ax: plt.Axes) -> None:
    """Sequence lengths are powers of two: log2 axis labelled 32, 64, ... not 2^5 or 10^2."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


NOISY = 0.5  # a timing whose interquartile range over its runs exceeds this share of its median


def _noisy(df: pd.DataFrame, ms: str) -> pd.Series:
    """Rows whose timing `ms` ("fwd_ms", "fwdbwd_ms") spread over its repeated runs by more
    than NOISY of its median (the machine was busy): not a value to draw a line through."""
    iqr = ms.replace("_ms", "_iqr_ms")
    if iqr not in df:
        return pd.Series(False, index=df.index)
    return (df[iqr] / df[ms]).fillna(0) > NOISY


def _open_markers(ax: plt.Axes, rows: pd.DataFrame, y: str, colors: dict[str, str],
                  marker: str = "o") -> None:
    """Timings off the lines (noisy: circles; busy: squares) as open markers in their
    layer's colour, joined to nothing."""
    for mixer, g in rows.groupby("mixer"):
        ax.scatter(g["seq_len"], g[y], marker=marker, facecolors="none",
                   edgecolors=colors.get(mixer, "0.3"), s=30, zorder=3)


BUSY_HANDLE = Line2D([], [], marker="s", ls="", mfc="none", mec="0.3")


NOISY_LABEL = "noisy timing (open: not joined)"
NOISY_NOTE = (f"open circles: timings whose runs spread (interquartile range) by more than "
              f"{NOISY:.0%} of their median, a busy machine's; the lines join the others")


def crossover(df: pd.DataFrame) -> plt.Figure:
    """Cost per sequence vs n, one column per d: counted FLOPs (top) and measured forward time
    (bottom). Vertical lines: measured n* of the whole attention layer (dashed) and of the
    attention core (dash-dot) against the LSTM where the suite has them, and the paper's
    n = d (dotted); a time panel without a measured n* says why. Timings that spread over
    their runs by more than NOISY of their median are open circles off the lines."""
    ok = sweep_frame(df)
    ok = ok[_in_crossover(ok["mixer"])]
    hot = busy(ok)  # timed on a busy machine: open squares, never on a line
    noisy = _noisy(ok, "fwd_ms") & ~hot
    long = ok.assign(ms_per_seq=ok["ms_per_seq"].where(~noisy & ~hot)).melt(
        id_vars=["mixer", "seq_len", "d_model"], value_vars=["gflop_per_seq", "ms_per_seq"],
        var_name="cost")
    names = {"gflop_per_seq": "GFLOP / sequence\n(counted, log scale)",
             "ms_per_seq": "ms / sequence\n(forward, measured, log scale)"}
    long["cost"] = long["cost"].map(names)
    colors = _palette(long["mixer"])
    g = sns.relplot(data=long, x="seq_len", y="value", hue="mixer", col="d_model", row="cost",
                    kind="line", marker="o", palette=colors, height=2.8, aspect=1.1,
                    facet_kws={"sharey": False, "margin_titles": True})
    g.set(yscale="log")
    for ax in g.axes.flat:
        _n_axis(ax)
    g.set_axis_labels(N_LABEL, "")
    cross = crossover_table(df)
    cross = cross[cross["versus"] == "lstm"]
    drawn = set()
    for (cost, d), ax in g.axes_dict.items():
        if ax in g.axes[:, 0]:  # the cost on the left (rotated row titles on the right,
            ax.set_ylabel(cost)  # taller than a panel, pushed the rows apart)
        ax.axvline(d, color="grey", ls=":", lw=1)
        flops = cost.startswith("GFLOP")
        col = "n_star_flops" if flops else "n_star_time"
        why = []
        for variant, style in (("layer", "--"), ("core", "-.")):
            mine = cross[(cross["attention"] == variant) & (cross["d_model"] == d)]
            hit = mine[col].dropna()
            if len(hit):
                ax.axvline(hit.iloc[0], color="black", ls=style, lw=1)
                drawn.add(variant)
            elif len(mine):
                why.append(f"{variant}: {mine['flops_note' if flops else 'time_note'].iloc[0]}")
        if why:  # no n* line: the panel says why
            ax.text(0.03, 0.97, "no n* vs LSTM\n" + "\n".join(
                textwrap.fill(w, 38) for w in why), transform=ax.transAxes, va="top",
                fontsize=6, color="0.25")
        if not flops:
            _open_markers(ax, ok[noisy & (ok["d_model"] == d)], "ms_per_seq", colors)
            _open_markers(ax, ok[hot & (ok["d_model"] == d)], "ms_per_seq", colors, "s")
    if noisy.any() or hot.any():
        relegend(g, ({NOISY_LABEL: Line2D([], [], marker="o", ls="", mfc="none", mec="0.3")}
                     if noisy.any() else {}) | ({BUSY_LABEL: BUSY_HANDLE} if hot.any() else {}))
    g.set_titles(row_template="", col_template="d = {col_name}")
    lines = " and ".join(f"the {v} ({'--' if v == 'layer' else '-.'})"
                         for v in ("layer", "core") if v in drawn)
    return title_above(g.figure, "Where self-attention stops being cheaper than recurrence: "
                       + (f"measured n* vs LSTM for {lines}; " if lines else "")
                       + "the paper's n = d (:)\n" + _scale(ok)
                       + (f"\n{NOISY_NOTE}" if noisy.any() else "")
                       + (f"\n{busy_note(ok)}" if hot.any() else ""))


def _tokens_spread(ok: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(low, high) tokens/s of each row from the interquartile range of its repeated
    forward+backward timings, centred on their median (the rows store the range's width,
    not its quartiles); NaN where a row stores none. A range wider than twice the median
    would reach zero time: its fast end is cut at a hundredth of the median."""
    iqr = ok["fwdbwd_iqr_ms"] if "fwdbwd_iqr_ms" in ok else pd.Series(float("nan"), ok.index)
    tokens_ms = ok["fwdbwd_tokens_per_s"] * ok["fwdbwd_ms"]  # tokens per step x 1000
    slow = ok["fwdbwd_ms"] + iqr / 2
    fast = (ok["fwdbwd_ms"] - iqr / 2).clip(lower=ok["fwdbwd_ms"] / 100)
    return tokens_ms / slow, tokens_ms / fast


def throughput(df: pd.DataFrame) -> plt.Figure:
    """Training throughput (tokens/s, forward+backward) vs n, one panel per d: each point
    with the spread of its repeated timings as a bar (a busy machine's show), a line only
    between neighbouring n whose step exceeds both points' spread."""
    ok = sweep_frame(df).sort_values("seq_len")
    ok["lo"], ok["hi"] = _tokens_spread(ok)
    colors = _palette(ok["mixer"])
    ds = sorted(ok["d_model"].astype(int).unique())
    mixers = list(dict.fromkeys(ok["mixer"]))
    fig, axes = plt.subplots(1, len(ds), figsize=(3.6 * len(ds) + 2, 3.4), sharey=True,
                             squeeze=False, layout="constrained")
    hot = busy(ok)
    for ax, d in zip(axes[0], ds, strict=True):
        for i, mixer in enumerate(mixers):
            mine = (ok["d_model"] == d) & (ok["mixer"] == mixer)
            g, b = ok[mine & ~hot], ok[mine & hot]
            dx = 3.0 * (i - (len(mixers) - 1) / 2)
            if len(g):
                resolved_line(ax, g["seq_len"], g["fwdbwd_tokens_per_s"], g["lo"], g["hi"],
                              color=colors[mixer], marker="o", label=mixer, dx=dx)
            if len(b):  # timed on a busy machine: open squares with their bars, unjoined
                _busy_points(ax, b, colors[mixer], dx, "_" if len(g) else mixer)
        ax.set_yscale("log")
        _n_axis(ax)
        _log_labels(ax)
        ax.set(title=f"d = {d}", xlabel=N_LABEL)
    axes[0, 0].set_ylabel("tokens / s, fwd+bwd (log scale)")
    drawn = {label: handle for ax in axes[0]
             for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    if hot.any():
        drawn[BUSY_LABEL] = BUSY_HANDLE
    fig.legend(list(drawn.values()), list(drawn), loc="outside right center", title="mixer",
               fontsize=8)
    spread = ("bars: the interquartile range of each point's repeated timings (centred on "
              "the median), a busy machine's wide; a line joins two points only where their "
              "step exceeds both bars; points 3 pt apart horizontally"
              if ok["lo"].notna().any() else "the rows store no spread of their timings")
    note = f"\n{busy_note(ok)}" if hot.any() else ""
    return title_above(fig, f"Training throughput per layer\n"
                       f"{_scale(ok, 'one row per point, its timing repeated')}\n{spread}{note}")


def _busy_points(ax: plt.Axes, rows: pd.DataFrame, color: str, dx: float, label: str) -> None:
    """Throughput timed on a busy machine: open squares with their spread as bars, `dx`
    points apart on the page as their series' filled points, joined to nothing."""
    from matplotlib.transforms import offset_copy

    y = rows["fwdbwd_tokens_per_s"]
    bars = ax.errorbar(rows["seq_len"], y, yerr=[(y - rows["lo"]).clip(lower=0).fillna(0),
                                                  (rows["hi"] - y).clip(lower=0).fillna(0)],
                       fmt="s", ls="none", color=color, mfc="none", ms=5, capsize=0,
                       elinewidth=1.2, label=label, zorder=3)
    shifted = offset_copy(ax.transData, ax.figure, x=dx, units="points")
    for artist in [bars[0], *bars[1], *bars[2]]:
        artist.set_transform(shifted)


def _log_labels(ax: plt.Axes) -> None:
    """A log y axis labelled at 1, 2 and 5 times each power of ten in plain numbers (20k,
    500k): matplotlib's own labels of a narrow range (3x10^4 beside 4x10^4) run together."""
    def plain(v: float, _pos: int) -> str:
        mantissa = f"{v:.0e}"[0]
        if mantissa not in "125":
            return ""
        for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if v >= size:
                return f"{v / size:g}{suffix}"
        return f"{v:g}"

    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(plain))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(plain))


def _by_fit(df: pd.DataFrame, fit: str) -> pd.DataFrame:
    """The ok rows of one fit of the Table 1 grid ("seq-ops", "path", "memory", ...)."""
    ok = df[(df["status"] == "ok") & (df["fit"] == fit)].copy()
    if ok.empty:
        raise BadInput(f"no ok points of Table 1 fit {fit!r}; run `tvr run table1`")
    return ok


def _label(df: pd.DataFrame) -> pd.Series:
    """Layer names for the legend: a convolution stack whose dilation grows by k per layer
    is its own line; restricted attention names its window r, attention its kernel kind."""
    growth = df.get("dilation_growth", pd.Series(False, index=df.index)).astype(str) == "True"
    label = df["mixer"].where(~growth, "convolutional (dilated)")
    if "window" in df:
        r = df["window"].map(lambda v: "" if pd.isna(v) else f" (r={int(v)})")
        label = label.where(df["mixer"] != "restricted-attention", label + r)
    return label


def _scale(df: pd.DataFrame, points: str = "one measurement per point") -> str:
    """"d = 32, batch 2, cpu (AMD EPYC), 1 thread; one timing per point": what a layer
    figure's points are."""
    first = df.iloc[0]
    d = sorted(df["d_model"].astype(int).unique())
    batch = sorted(df["batch_size"].astype(int).unique())
    parts = [f"d = {', '.join(map(str, d))}",
             f"batch {batch[0]}" if len(batch) == 1 else f"batch {batch[0]}..{batch[-1]}",
             f"{first.get('device', '?')} ({first.get('device_name', '?')})"]
    if "threads" in df and pd.notna(first.get("threads")):
        parts.append(f"{int(first['threads'])} thread(s)")
    return ", ".join(parts) + f"; {points}"


def _coinciding(df: pd.DataFrame, y: str) -> pd.Series:
    """Legend labels that say when a line lies exactly on an earlier one (it is hidden)."""
    label, seen = df["layer"].copy(), {}
    for name, g in df.groupby("layer", sort=False):
        key = tuple(g.sort_values("seq_len")[["seq_len", y]].itertuples(index=False))
        if key in seen:
            label[df["layer"] == name] = f"{name} (= {seen[key]})"
        else:
            seen[key] = name
    return label


MARKERS = ("o", "X", "s", "P", "D", "^", "v", "*", "h", "<")
DASHES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 1)), (0, (4, 2, 1, 2, 1, 2)),
          (0, (8, 2)), (0, (2, 3)), (0, (6, 1, 2, 1)))


def _layer_styles(df: pd.DataFrame) -> dict[str, tuple[str, str, object]]:
    """(colour, marker, dashes) per legend label of a layer figure, fixed over its panels:
    the layer's colour (pink for a dilated convolution), a marker and dashes of its own."""
    colors = _palette(df["mixer"])
    out = {}
    for i, name in enumerate(dict.fromkeys(df["layer"])):
        color = "#e377c2" if "dilated" in name else colors.get(name.split(" (")[0], "#7f7f7f")
        out[name] = (color, MARKERS[i % len(MARKERS)], DASHES[i % len(DASHES)])
    return out


def _lines_on(ax: plt.Axes, data: pd.DataFrame, y: str, styles: dict, unit: str) -> None:
    """One line per layer (`layer` column) of y against n, in its style; a line another
    lies on exactly is drawn wide, faint and with large open markers under it, so both show;
    every line declares its y values' `unit`."""
    groups = [(name, g.sort_values("seq_len")) for name, g in data.groupby("layer",
                                                                           sort=False)]
    keys = [tuple(zip(g["seq_len"], g[y], strict=True)) for _, g in groups]
    for i, (name, g) in enumerate(groups):
        color, marker, dashes = styles[name]
        under = keys[i] in keys[i + 1:]  # a later line lies on this one
        look = dict(lw=5, alpha=0.4, ms=12, mfc="none", mew=1.5, zorder=2) if under else \
            dict(lw=1.5, alpha=0.9, ms=6, zorder=3)
        ax.plot(g["seq_len"], g[y], marker=marker, ls=dashes, color=color,
                label=f"{name} (wide, under its equal)" if under else name, **look)
    declare_unit(ax.lines, unit)
    _n_axis(ax)
    ax.set(yscale="log", xlabel=N_LABEL)


def _lines(df: pd.DataFrame, y: str, ylabel: str, title: str, unit: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    data = df.assign(layer=_coinciding(df.assign(layer=_label(df)), y))
    _lines_on(ax, data, y, _layer_styles(data), unit)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}\n{_scale(df)}", fontsize=9)
    ax.legend(title=None, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # off data
    return fig


def sequential_ops(df: pd.DataFrame) -> plt.Figure:
    """Longest chain of dependent ops in one layer's forward vs n (recurrence: cell loop)."""
    return _lines(_by_fit(df, "seq-ops"), "seq_ops",
                  "sequential ops (autograd depth, log scale)",
                  "Sequential operations per layer", unit="ops")


# what path_length counts in, by the rows' path_unit: its words in the axis label
PATH_UNITS = {"layers": ("layers", "counted in layers stacked"),
              "steps": ("time steps", "counted in a recurrence's time steps"),
              "ops": ("ops", "counted in ops inside one layer")}


def path_length(df: pd.DataFrame) -> plt.Figure:
    """Fewest sequential applications linking x[0] to y[n-1], one panel per unit the rows
    count it in (`path_unit`: stacked layers, a recurrence's time steps, a scan's chain of
    ops inside one layer), on one shared log scale."""
    ok = _by_fit(df, "path")
    # rows from before the column counted a recurrence in steps, any other layer in layers
    unit = ok.get("path_unit", pd.Series(index=ok.index, dtype=object)).fillna(
        "layers or time steps")
    data = ok.assign(layer=_coinciding(ok.assign(layer=_label(ok)), "path_length"), unit=unit)
    units = [u for u in PATH_UNITS if u in set(unit)] + sorted(set(unit) - set(PATH_UNITS))
    styles = _layer_styles(data)
    fig, axes = plt.subplots(1, len(units), figsize=(3.3 * len(units) + 2.6, 3.8),
                             sharey=True, squeeze=False, layout="constrained")
    for ax, u in zip(axes[0], units, strict=True):
        word, title = PATH_UNITS.get(u, (u, f"counted in {u}"))
        _lines_on(ax, data[data["unit"] == u], "path_length", styles, word)
        ax.set_ylabel(f"path length, {word} (log scale)")
        ax.set_title(title, fontsize=9)
        ax.yaxis.set_tick_params(labelleft=True)
    handles = {h.get_label(): h for ax in axes[0] for h in ax.lines}
    fig.legend(list(handles.values()), list(handles), loc="outside right center",
               fontsize=8)
    return title_above(fig, "Maximum path length, measured from gradients; one panel per "
                       f"unit it is counted in\n{_scale(ok)}", fontsize=9)


def memory(df: pd.DataFrame) -> plt.Figure:
    """Bytes saved for backward per sequence vs n: attention with explicit scores (math)
    and with the fused kernel, beside the other layers."""
    explicit = _by_fit(df, "memory").assign(mixer="self-attention (explicit scores)")
    by_n = _by_fit(df, "n")
    fused = by_n[by_n["mixer"] == "self-attention"]
    fused = fused.assign(mixer=f"self-attention (fused: {fused['kernel'].iloc[0]})") \
        if len(fused) else fused
    ok = pd.concat([explicit, fused, by_n[by_n["mixer"] != "self-attention"]])
    ok["MiB_per_seq"] = ok["saved_bytes"] / ok["batch_size"] / 2**20
    return _lines(ok, "MiB_per_seq", "MiB saved for backward\nper sequence (log scale)",
                  "Activation memory vs n", unit="MiB")


def fixed_tokens(df: pd.DataFrame) -> plt.Figure:
    """Forward+backward time per token at a fixed B*n as n grows (the quantity the
    parallel-hardware claim is judged on), one panel per dtype."""
    ok = _by_fit(df, "fixed-tokens")
    ok["us_per_token"] = ok["fwdbwd_ms"] * 1e3 / (ok["batch_size"] * ok["seq_len"])
    tokens = int((ok["batch_size"] * ok["seq_len"]).iloc[0])
    dtypes = sorted(ok["dtype"].astype(str).unique())
    hot = busy(ok)  # timed on a busy machine: open squares, off the lines
    colors = _palette(ok["mixer"])
    # every point busy: seaborn draws no line of all-missing values (it raises), so the
    # panels are laid out by invisible points and the busy ones drawn open below
    calm = bool((~hot).any())
    g = sns.relplot(data=ok.assign(us_per_token=ok["us_per_token"].where(~hot)) if calm
                    else ok, x="seq_len", y="us_per_token", hue="mixer", style="mixer",
                    col="dtype" if len(dtypes) > 1 else None,
                    **({"kind": "line", "markers": True} if calm else
                       {"kind": "scatter", "alpha": 0}),
                    palette=colors, height=3.4, aspect=1.2)
    g.set(yscale="log")
    for ax in g.axes.flat:
        _n_axis(ax)
    panels = g.axes_dict.items() if len(dtypes) > 1 else [(dtypes[0], g.ax)]
    for dtype, ax in panels:
        _open_markers(ax, ok[hot & (ok["dtype"].astype(str) == str(dtype))], "us_per_token",
                      colors, "s")
    if hot.any():
        relegend(g, {BUSY_LABEL: BUSY_HANDLE})
    g.set_axis_labels("sequence length n (batch B = tokens / n; log scale)",
                      "µs per token, fwd+bwd (log scale)")
    g.set_titles(col_template="{col_name}")
    note = f"\n{busy_note(ok)}" if hot.any() else ""
    g.figure.suptitle(f"Time per token at {tokens} tokens per batch: as n grows, only "
                      f"parallelism within each sequence remains\n{_scale(ok)}{note}", y=1.08,
                      fontsize=9)
    return g.figure
