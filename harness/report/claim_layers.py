"""Claims about single layers (cost, sequential operations, path length, memory, parallel
hardware), judged from the `table1` and `quick` suites and, for a GPU, from <out>/gpu.

Every rule states its thresholds in the row it writes; the constants below are those
thresholds. The timing claims read forward + backward timings (a training step's cost) and
pass the timing gates (harness.report.claim_power.timing): the column read, each timed row's
spread against the difference the claim reads, and the machine's busy flag.
"""

from __future__ import annotations

import pandas as pd

from harness.errors import BadInput
from harness.report import claim_power as power
from harness.report.evidence import (
    GPU_DIR,
    Claim,
    Evidence,
    Missing,
    Stored,
    device_word,
    scale_facts,
)
from harness.report.gates import SPREAD_SHARE, Gate
from harness.report.rulebook import COUNT, TIMING
from harness.report.stats import Fit, fmt, loglog_fit
from harness.report.tables import crossover_table
from harness.report.threads import projection_table
from harness.report.verdicts import CONTRADICTS, NOT_HERE, QUALIFIED, SUPPORTS
from models import catalog

EXP_TOL = 0.1  # a fitted exponent within this of the paper's integer matches it
TIME_TOL = 0.3  # measured-time exponents: looser (a whole layer has lower-order terms)
UTILISATION_GAP = 2.0  # attention's achieved FLOP/s over the LSTM's that counts as "idle"
SEQUENTIAL_SLOPE = 0.5  # recurrence time per token ~ n^k at fixed tokens: k above this is
# time set by its n sequential steps (k = 1: fully sequential; k = 0: n costs nothing)
FLAT_SLOPE = 0.2  # k below this: the recurrence parallelises within a sequence after all
MIN_SPEEDUP = 1.1  # below this no layer gains from more threads: no idle core to use
EFFICIENCY_GAP = 0.1  # attention's parallel efficiency over a recurrent layer's that counts
SPREAD_RULE = (f"spread: every timed row's IQR/median at most {SPREAD_SHARE:g} of the relative "
               "difference the claim reads from it (a median read at either quartile moves by "
               "half its IQR; a difference twice the widest spread keeps half of itself)")
IDLE_RULE = "idle machine: no timed row flagged busy"


def _fit_difference(rows: pd.DataFrame, x: str, tol: float) -> float:
    """The relative change of end-to-end time an exponent tolerance `tol` resolves over the
    rows' range of `x`: (max x / min x)^tol - 1 (the spread gate's difference for a fit)."""
    values = pd.to_numeric(rows[x], errors="coerce")
    return float((values.max() / values.min()) ** tol - 1)


def _apart(a: float, b: float) -> float:
    """The relative difference of two positive times (or speed-ups): larger / smaller - 1."""
    return float(max(a, b) / min(a, b) - 1)


def _fit_rows(stored: Stored, fit: str, mixer: str, **where) -> pd.DataFrame:
    return stored.rows("table1", fit=fit, mixer=mixer, **where)


def _exp(rows: pd.DataFrame, x: str, y: pd.Series | str) -> Fit:
    values = rows[y] if isinstance(y, str) else y
    fit = loglog_fit(rows[x], values)
    if fit is None:
        raise Missing("table1", f"fewer than 4 {x} values in table1's rows for this fit")
    return fit


def _layer_scale(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    parts = [_range("n", rows["seq_len"]), _range("d", rows["d_model"]),
             f"device {first.get('device', '?')} ({first.get('device_name', '?')})"]
    if "threads" in rows and pd.notna(first.get("threads")):
        threads = int(first["threads"])
        parts.append(f"{threads} thread{'' if threads == 1 else 's'}")
    return ", ".join(parts) + f", machine {first.get('machine', '?')}"


def _timing_scope(rows: pd.DataFrame) -> str:
    """A timing verdict's label scope: the device, the threads and the sizes timed ("CPU
    (AMD EPYC), 1 thread, n = 256..2048, d = 32")."""
    parts = [device_word(rows)]
    column = "threads_used" if "threads_used" in rows else "threads"
    if column in rows and pd.to_numeric(rows[column], errors="coerce").notna().any():
        used = pd.to_numeric(rows[column], errors="coerce").dropna().astype(int)
        lo, hi = int(used.min()), int(used.max())
        parts.append(f"{lo if lo == hi else f'{lo}-{hi}'} thread{'' if hi == 1 else 's'}")
    parts += [_range("n", rows["seq_len"]), _range("d", rows["d_model"])]
    return ", ".join(p for p in parts if p)


def _range(name: str, values: pd.Series) -> str:
    lo, hi = int(values.min()), int(values.max())
    return f"{name} = {lo}" if lo == hi else f"{name} = {lo}..{hi}"


def _near(fit: Fit, target: float, tol: float) -> bool:
    return abs(fit.slope - target) <= tol


def sequential_ops(stored: Stored) -> Evidence:
    attn, lstm = (_fit_rows(stored, "seq-ops", m) for m in ("self-attention", "lstm"))
    a, r = _exp(attn, "seq_len", "seq_ops"), _exp(lstm, "seq_len", "seq_ops")
    ok = _near(a, 0, EXP_TOL) and _near(r, 1, EXP_TOL)
    return Evidence(
        "table1, fit=seq-ops: autograd graph depth of one layer (LSTM through its cell loop)",
        f"depth ~ n^k: self-attention k = {a.text()}, LSTM k = {r.text()}; LSTM depth "
        f"{int(lstm['seq_ops'].min())}..{int(lstm['seq_ops'].max())}, attention "
        f"{int(attn['seq_ops'].min())}..{int(attn['seq_ops'].max())}",
        SUPPORTS if ok else CONTRADICTS,
        f"supports if attention's exponent is within {EXP_TOL} of 0 and the LSTM's within "
        f"{EXP_TOL} of 1; else contradicts. Graph depth is structure, not time",
        _layer_scale(pd.concat([attn, lstm])), facts=scale_facts(pd.concat([attn, lstm])))


def _achieved(rows: pd.DataFrame, column: str) -> pd.Series:
    """Achieved FLOP rate (GFLOP/s) of layer rows: forward + backward FLOPs over forward +
    backward time (column FWDBWD), or forward over forward where that is all the rows time."""
    flops = rows["flops_fwdbwd"] if column == "fwdbwd_ms" and "flops_fwdbwd" in rows \
        else rows["flops_fwd"]
    return flops / rows[column] / 1e6


def parallel_hardware(stored: Stored) -> Evidence:
    """GPU rows decide (at a fixed token count when measured, else achieved FLOP/s); without
    them the CPU's fixed-token times are shown, no verdict."""
    rule = (f"on a GPU, at a fixed token count B*n with n growing (fixed-tokens-gpu): supports "
            f"if on every dtype the LSTM's fwd+bwd time per token grows as n^k with k >= "
            f"{SEQUENTIAL_SLOPE} and is at least {UTILISATION_GAP}x attention's at the longest "
            f"n; contradicts if k < {FLAT_SLOPE} or attention is slower there; else qualified. "
            "Without fixed-token rows: attention's achieved FLOP/s over the LSTM's at the "
            f"longest n (>= {UTILISATION_GAP}x supports, < 1 contradicts). No GPU results "
            "(<out>/gpu): not measured on this hardware")
    seen = len(stored.read)
    gpu = stored.gpu()
    if gpu is not None and "fit" in gpu and (gpu["fit"] == "fixed-tokens").any():
        fixed = gpu[gpu["fit"] == "fixed-tokens"]
        stored.only(seen, fixed, f"{GPU_DIR}/")  # what the verdict reads, not every GPU row
        return _fixed_tokens_gpu(fixed, rule)
    if gpu is None:
        rows = _fit_rows(stored, "fixed-tokens", "lstm")
        attn = _fit_rows(stored, "fixed-tokens", "self-attention")
        # the quantity fixed-tokens.png draws: forward + backward time per batch
        r = loglog_fit(rows["seq_len"], rows["fwdbwd_ms"])
        a = loglog_fit(attn["seq_len"], attn["fwdbwd_ms"])
        tokens = int(rows["seq_len"].iloc[0] * rows["batch_size"].iloc[0])
        measured = (f"no GPU results. On this CPU at {tokens} tokens per batch, forward + "
                    f"backward time ~ n^k: LSTM k = {r.text() if r else 'n/a'}, attention k = "
                    f"{a.text() if a else 'n/a'} (a flat LSTM means no idle parallel "
                    "hardware here, not that recurrence parallelises)")
        return Evidence("table1, fit=fixed-tokens (CPU); GPU suites under <out>/gpu",
                        measured, NOT_HERE, rule, _layer_scale(pd.concat([rows, attn])),
                        facts=scale_facts(pd.concat([rows, attn])),
                        figure="table1/fixed-tokens.png")
    both = gpu[gpu["mixer"].isin(["self-attention", "lstm"])]  # complexity-gpu rows
    pairs = both.pivot_table(index=["seq_len", "d_model"], columns="mixer",
                             values="fwd_ms", aggfunc="median").dropna()
    if pairs.empty:
        raise Missing("complexity-gpu-quick --device cuda",
                      "GPU results lack self-attention and LSTM at the same n, d")
    n, d = pairs.index.max()
    at = both[(both["seq_len"] == n) & (both["d_model"] == d)]
    column = power.timing_column(at)
    rate = _achieved(at, column).groupby(at["mixer"]).median()
    ratio = float(rate["self-attention"] / rate["lstm"])
    verdict = SUPPORTS if ratio >= UTILISATION_GAP else CONTRADICTS if ratio < 1 else QUALIFIED
    which = "forward + backward" if column == "fwdbwd_ms" else "forward"
    gates = power.timing(at, column, "achieved FLOP rates",
                         _apart(float(rate["self-attention"]), float(rate["lstm"])),
                         "attention's achieved rate against the LSTM's", "complexity-gpu-quick")
    return Evidence(
        f"GPU layer rows under <out>/gpu at n = {n}, d = {d}",
        f"achieved {which} rate: attention {fmt(rate['self-attention'])} GFLOP/s, LSTM "
        f"{fmt(rate['lstm'])} GFLOP/s (ratio {fmt(ratio)}; one timing per point, median of "
        "its timed calls)", verdict, rule + f". Gates: {SPREAD_RULE}; {IDLE_RULE}",
        _layer_scale(at), gates, facts=scale_facts(at),
        figure=f"gpu/{at['suite'].iloc[0]}/crossover-float32.md", scope=_timing_scope(at))


def _thread_speedups(df: pd.DataFrame, column: str) -> dict[tuple[str, int], dict]:
    """Per (mixer, n): the timing `column` on 1 thread and on the most threads measured, the
    speed-up, the parallel efficiency (speed-up / threads) and the two rows."""
    ok = df[df["runner"] == "threads"] if "runner" in df else df
    out = {}
    for (mixer, n), g in ok.groupby(["mixer", "seq_len"], sort=False):
        used = pd.to_numeric(g["threads_used"]).astype(int)
        one, top = g[used == 1].iloc[:1], g[used == used.max()].iloc[:1]
        if one.empty:
            continue
        t1, tp, p = float(one[column].iloc[0]), float(top[column].iloc[0]), int(used.max())
        out[(str(mixer), int(n))] = {"speedup": t1 / tp, "efficiency": t1 / tp / p,
                                     "threads": p, "batch_size": int(g["batch_size"].iloc[0]),
                                     "rows": pd.concat([one, top])}
    return out


def parallel_threads(stored: Stored) -> Evidence:
    """CPU threads: measured parallel efficiency of forward + backward at the longest n
    (attention against each recurrent layer), and the projection."""
    df = stored.rows("threads")
    column = power.timing_column(df)
    measured_at = _thread_speedups(df, column)
    n = max(k[1] for k in measured_at)
    at = {m: v for (m, k), v in measured_at.items() if k == n}
    recurrent = catalog.of_kind("recurrent")  # the recurrent layers (LSTM, GRU) it reads
    if "self-attention" not in at or not any(m in at for m in recurrent):
        raise Missing("threads", f"threads has no self-attention and recurrent rows at n = {n}")
    attn, rec = at["self-attention"], {m: at[m] for m in recurrent if m in at}
    gaps = {m: attn["efficiency"] - r["efficiency"] for m, r in rec.items()}
    if attn["threads"] < 2 or max(v["speedup"] for v in at.values()) < MIN_SPEEDUP:
        verdict = NOT_HERE
    else:
        verdict = (SUPPORTS if all(g >= EFFICIENCY_GAP for g in gaps.values()) else
                   CONTRADICTS if all(g <= 0 for g in gaps.values()) else QUALIFIED)
    which = "forward + backward" if column == "fwdbwd_ms" else "forward only"
    measured = f"{which} ({column}): " + "; ".join(
        f"{m}: speed-up {fmt(r['speedup'])} on {r['threads']} threads (efficiency "
        f"{fmt(r['efficiency'])})" for m, r in at.items())
    measured += f" at n = {n}, {attn['batch_size']} sequences"
    if column != "fwd_ms" and "fwd_ms" in df:
        forward = {m: v for (m, k), v in _thread_speedups(df, "fwd_ms").items() if k == n}
        measured += ("; forward alone, for contrast (not judged): " + ", ".join(
            f"{m} {fmt(r['speedup'])}" for m, r in forward.items()))
    proj = projection_table(df)
    proj = proj[proj["seq_len"] == n].set_index("mixer")
    measured += (f". Work-span projection (Brent's bound on forward time, not a measurement; "
                 f"tau = {fmt(proj['tau_ms'].iloc[0] * 1e3)} us per dependent step): more "
                 "processors stop helping near P = " + ", ".join(
                     f"{fmt(r['P_span'])} ({m}, depth {int(r['span_ops'])})"
                     for m, r in proj.iterrows()))
    spreads = [power.spread(pd.concat([attn["rows"], r["rows"]]), column,
                            _apart(attn["speedup"], r["speedup"]),
                            f"attention's speed-up against the {m}'s", "threads")
               for m, r in rec.items()]
    timed = pd.concat([attn["rows"], *(r["rows"] for r in rec.values())])
    gates = (power.forward_backward({f"speed-ups at n = {n}": column}, "threads"),
             power.combined(spreads), power.idle(timed, "threads"))
    return Evidence(
        "threads: each layer at 4096 tokens per batch on 1 thread up to every core, forward + "
        "backward timed; depth and time per dependent step measured at 1 thread", measured,
        verdict,
        f"not measured on this hardware if no layer speeds up by {MIN_SPEEDUP}x with more "
        f"threads (no idle core, e.g. a shared machine); else, on forward + backward timings, "
        f"supports if attention's efficiency beats every recurrent layer's "
        f"({', '.join(recurrent)}) by {EFFICIENCY_GAP} at the longest n, contradicts if it "
        "beats none, else qualified. The projection is labelled as such and decides nothing. "
        f"Gates: forward + backward timings; {SPREAD_RULE} (attention's speed-up against each "
        f"recurrent layer's); {IDLE_RULE}", _layer_scale(df), gates, facts=scale_facts(df),
        scope=_timing_scope(df))


def path_length(stored: Stored) -> Evidence:
    attn = _fit_rows(stored, "path", "self-attention")
    lstm = _fit_rows(stored, "path", "lstm")
    r = _exp(lstm, "seq_len", "path_length")
    constant = attn["path_length"].nunique() == 1
    ok = constant and _near(r, 1, EXP_TOL)
    pairs = ", ".join(f"n={int(n)}: {int(p)}" for n, p in
                      zip(lstm["seq_len"], lstm["path_length"], strict=True))
    return Evidence(
        "table1, fit=path: fewest layers (LSTM: steps) from x[0] to y[n-1], from exact "
        "gradients",
        f"self-attention {int(attn['path_length'].max())} layer at every n; LSTM {pairs} "
        f"(exponent {r.text()})",
        SUPPORTS if ok else CONTRADICTS,
        f"supports if attention's path is the same at every n and the LSTM's exponent is "
        f"within {EXP_TOL} of 1; else contradicts", _layer_scale(pd.concat([attn, lstm])),
        facts=scale_facts(pd.concat([attn, lstm])))


def _per_seq(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows[column] / rows["batch_size"]


def complexity(stored: Stored) -> Evidence:
    """O(n^2 d) vs O(n d^2): counted FLOPs check the code; measured time (forward +
    backward) is the cost."""
    fits, text, spreads, read = {}, [], [], []
    for mixer, flops_col, paper in (("self-attention", "flops_fwd_attn", (2, 1)),
                                    ("lstm", "flops_fwd", (1, 2))):
        for axis, x, want in (("n", "seq_len", paper[0]), ("d", "d_model", paper[1])):
            rows = _fit_rows(stored, axis, mixer)
            column = power.timing_column(rows)
            f = _exp(rows, x, _per_seq(rows, flops_col))
            t = _exp(rows, x, _per_seq(rows, column))
            fits[(mixer, axis)] = (f, t, want)
            read.append((f"{mixer} in {axis}", column))
            spreads.append(power.spread(rows, column, _fit_difference(rows, x, TIME_TOL),
                                        f"{mixer} in {axis}: the time change over the range "
                                        f"that an exponent {TIME_TOL} off resolves", "table1"))
            text.append(f"{mixer} in {axis}: FLOPs {f.text()}, time {t.text()} "
                        f"(paper {want})")
    flops_ok = all(_near(f, w, EXP_TOL) for f, _, w in fits.values())
    time_ok = all(_near(t, w, TIME_TOL) for _, t, w in fits.values())
    verdict = CONTRADICTS if not flops_ok else SUPPORTS if time_ok else QUALIFIED
    rows = pd.concat([_fit_rows(stored, a, m) for m, a in fits])
    gates = (power.forward_backward({f"time exponent, {w}": c for w, c in read}, "table1"),
             power.combined(spreads), power.idle(rows, "table1"))
    return Evidence(
        "table1, fit=n (d = 32) and fit=d (n = 512): per-sequence forward FLOPs (attention: "
        "QK^T and AV, as the O() counts) and forward + backward time", "; ".join(text),
        verdict,
        f"contradicts if a counted-FLOP exponent is more than {EXP_TOL} from the paper's; "
        f"supports if the measured-time exponents (forward + backward) are also within "
        f"{TIME_TOL}; else qualified (counted FLOPs follow from shapes and check the code; "
        f"time is the cost). Gates: forward + backward timings; {SPREAD_RULE}, the difference "
        f"of a fit being (max x / min x)^{TIME_TOL} - 1; {IDLE_RULE}",
        _layer_scale(rows), gates, facts=scale_facts(rows), scope=_timing_scope(rows))


def _at_d(layers: pd.DataFrame, mixer: str, d: int, column: str) -> pd.DataFrame:
    """The timed row of `mixer` at width d and the grid's n nearest d."""
    rows = layers[(layers["mixer"] == mixer) & (layers["d_model"] == d)]
    if rows.empty:
        return rows
    nearest = rows.loc[[(rows["seq_len"] - d).abs().idxmin()]]
    return nearest[nearest[column].notna()]


def cheaper_below_d(stored: Stored) -> Evidence:
    df = stored.rows("quick")
    layers = df[df["runner"] == "layer"]
    column = power.timing_column(layers)
    try:  # crossover_table times ms_per_seq from fwd_ms: fed the column judged in its place
        cross = crossover_table(df.assign(fwd_ms=df[column]))
    except BadInput as exc:
        raise Missing("quick", str(exc)) from None
    layer = cross[(cross["attention"] == "layer")
                  & cross["versus"].isin(list(catalog.of_kind("recurrent")))]
    parts, flops_ok, time_ok, pairs = [], True, True, []
    for _, row in layer.iterrows():
        d, star_t = int(row["d_model"]), row["n_star_time"]
        flops_ok &= bool(row["n_star_flops"] >= d)
        if pd.notna(star_t):
            early = bool(star_t < d)
            time = f"{fmt(star_t)}"
        else:
            early = "costlier" in str(row["time_note"])
            time = str(row["time_note"])
        time_ok &= not early
        a, r = (_at_d(layers, m, d, column) for m in ("self-attention", row["versus"]))
        if len(a) and len(r):
            pairs.append((early, _apart(float(a[column].iloc[0]), float(r[column].iloc[0])),
                          f"attention against the {row['versus']} at n = "
                          f"{int(a['seq_len'].iloc[0])}, d = {d}", pd.concat([a, r])))
        parts.append(f"vs {row['versus']} at d={d}: n* FLOPs {fmt(row['n_star_flops'])}, "
                     f"time {time}")
    verdict = CONTRADICTS if not flops_ok else SUPPORTS if time_ok else QUALIFIED
    # the pairs the verdict rests on: where time crosses before d (qualified: one clear one
    # is enough, the clearest gated), or every pair (supports: each must be on its side)
    deciding = [p for p in pairs if p[0]] if verdict == QUALIFIED else pairs
    if verdict == QUALIFIED and deciding:
        deciding = [max(deciding, key=lambda p: p[1])]
    spreads = [power.spread(rows, column, diff, what, "quick")
               for _, diff, what, rows in deciding]
    timed = pd.concat([rows for *_, rows in pairs]) if pairs else layers
    gates = (power.forward_backward({"time crossover n*": column}, "quick"),
             power.combined(spreads) if spreads else Gate(
                 "spread", False, "no timed pair at n = d", "rows at n = d in `tvr run quick`"),
             power.idle(timed, "quick"))
    which = "forward + backward" if column == "fwdbwd_ms" else "forward"
    return Evidence(
        "quick: whole attention layer vs LSTM and GRU, n = 32..1024, d = 64, 128, 256; "
        f"n* where attention's per-sequence cost equals the recurrent layer's ({which} time)",
        "; ".join(parts) + " (one timing per point)", verdict,
        "contradicts if counted-FLOP n* < d for some d; supports if measured-time (forward + "
        "backward) n* >= d everywhere too; else qualified (time crosses earlier than d "
        f"somewhere). Gates: forward + backward timings; {SPREAD_RULE}, the difference being "
        "attention's time against the recurrent layer's at n = d, for every pair where the "
        "verdict rests on each (supports), for the clearest early crossing where one is "
        f"enough (qualified); {IDLE_RULE}",
        _layer_scale(layers), gates, facts=scale_facts(layers), scope=_timing_scope(layers))


def quadratic_memory(stored: Stored) -> Evidence:
    explicit = _fit_rows(stored, "memory", "self-attention")
    fused = _fit_rows(stored, "n", "self-attention")
    m_exp = _exp(explicit, "seq_len", _per_seq(explicit, "saved_bytes"))
    m_fused = _exp(fused, "seq_len", _per_seq(fused, "saved_bytes"))
    c_exp = _exp(fused, "seq_len", _per_seq(fused, "flops_fwd_attn"))
    column = power.timing_column(fused)
    t_exp = _exp(fused, "seq_len", _per_seq(fused, column))
    n_min, d = int(fused["seq_len"].min()), int(fused["d_model"].iloc[0])
    quadratic = _near(m_exp, 2, 2 * EXP_TOL) and _near(c_exp, 2, EXP_TOL)
    verdict = (CONTRADICTS if not quadratic else
               QUALIFIED if m_fused.slope < 2 - 2 * EXP_TOL else SUPPORTS)
    return Evidence(
        f"table1, fit=memory (explicit scores) and fit=n (fused kernel "
        f"{fused['kernel'].iloc[0]}), n = {n_min}..{int(fused['seq_len'].max())} > d = {d}",
        f"bytes saved for backward ~ n^k: explicit {m_exp.text()}, fused {m_fused.text()}; "
        f"counted FLOPs {c_exp.text()}; "
        f"{'forward + backward' if column == 'fwdbwd_ms' else 'forward'} time {t_exp.text()}",
        verdict,
        f"contradicts unless explicit-score memory (within {2 * EXP_TOL}) and FLOPs (within "
        f"{EXP_TOL}) grow as n^2; qualified when a fused kernel's memory grows slower "
        "(the n^2 memory belongs to the formulation, not to attention). The time shown "
        f"(forward + backward) is gated: {SPREAD_RULE}, the difference being "
        f"(max n / min n)^{TIME_TOL} - 1 (what an exponent {TIME_TOL} off changes); "
        f"{IDLE_RULE}",
        _layer_scale(pd.concat([explicit, fused])),
        power.timing(fused, column, "the time exponent shown",
                     _fit_difference(fused, "seq_len", TIME_TOL),
                     f"the time change over n that an exponent {TIME_TOL} off resolves",
                     "table1"),
        facts=scale_facts(pd.concat([explicit, fused])), scope=_timing_scope(fused))


def _fixed_tokens_gpu(rows: pd.DataFrame, rule: str) -> Evidence:
    """The parallel-hardware verdict from GPU rows at a fixed token count, per dtype."""
    column = power.timing_column(rows)
    rows = rows.assign(us_per_token=rows[column] * 1e3 / (rows["batch_size"]
                                                          * rows["seq_len"]))
    parts, verdicts, spreads, read = [], [], [], []
    for dtype, one in rows.groupby(rows["dtype"].astype(str)):
        lstm, attn = one[one["mixer"] == "lstm"], one[one["mixer"] == "self-attention"]
        k = loglog_fit(lstm["seq_len"], lstm["us_per_token"])
        shared = set(lstm["seq_len"]) & set(attn["seq_len"])
        n = int(max(shared)) if shared else 0
        if k is None or not n:
            raise Missing("fixed-tokens-gpu --device cuda", f"{dtype}: fewer than 4 LSTM "
                          "points or no attention point at a shared n")
        ratio = float(lstm[lstm["seq_len"] == n]["us_per_token"].median()
                      / attn[attn["seq_len"] == n]["us_per_token"].median())
        a = loglog_fit(attn["seq_len"], attn["us_per_token"])
        verdicts.append(CONTRADICTS if k.slope < FLAT_SLOPE or ratio < 1 else
                        SUPPORTS if k.slope >= SEQUENTIAL_SLOPE and ratio >= UTILISATION_GAP
                        else QUALIFIED)
        parts.append(f"{dtype}: LSTM time per token ~ n^k, k = {k.text()}; attention k = "
                     f"{a.text() if a else 'n/a'}; at n = {n} the LSTM takes {fmt(ratio)}x "
                     "attention's time per token")
        # what the verdict reads: the LSTM's slope (thresholds SEQUENTIAL_SLOPE - FLAT_SLOPE
        # apart over its range of n) and its time against attention's at the longest n
        difference = min(_fit_difference(lstm, "seq_len", SEQUENTIAL_SLOPE - FLAT_SLOPE),
                         _apart(ratio, 1.0))
        spreads.append(power.spread(
            pd.concat([lstm, attn]), column, difference,
            f"{dtype}: the smaller of the LSTM's time change over n that the slope thresholds "
            "resolve and its time against attention's at the longest n",
            "fixed-tokens-gpu --device cuda"))
        read.append(f"{dtype} time per token")
    verdict = verdicts[0] if len(set(verdicts)) == 1 else (
        CONTRADICTS if CONTRADICTS in verdicts else QUALIFIED)
    tokens = int((rows["batch_size"] * rows["seq_len"]).iloc[0])
    suite = rows["suite"].iloc[0]
    timed = rows[rows["mixer"].isin(["lstm", "self-attention"])]
    gates = (power.forward_backward({w: column for w in read}, "fixed-tokens-gpu --device cuda"),
             power.combined(spreads), power.idle(timed, "fixed-tokens-gpu --device cuda"))
    return Evidence(f"GPU rows under <out>/gpu/{suite}, fit=fixed-tokens, {tokens} tokens per "
                    "batch", "; ".join(parts) + " (one timing per point, median of its timed "
                    "calls)", verdict, rule + f". Gates: forward + backward timings; "
                    f"{SPREAD_RULE}, the difference being the smaller of the LSTM's time "
                    f"change over n that a slope {SEQUENTIAL_SLOPE - FLAT_SLOPE:g} off resolves "
                    f"and its time against attention's at the longest n; {IDLE_RULE}",
                    _layer_scale(rows), gates, facts=scale_facts(rows),
                    figure=f"gpu/{suite}/fixed-tokens.png", scope=_timing_scope(timed))


CLAIMS = [
    Claim("sequential-ops", "Recurrence needs O(n) sequential operations; self-attention O(1)",
          "table1", "table1/sequential-ops.png", sequential_ops, kind=COUNT),
    Claim("parallel-hardware", "Recurrence's sequential nature precludes parallelization "
          "within training examples (measured on parallel hardware: a GPU)", "table1",
          "gpu/fixed-tokens-gpu/fixed-tokens.png", parallel_hardware, kind=TIMING),
    Claim("parallel-threads", "Recurrence precludes parallelization within training examples "
          "(CPU threads, and a work-span projection to P = 10^5)", "threads",
          "threads/scaling.md", parallel_threads, kind=TIMING),
    Claim("path-length", "Maximum path length: O(1) for self-attention, O(n) for recurrence",
          "table1", "table1/path-length.png", path_length, kind=COUNT),
    Claim("complexity", "Per-layer cost: O(n^2 d) for self-attention, O(n d^2) for recurrence",
          "table1", "table1.md", complexity, kind=TIMING),
    Claim("cheaper-below-d", "Self-attention is cheaper than recurrence when n < d", "quick",
          "quick/crossover.png", cheaper_below_d, kind=TIMING),
    Claim("quadratic-when-long", "For n > d, O(n^2) memory and compute is the constraint",
          "table1", "table1/memory.png", quadratic_memory, kind=TIMING),
]
