"""Claims about single layers (cost, sequential operations, path length, memory, parallel
hardware), judged from the `table1` and `quick` suites and, for a GPU, from <out>/gpu.

Every rule states its thresholds in the row it writes; the constants below are those
thresholds.
"""

from __future__ import annotations

import pandas as pd

from harness.errors import BadInput
from harness.report.evidence import Claim, Evidence, Missing, Stored, scale_facts
from harness.report.stats import Fit, fmt, loglog_fit
from harness.report.tables import crossover_table
from harness.report.threads import projection_table, scaling_table
from harness.report.verdicts import CONTRADICTS, NOT_HERE, QUALIFIED, SUPPORTS

EXP_TOL = 0.1  # a fitted exponent within this of the paper's integer matches it
TIME_TOL = 0.3  # measured-time exponents: looser (a whole layer has lower-order terms)
UTILISATION_GAP = 2.0  # attention's achieved FLOP/s over the LSTM's that counts as "idle"
SEQUENTIAL_SLOPE = 0.5  # recurrence time per token ~ n^k at fixed tokens: k above this is
# time set by its n sequential steps (k = 1: fully sequential; k = 0: n costs nothing)
FLAT_SLOPE = 0.2  # k below this: the recurrence parallelises within a sequence after all
MIN_SPEEDUP = 1.1  # below this no layer gains from more threads: no idle core to use
EFFICIENCY_GAP = 0.1  # attention's parallel efficiency over the LSTM's that counts


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


def _achieved(rows: pd.DataFrame) -> pd.Series:
    """Achieved forward FLOP rate (GFLOP/s) of layer rows."""
    return rows["flops_fwd"] / rows["fwd_ms"] / 1e6


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
    gpu = stored.gpu()
    if gpu is not None and "fit" in gpu and (gpu["fit"] == "fixed-tokens").any():
        return _fixed_tokens_gpu(gpu[gpu["fit"] == "fixed-tokens"], rule)
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
    rate = _achieved(at).groupby(at["mixer"]).median()
    ratio = float(rate["self-attention"] / rate["lstm"])
    verdict = SUPPORTS if ratio >= UTILISATION_GAP else CONTRADICTS if ratio < 1 else QUALIFIED
    return Evidence(
        f"GPU layer rows under <out>/gpu at n = {n}, d = {d}",
        f"achieved forward rate: attention {fmt(rate['self-attention'])} GFLOP/s, LSTM "
        f"{fmt(rate['lstm'])} GFLOP/s (ratio {fmt(ratio)}; one timing per point, median of "
        "its timed calls)", verdict, rule, _layer_scale(at), facts=scale_facts(at),
        figure=f"gpu/{at['suite'].iloc[0]}/crossover-float32.md")


def parallel_threads(stored: Stored) -> Evidence:
    """CPU threads: measured parallel efficiency at the longest n, and the projection."""
    df = stored.rows("threads")
    scaling, projection = scaling_table(df), projection_table(df)
    n = int(scaling["seq_len"].max())
    at = scaling[scaling["seq_len"] == n].set_index("mixer")
    attn, lstm = at.loc["self-attention"], at.loc["lstm"]
    if attn["threads"] < 2 or at["speedup"].max() < MIN_SPEEDUP:
        verdict = NOT_HERE
    else:
        gap = attn["efficiency"] - lstm["efficiency"]
        verdict = (SUPPORTS if gap >= EFFICIENCY_GAP else CONTRADICTS if gap <= 0
                   else QUALIFIED)
    proj = projection[projection["seq_len"] == n].set_index("mixer")
    measured = "; ".join(f"{m}: speed-up {fmt(r['speedup'])} on {int(r['threads'])} threads "
                         f"(efficiency {fmt(r['efficiency'])})" for m, r in at.iterrows())
    measured += (f" at n = {n}, {int(at['batch_size'].iloc[0])} sequences. Work-span "
                 f"projection (Brent's bound, not a measurement; tau = "
                 f"{fmt(proj['tau_ms'].iloc[0] * 1e3)} us per dependent step): more "
                 "processors stop helping near P = " + ", ".join(
                     f"{fmt(r['P_span'])} ({m}, depth {int(r['span_ops'])})"
                     for m, r in proj.iterrows()))
    return Evidence(
        "threads: each layer at 4096 tokens per batch on 1 thread up to every core; depth and "
        "time per dependent step measured at 1 thread", measured, verdict,
        f"not measured on this hardware if no layer speeds up by {MIN_SPEEDUP}x with more "
        f"threads (no idle core, e.g. a shared machine); else supports if attention's "
        f"efficiency beats the LSTM's by {EFFICIENCY_GAP} at the longest n, contradicts if it "
        "does not beat it, else qualified. The projection is labelled as such and decides "
        "nothing", _layer_scale(df), facts=scale_facts(df))


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
    """O(n^2 d) vs O(n d^2): counted FLOPs check the code; measured time is the cost."""
    fits, text = {}, []
    for mixer, flops_col, paper in (("self-attention", "flops_fwd_attn", (2, 1)),
                                    ("lstm", "flops_fwd", (1, 2))):
        for axis, x, want in (("n", "seq_len", paper[0]), ("d", "d_model", paper[1])):
            rows = _fit_rows(stored, axis, mixer)
            f = _exp(rows, x, _per_seq(rows, flops_col))
            t = _exp(rows, x, _per_seq(rows, "fwd_ms"))
            fits[(mixer, axis)] = (f, t, want)
            text.append(f"{mixer} in {axis}: FLOPs {f.text()}, time {t.text()} "
                        f"(paper {want})")
    flops_ok = all(_near(f, w, EXP_TOL) for f, _, w in fits.values())
    time_ok = all(_near(t, w, TIME_TOL) for _, t, w in fits.values())
    verdict = CONTRADICTS if not flops_ok else SUPPORTS if time_ok else QUALIFIED
    rows = pd.concat([_fit_rows(stored, a, m) for m, a in fits])
    return Evidence(
        "table1, fit=n (d = 32) and fit=d (n = 512): per-sequence forward FLOPs (attention: "
        "QK^T and AV, as the O() counts) and forward time", "; ".join(text), verdict,
        f"contradicts if a counted-FLOP exponent is more than {EXP_TOL} from the paper's; "
        f"supports if the measured-time exponents are also within {TIME_TOL}; else qualified "
        "(counted FLOPs follow from shapes and check the code; time is the cost)",
        _layer_scale(rows), facts=scale_facts(rows))


def cheaper_below_d(stored: Stored) -> Evidence:
    df = stored.rows("quick")
    try:
        cross = crossover_table(df)
    except BadInput as exc:
        raise Missing("quick", str(exc)) from None
    layer = cross[(cross["attention"] == "layer") & cross["versus"].isin(["lstm", "gru"])]
    parts, flops_ok, time_ok = [], True, True
    for _, row in layer.iterrows():
        d, star_t = int(row["d_model"]), row["n_star_time"]
        flops_ok &= bool(row["n_star_flops"] >= d)
        if pd.notna(star_t):
            time_ok &= bool(star_t >= d)
            time = f"{fmt(star_t)}"
        else:
            time_ok &= "costlier" not in str(row["time_note"])
            time = str(row["time_note"])
        parts.append(f"vs {row['versus']} at d={d}: n* FLOPs {fmt(row['n_star_flops'])}, "
                     f"time {time}")
    verdict = CONTRADICTS if not flops_ok else SUPPORTS if time_ok else QUALIFIED
    return Evidence(
        "quick: whole attention layer vs LSTM and GRU, n = 32..1024, d = 64, 128, 256; "
        "n* where attention's per-sequence cost equals the recurrent layer's",
        "; ".join(parts) + " (one timing per point)", verdict,
        "contradicts if counted-FLOP n* < d for some d; supports if measured-time n* >= d "
        "everywhere too; else qualified (time crosses earlier than d somewhere)",
        _layer_scale(df[df["runner"] == "layer"]), facts=scale_facts(df[df["runner"] == "layer"]))


def quadratic_memory(stored: Stored) -> Evidence:
    explicit = _fit_rows(stored, "memory", "self-attention")
    fused = _fit_rows(stored, "n", "self-attention")
    m_exp = _exp(explicit, "seq_len", _per_seq(explicit, "saved_bytes"))
    m_fused = _exp(fused, "seq_len", _per_seq(fused, "saved_bytes"))
    c_exp = _exp(fused, "seq_len", _per_seq(fused, "flops_fwd_attn"))
    t_exp = _exp(fused, "seq_len", _per_seq(fused, "fwd_ms"))
    n_min, d = int(fused["seq_len"].min()), int(fused["d_model"].iloc[0])
    quadratic = _near(m_exp, 2, 2 * EXP_TOL) and _near(c_exp, 2, EXP_TOL)
    verdict = (CONTRADICTS if not quadratic else
               QUALIFIED if m_fused.slope < 2 - 2 * EXP_TOL else SUPPORTS)
    return Evidence(
        f"table1, fit=memory (explicit scores) and fit=n (fused kernel "
        f"{fused['kernel'].iloc[0]}), n = {n_min}..{int(fused['seq_len'].max())} > d = {d}",
        f"bytes saved for backward ~ n^k: explicit {m_exp.text()}, fused {m_fused.text()}; "
        f"counted FLOPs {c_exp.text()}; time {t_exp.text()}",
        verdict,
        f"contradicts unless explicit-score memory (within {2 * EXP_TOL}) and FLOPs (within "
        f"{EXP_TOL}) grow as n^2; qualified when a fused kernel's memory grows slower "
        "(the n^2 memory belongs to the formulation, not to attention)",
        _layer_scale(pd.concat([explicit, fused])),
        facts=scale_facts(pd.concat([explicit, fused])))


def _fixed_tokens_gpu(rows: pd.DataFrame, rule: str) -> Evidence:
    """The parallel-hardware verdict from GPU rows at a fixed token count, per dtype."""
    rows = rows.assign(us_per_token=rows["fwdbwd_ms"] * 1e3 / (rows["batch_size"]
                                                               * rows["seq_len"]))
    parts, verdicts = [], []
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
    verdict = verdicts[0] if len(set(verdicts)) == 1 else (
        CONTRADICTS if CONTRADICTS in verdicts else QUALIFIED)
    tokens = int((rows["batch_size"] * rows["seq_len"]).iloc[0])
    suite = rows["suite"].iloc[0]
    return Evidence(f"GPU rows under <out>/gpu/{suite}, fit=fixed-tokens, {tokens} tokens per "
                    "batch", "; ".join(parts) + " (one timing per point, median of its timed "
                    "calls)", verdict, rule, _layer_scale(rows), facts=scale_facts(rows),
                    figure=f"gpu/{suite}/fixed-tokens.png")


CLAIMS = [
    Claim("sequential-ops", "Recurrence needs O(n) sequential operations; self-attention O(1)",
          "table1", "table1/sequential-ops.png", sequential_ops),
    Claim("parallel-hardware", "Recurrence's sequential nature precludes parallelization "
          "within training examples (measured on parallel hardware: a GPU)", "table1",
          "gpu/fixed-tokens-gpu/fixed-tokens.png", parallel_hardware),
    Claim("parallel-threads", "Recurrence precludes parallelization within training examples "
          "(CPU threads, and a work-span projection to P = 10^5)", "threads",
          "threads/scaling.md", parallel_threads),
    Claim("path-length", "Maximum path length: O(1) for self-attention, O(n) for recurrence",
          "table1", "table1/path-length.png", path_length),
    Claim("complexity", "Per-layer cost: O(n^2 d) for self-attention, O(n d^2) for recurrence",
          "table1", "table1.md", complexity),
    Claim("cheaper-below-d", "Self-attention is cheaper than recurrence when n < d", "quick",
          "quick/crossover.png", cheaper_below_d),
    Claim("quadratic-when-long", "For n > d, O(n^2) memory and compute is the constraint",
          "table1", "table1/memory.png", quadratic_memory),
]
