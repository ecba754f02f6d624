"""Translation tables and figures: the paper's Table 2 (BLEU against training cost) and
Table 3 (variations of the base model) in miniature, and dev BLEU curves against counted
training FLOPs and against training seconds. Read from stored rows and curves only."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.errors import BadInput
from harness.results import load_results, read_series

TABLE2_VALUES = ("n_params", "dev_bleu", "test_bleu", "dev_chrf", "test_chrf", "dev_ppl",
                 "train_flops", "train_s", "target_bleu", "flops_to_bleu", "seconds_to_bleu",
                 "decode_sent_per_s_cached", "decode_sent_per_s_uncached")
TABLE3_COLUMNS = {"n_layers": "N", "d_model": "d_model", "d_ff": "d_ff", "n_heads": "h",
                  "d_k": "d_k", "d_v": "d_v", "dropout": "P_drop", "label_smoothing": "eps_ls",
                  "pos_encoding": "positions", "n_params": "params", "dev_ppl": "dev PPL",
                  "dev_bleu": "dev BLEU"}
RUNNERS = ("translate", "source-copy", "constant", "retrieval")


def _rows(df: pd.DataFrame, study_prefix: str) -> pd.DataFrame:
    if "study" not in df or "runner" not in df:
        return pd.DataFrame()
    keep = (df["runner"].isin(RUNNERS) & df["status"].eq("ok")
            & df["study"].astype(str).str.startswith(study_prefix))
    return df[keep].copy()


def table2(df: pd.DataFrame) -> pd.DataFrame:
    """Per model: means over seeds (`seeds` counts them) of BLEU, chrF, dev perplexity,
    training FLOPs (forward + backward, counted) and seconds, FLOPs and seconds to reach
    the stated dev BLEU (`reached` seeds did), decoding speed with and without the cache."""
    rows = _rows(df, "table2")
    if rows.empty:
        return pd.DataFrame()
    values = [c for c in TABLE2_VALUES if c in rows]
    rows[values] = rows[values].apply(pd.to_numeric, errors="coerce")
    keys = ["model", "device"] if rows["device"].nunique() > 1 else ["model"]
    g = rows.groupby(keys, sort=False)
    out = g[values].mean()
    out.insert(0, "seeds", g["seed"].nunique())
    if "flops_to_bleu" in rows:
        out.insert(out.columns.get_loc("flops_to_bleu"), "reached",
                   g["flops_to_bleu"].count())
    return out.reset_index()


def table3(df: pd.DataFrame) -> pd.DataFrame:
    """The variations of the base model, laid out as the paper's Table 3: one row each,
    its variation letter first, then what it sets and what it gets on dev."""
    rows = _rows(df, "table3-")
    if rows.empty:
        return pd.DataFrame()
    rows["variation"] = rows["study"].str.removeprefix("table3-")
    if "n_heads" in rows:  # d_v = d_model / h always; d_k too unless the row set it (B)
        rows["d_v"] = pd.to_numeric(rows["d_model"]) // pd.to_numeric(rows["n_heads"])
        own = pd.to_numeric(rows.get("d_k", pd.Series(index=rows.index, dtype=float)))
        rows["d_k"] = own.where(own > 0, rows["d_v"]).astype(int)
    if "label_smoothing" not in rows:
        rows["label_smoothing"] = np.nan
    rows["label_smoothing"] = rows["label_smoothing"].fillna(0.1)  # the options default
    cols = ["variation", *(c for c in TABLE3_COLUMNS if c in rows)]
    # the paper's order: base, then A-E, each variation's rows by what they set
    rows["_order"] = rows["variation"].map(lambda v: "" if v == "base" else v)
    rows = rows.sort_values(["_order", *(c for c in cols[1:] if c not in ("n_params",
                                                                        "dev_ppl", "dev_bleu"))],
                            kind="stable")
    return rows[cols].rename(columns=TABLE3_COLUMNS).reset_index(drop=True)


def bleu_curves(out_dir: Path, suite: str) -> plt.Figure:
    """Dev BLEU (greedy, the first dev sentences) against training FLOPs and seconds."""
    df = load_results(out_dir, [suite])
    rows = _rows(df, "table2")
    rows = rows[rows["runner"] == "translate"]
    if rows.empty:
        raise BadInput(f"no finished translation points in suite {suite!r}; run "
                       f"`tvr run translation-quick` first")
    series = read_series(out_dir, suite)
    series = series[series["point_id"].isin(rows["point_id"])]
    wide = series.pivot_table(index=["point_id", "step"], columns="metric",
                              values="value").reset_index()
    if not {"dev_bleu_greedy", "train_flops", "train_s"} <= set(wide.columns):
        raise BadInput(f"suite {suite!r} has no dev BLEU curves")
    wide = wide.merge(rows[["point_id", "model", "seed"]], on="point_id")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for (model, seed), curve in wide.groupby(["model", "seed"], sort=False):
        curve = curve.sort_values("step")
        label = model if len(rows["seed"].unique()) == 1 else f"{model} s{seed}"
        axes[0].plot(curve["train_flops"], curve["dev_bleu_greedy"], marker="o", label=label)
        axes[1].plot(curve["train_s"], curve["dev_bleu_greedy"], marker="o", label=label)
    axes[0].set_xlabel("training FLOPs (forward + backward, counted)")
    axes[1].set_xlabel("training seconds (updates only)")
    axes[0].set_ylabel("dev BLEU (greedy)")
    axes[0].legend()
    seeds = rows["seed"].nunique()
    fig.suptitle(f"Dev BLEU (greedy, first dev verses) against training cost; {seeds} "
                 f"seed{'s' if seeds > 1 else ''}, one line each")
    fig.tight_layout()
    return fig


# name -> (draw, the runner whose rows it reads, the study it reads)
FIGURES = {"bleu-vs-cost": (bleu_curves, "translate", "table2")}
