"""The complexity table and the crossover table, computed from stored layer results.

Every number comes from results.csv rows with status "ok"; the paper's O() strings sit beside
the measured log-log exponents, with the range each fit used.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from harness.errors import BadInput
from harness.report.markdown import markdown_table
from harness.report.stats import MIN_FIT_POINTS, loglog_fit
from models import catalog

FORMATS = ("markdown", "csv", "latex")


def fit_columns(prefix: str, x, y) -> dict[str, float]:
    """`<prefix>_exp`, `_se` and `_r2` of y ~ x^k (scipy.stats.linregress on logs); all
    missing when fewer than MIN_FIT_POINTS points leave no exponent to report."""
    fit = loglog_fit(x, y)
    if fit is None:
        return {f"{prefix}_exp": np.nan, f"{prefix}_se": np.nan, f"{prefix}_r2": np.nan}
    return {f"{prefix}_exp": fit.slope, f"{prefix}_se": fit.stderr, f"{prefix}_r2": fit.r2}


# Columns that change what a layer measurement means: one table must not fit across them.
RUN_COLUMNS = ("device", "dtype", "compile")


def layer_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Ok layer points with per-sequence cost columns (a batch divides evenly into sequences).

    ms_per_seq is the forward in training mode (autograd recording, as in a training step).
    """
    if "flops_fwd" not in df:
        suites = ", ".join(sorted(set(df.get("suite", ()))))
        raise BadInput(f"suite {suites} has no layer measurements; tables and cost figures "
                       "need a layer sweep such as `tvr run quick`")
    ok = df[(df["status"] == "ok") & (df["flops_fwd"].notna())].copy()
    if ok.empty:
        raise BadInput("no successful layer measurements in these results; run `tvr run quick`")
    for col in RUN_COLUMNS:
        if col in ok and ok[col].nunique() > 1:
            values = ", ".join(map(str, ok[col].unique()))
            raise BadInput(f"these results mix {col} values ({values}); measure each in its "
                           "own --out directory")
    for col in ("seq_len", "d_model", "batch_size"):
        ok[col] = ok[col].astype(int)
    ok["gflop_per_seq"] = ok["flops_fwd"] / ok["batch_size"] / 1e9
    ok["ms_per_seq"] = ok["fwd_ms"] / ok["batch_size"]
    ok["ms_per_seq_train"] = ok["fwdbwd_ms"] / ok["batch_size"]
    return ok


def _ungrouped(df: pd.DataFrame) -> pd.Series:
    """Rows in no Table 1 fit and no study: the points of a plain sweep."""
    plain = pd.Series(True, index=df.index)
    for col in ("fit", "study"):
        if col in df:
            plain &= df[col].isna() | (df[col] == "")
    return plain


def sweep_frame(df: pd.DataFrame) -> pd.DataFrame:
    """layer_frame of a plain sweep (no fit, no study): one point per (mixer, n, d)."""
    ok = layer_frame(df)
    ok = ok[_ungrouped(ok)]
    if ok.empty or ok.duplicated(["mixer", "seq_len", "d_model"]).any():
        raise BadInput("these results are not one plain layer sweep (one point per mixer, n "
                       "and d); use the suite's own table, e.g. `tvr table` for table1")
    return ok


def _fit_rows(ok: pd.DataFrame) -> list[dict]:
    rows = []
    for mixer, g in ok.groupby("mixer", sort=False):
        d_fix, n_fix = g["d_model"].min(), g["seq_len"].max()
        by_n = g[g["d_model"] == d_fix].sort_values("seq_len")
        ns = sorted(by_n["seq_len"].unique())
        keep = max(MIN_FIT_POINTS, len(ns) // 2)  # the large-n end, where the leading term rules
        by_n = by_n[by_n["seq_len"] >= ns[max(0, len(ns) - keep)]]
        by_d = g[g["seq_len"] == n_fix].sort_values("d_model")
        row = {"layer": mixer, "complexity": _paper_complexity(mixer)}
        for metric, col in (("flops", "gflop_per_seq"), ("time", "ms_per_seq")):
            for axis, part, key in (("n", by_n, "seq_len"), ("d", by_d, "d_model")):
                row |= fit_columns(f"{metric}_{axis}", part[key], part[col])
        row["n_fit"] = _fit_range("n", by_n["seq_len"], f"d={d_fix}")
        row["d_fit"] = _fit_range("d", by_d["d_model"], f"n={n_fix}")
        rows.append(row)
    return rows


def _paper_complexity(mixer: str) -> str:
    """The paper's complexity per layer (Table 1) as the catalog declares it; "" for a mixer
    the paper does not speak of."""
    row = getattr(catalog.mixers().get(mixer), "table1", None)
    return row.complexity if row is not None and row.in_paper else ""


def _fit_range(name: str, values: pd.Series, held: str) -> str:
    """"n=128..1024 at d=64", or why no exponent is reported over too few points."""
    text = f"{name}={values.min()}..{values.max()} at {held}"
    if values.nunique() < MIN_FIT_POINTS:
        text += f" ({values.nunique()} points: too few for an exponent)"
    return text


def complexity_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per layer type: the paper's O() beside fitted exponents in n and in d."""
    return pd.DataFrame(_fit_rows(sweep_frame(df)))


def _crossing(ns: np.ndarray, ratio: np.ndarray) -> tuple[float | None, str]:
    """The first n where the attention/recurrent cost ratio reaches 1 from below, log-log
    interpolated between grid points; or None and what the grid shows instead."""
    logr = np.log(ratio)
    logr = np.where(np.isclose(logr, 0.0, atol=1e-9), 0.0, logr)  # equal costs are a crossing
    signs = np.sign(logr[logr != 0])
    flips = int((signs[1:] != signs[:-1]).sum())
    if flips > 1:  # a noisy or non-monotone ratio: no single n* to report
        return None, f"the ratio crosses 1 {flips} times on this grid: no single n*"
    for i in range(len(ns)):
        if logr[i] == 0 and (i == 0 or logr[i - 1] < 0):
            return float(ns[i]), ""
        if i + 1 < len(ns) and logr[i] < 0 < logr[i + 1]:
            t = -logr[i] / (logr[i + 1] - logr[i])
            return float(np.exp(np.log(ns[i]) + t * (np.log(ns[i + 1]) - np.log(ns[i])))), ""
    if (logr < 0).all():
        return None, f"attention cheaper at every n <= {ns.max()}"
    if (logr > 0).all():
        return None, f"attention costlier at every n >= {ns.min()}"
    return None, "no crossing from cheaper to costlier on this grid"


def _attention_sides() -> dict[str, tuple[str, float]]:
    """Attention mixer -> (its name in the crossover, FLOP coefficient of its n d^2 term): the
    catalog's mixers that declare a crossover name (self-attention "layer": 8nd^2 + 4n^2d with
    its projections; attention-core "core": 4n^2d)."""
    return {name: (m.crossover, m.flop_coef or 0) for name, m in catalog.mixers().items()
            if m.crossover}


def _flop_coefs() -> dict[str, float]:
    """Every other mixer with a closed form: forward matmul FLOPs per sequence / (n d^2)."""
    return {name: m.flop_coef for name, m in catalog.mixers().items()
            if not m.crossover and m.flop_coef is not None}


CROSSOVER_GRID = ("self-attention (or attention-core) and another layer (lstm, gru, ...) at "
                  "the same n and d, outside any fit or study: `tvr run quick`, or in a suite "
                  "file a grid without fit: [[grid]] mixers = [\"self-attention\", \"lstm\"] "
                  "seq_len = [32, 64, 128] d_model = 32 batch_size = 2")


def crossover_table(df: pd.DataFrame) -> pd.DataFrame:
    """For each d, attention variant (whole layer, or the core alone) and layer it is set
    against (LSTM, GRU, and any other mixer in the results, e.g. a plugin's): the measured n*
    where attention's per-sequence cost equals the other layer's, in counted FLOPs and in
    forward time, beside the closed form (known for LSTM and GRU) and the paper's n = d."""
    if not _ungrouped(layer_frame(df)).any():
        raise BadInput(f"every point here is in a fit or a study; the crossover needs "
                       f"{CROSSOVER_GRID}")
    ok = sweep_frame(df)
    sides, coefs = _attention_sides(), _flop_coefs()
    others = [*coefs, *(m for m in ok["mixer"].unique() if m not in coefs and m not in sides)]
    rows = []
    for attn_kind, (variant, proj) in sides.items():
        attn = ok[ok["mixer"] == attn_kind]
        for other in others:
            rec = ok[ok["mixer"] == other]
            coef = coefs.get(other)
            for d, a in attn.groupby("d_model"):
                both = a.merge(rec[rec["d_model"] == d], on="seq_len", suffixes=("_a", "_r"))
                if len(both) < 2:
                    continue
                both = both.sort_values("seq_len")
                ns = both["seq_len"].to_numpy()
                # proj n d^2 + 4 n^2 d = coef n d^2  <=>  n = (coef - proj) d / 4
                # no positive root (minGRU vs the whole layer): attention is never cheaper
                closed = np.nan if coef is None or coef <= proj else (coef - proj) * int(d) / 4
                row = {"attention": variant, "versus": other, "d_model": int(d),
                       "n_star_closed_form": closed, "n_paper": int(d)}
                for metric, col in (("flops", "gflop_per_seq"), ("time", "ms_per_seq")):
                    ratio = (both[f"{col}_a"] / both[f"{col}_r"]).to_numpy()
                    row[f"n_star_{metric}"], row[f"{metric}_note"] = _crossing(ns, ratio)
                row["n_range"] = f"{ns.min()}..{ns.max()}"
                rows.append(row)
    if not rows:
        raise BadInput(f"the crossover needs {CROSSOVER_GRID}")
    return pd.DataFrame(rows)


def latex_table(table: pd.DataFrame, floatfmt: str = ".4g") -> str:
    """A LaTeX tabular with the Markdown's numbers (`floatfmt`, integers as integers) and every
    text cell and header escaped (underscores, %, &...)."""

    def number(value: object) -> str:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return str(value)
        if isinstance(value, numbers.Integral):
            return str(value)
        return format(float(value), floatfmt)  # as tabulate formats the Markdown's

    styler = table.style.hide(axis="index").format(number, na_rep="", escape="latex")
    return styler.format_index(escape="latex", axis=1).to_latex() + "\n"


def compact(table: pd.DataFrame) -> pd.DataFrame:
    """The table as the README shows it: each fitted exponent and its standard error in one
    cell, "2.00 ± 0.00" under "flops in n"; the fits' r² and ranges left out (`--wide`
    keeps every column)."""
    out = {}
    for col in table.columns:
        if col.endswith("_exp"):
            key = col.removesuffix("_exp")
            metric, _, axis = key.rpartition("_")
            se = table.get(f"{key}_se", pd.Series(np.nan, index=table.index))
            out[f"{metric} in {axis}"] = [
                "" if pd.isna(k) else f"{float(k):.2f} ± {float(e):.2f}" if pd.notna(e)
                else f"{float(k):.2f}" for k, e in zip(table[col], se, strict=True)]
        elif not col.endswith(("_se", "_r2")) and col not in ("n_fit", "d_fit"):
            out[col] = table[col]
    return pd.DataFrame(out, index=table.index)


def render(table: pd.DataFrame, fmt: str, floatfmt: str = ".4g") -> str:
    """Markdown (default), CSV or LaTeX text for a table."""
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "latex":
        return latex_table(table, floatfmt)
    if fmt == "markdown":
        return markdown_table(table, floatfmt) + "\n"
    raise BadInput(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
