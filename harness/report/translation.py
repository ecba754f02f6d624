"""Translation tables and figures: the paper's Table 2 (BLEU against training cost) and
Table 3 (variations of the base model) in miniature, and dev BLEU curves against counted
training FLOPs and against training seconds. Read from stored rows and curves only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.errors import BadInput
from harness.results import load_results, read_results, read_series, results_path

TABLE2_VALUES = ("n_params", "dev_bleu", "test_bleu", "test_bleu_sd", "dev_chrf", "test_chrf",
                 "test_repeat_rate", "test_len_ratio", "alpha_chosen", "dev_ppl", "epochs",
                 "train_flops", "train_s", "train_tokens_per_s", "train_flops_per_s", "mfu",
                 "target_bleu", "flops_to_bleu", "seconds_to_bleu",
                 "decode_sent_per_s_cached", "decode_sent_per_s_uncached")
BASELINES = ("source-copy", "constant", "retrieval")  # their rows first, in this order
TABLE3_COLUMNS = {"n_layers": "N", "d_model": "d_model", "d_ff": "d_ff", "n_heads": "h",
                  "d_k": "d_k", "d_v": "d_v", "dropout": "P_drop", "label_smoothing": "eps_ls",
                  "pos_encoding": "positions", "n_params": "params", "dev_ppl": "dev PPL",
                  "dev_bleu": "dev BLEU"}
RUNNERS = ("translate", "source-copy", "constant", "retrieval")
ANCHOR = "translation-anchor"  # scripts/anchor's rows: a third-party toolkit on our split


def _rows(df: pd.DataFrame, study_prefix: str) -> pd.DataFrame:
    if "study" not in df or "runner" not in df:
        return pd.DataFrame()
    keep = (df["runner"].isin(RUNNERS) & df["status"].eq("ok")
            & df["study"].astype(str).str.startswith(study_prefix))
    return df[keep].copy()


# what a tuning search sets per model (experiments/translation.py's spaces): rows that differ
# in any of them trained with different recipes
RECIPE_COLUMNS = ("peak_lr", "warmup_steps", "dropout", "attn_dropout", "label_smoothing",
                  "batch_tokens", "n_layers", "norm")


def last_recipe(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model, only the rows of its last measured recipe: a suite run again after its
    search found a better recipe (or with other options: a grid of length penalties)
    trains new points beside the old ones, whose seeds must not be averaged or tested with
    the new ones. A recipe is the RECIPE_COLUMNS and the point id without its seed. Rows
    keep their order."""
    if rows.empty:
        return rows
    kept = [c for c in RECIPE_COLUMNS if c in rows]
    recipe = rows[kept].apply(lambda r: "|".join(map(str, r)), axis=1) if kept else \
        pd.Series("", index=rows.index)  # NaN as "nan"
    if {"point_id", "seed"} <= set(rows):
        recipe += "|" + _unseeded(rows)
    order = rows.sort_values("measured_at", kind="stable", na_position="first").index \
        if "measured_at" in rows else rows.index
    last = recipe.loc[order].groupby(rows.loc[order, "model"], sort=False).last()
    return rows[recipe == rows["model"].map(last)]


COMPLETE_SEEDS = 3  # a suite is Table 2's reference once each model has this many


def trained_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """A suite's finished rows (ok or diverged: a diverged seed is a result, never rerun) as
    Table 2 and its claim compare them: trained models only, on the device measured last,
    each model's last recipe, one row per model and seed."""
    rows = rows[rows["runner"].astype(str) == "translate"] if "runner" in rows else rows[:0]
    if rows.empty:
        return rows
    if "measured_at" in rows:
        rows = rows.sort_values("measured_at", kind="stable")
    if "device" in rows:  # a row naming no device matches another naming none
        device = rows["device"].astype(str).fillna("")
        rows = rows[device == device.iloc[-1]]
    return last_recipe(rows).drop_duplicates(["model", "seed"], keep="last")


def comparable(runs: pd.DataFrame) -> bool:
    """trained_runs hold the Transformer and another model."""
    models = set(runs["model"]) if "model" in runs else set()
    return "transformer" in models and len(models) > 1


def table2_choice(suites: dict[str, pd.DataFrame]) -> str | None:
    """The suite Table 2 and its claim read, of `suites` (name -> trained_runs, best first):
    the first complete one (comparable, every model with COMPLETE_SEEDS seeds: a suite cut
    short, a model's seeds still running, is not a reference yet), else the last comparable
    one, else the last with trained runs; None if none has any. A model none of whose points
    has finished is not seen: the rows are all that is stored."""
    for name, runs in suites.items():
        if comparable(runs) and (runs.groupby("model")["seed"].nunique() >= COMPLETE_SEEDS).all():
            return name
    for kept in (comparable, lambda runs: not runs.empty):
        found = [name for name, runs in suites.items() if kept(runs)]
        if found:
            return found[-1]
    return None


def _unseeded(rows: pd.DataFrame) -> pd.Series:
    """Each row's point id without its seed (`...-s<seed>`, as experiments.spec names
    points): what it trained and how it decoded; "" for an id not named so."""
    seeds = pd.to_numeric(rows["seed"], errors="coerce")
    out = []
    for pid, seed in zip(rows["point_id"].astype(str), seeds, strict=True):
        head, sep, tail = pid.removesuffix("-compiled").rpartition("-s")
        out.append(head if sep and pd.notna(seed) and tail == f"{seed:.0f}" else "")
    return pd.Series(out, index=rows.index)


def table2(df: pd.DataFrame, toolkit: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model, baselines first: means over seeds (`seeds` counts them; `test_bleu_sd` is
    the standard deviation of test BLEU across seeds) of BLEU, chrF, dev perplexity, the
    length penalty chosen on dev, training FLOPs (forward + backward, counted), seconds,
    throughput (target subwords/s, counted FLOP/s, MFU against the machine's measured
    matmul peak), FLOPs and seconds to
    reach the target dev BLEU (`reached` seeds did), `converged` seeds (dev curve
    flattened), decoding speed with and without the cache. `toolkit`: scripts/anchor's rows;
    those trained on the same split, subwords and length limit are added last, each model
    named with its toolkit and version. A model's rows are those of its last recipe."""
    rows = last_recipe(_rows(df, "table2"))
    if rows.empty:
        return pd.DataFrame()
    rows = pd.concat([rows, same_data(toolkit, rows)], ignore_index=True)
    rows = _with_rates(rows)
    values = [c for c in TABLE2_VALUES if c in rows and c != "test_bleu_sd"]
    rows[values] = rows[values].apply(pd.to_numeric, errors="coerce")
    keys = ["model", "device"] if rows["device"].nunique() > 1 else ["model"]
    g = rows.groupby(keys, sort=False)
    out = g[values].mean()
    out.insert(0, "seeds", g["seed"].nunique())
    if "test_bleu" in out:
        out.insert(out.columns.get_loc("test_bleu") + 1, "test_bleu_sd", g["test_bleu"].std())
    if "flops_to_bleu" in rows:
        out.insert(out.columns.get_loc("flops_to_bleu"), "reached",
                   g["flops_to_bleu"].count())
    if "converged" in rows:
        out["converged"] = g["converged"].apply(lambda c: pd.to_numeric(c).sum(min_count=1))
    out = out.reset_index()
    order = {m: i for i, m in enumerate(BASELINES)}
    return out.sort_values("model", key=lambda m: m.map(lambda x: order.get(x, len(order))),
                           kind="stable").reset_index(drop=True)


def is_search(out_dir: Path, suite: str) -> bool:
    """Whether the suite holds a tuning search's trials (`tvr tune` keeps its study beside
    them); the report may not import experiments, which declares the searches."""
    return (Path(out_dir) / suite / "optuna.db").is_file()


def toolkit_rows(out_dir: Path) -> pd.DataFrame:
    """scripts/anchor's rows under out_dir (empty when it has not run there)."""
    path = results_path(Path(out_dir), ANCHOR)
    return read_results(path) if path.exists() else pd.DataFrame()


SAME_DATA = {"split": "corpus_split", "bpe": "vocab", "max_tokens": "max_tokens"}  # theirs: ours


def same_data(toolkit: pd.DataFrame | None, rows: pd.DataFrame) -> pd.DataFrame:
    """The toolkit's finished rows on exactly the data of `rows` (SAME_DATA: the split's
    digest, the shared BPE's size, the length limit), each model named "<config> (<toolkit>
    <version>)"."""
    if toolkit is None or toolkit.empty or not set(SAME_DATA.values()) <= set(rows) \
            or not {*SAME_DATA, "status", "toolkit", "toolkit_version"} <= set(toolkit):
        return pd.DataFrame()
    ours = set(_data(rows.dropna(subset=list(SAME_DATA.values())), list(SAME_DATA.values())))
    out = toolkit[_data(toolkit, list(SAME_DATA)).isin(ours) & toolkit["status"].eq("ok")]
    if "train_budget_s" in out:  # one row per config: its longest run (not a smoke test's)
        out = out.sort_values("train_budget_s", kind="stable").drop_duplicates("model",
                                                                            keep="last")
    return out.assign(model=out["model"] + " (" + out["toolkit"].astype(str) + " "
                      + out["toolkit_version"].astype(str) + ")")


def _data(frame: pd.DataFrame, cols: list[str]) -> pd.Series:
    """split/bpe/max_tokens per row as one text, the sizes as numbers (4000.0 as 4000: a
    column with empty cells, the baselines', reads back as floats)."""
    split, *sizes = cols
    out = frame[split].astype(str)
    for col in sizes:
        out = out + "/" + pd.to_numeric(frame[col], errors="coerce").map("{:g}".format)
    return out


def _with_rates(rows: pd.DataFrame) -> pd.DataFrame:
    """Throughput from the stored totals where a row predates its own columns."""
    rows = rows.copy()
    secs = pd.to_numeric(rows.get("train_s"), errors="coerce")
    for rate, total in (("train_tokens_per_s", "train_tokens"),
                        ("train_flops_per_s", "train_flops")):
        if total in rows:
            derived = pd.to_numeric(rows[total], errors="coerce") / secs.where(secs > 0)
            rows[rate] = pd.to_numeric(rows[rate], errors="coerce").fillna(derived) \
                if rate in rows else derived
    return rows


def recipes(df: pd.DataFrame) -> pd.DataFrame:
    """A recipe sweep laid out: per model and (peak_lr, dropout), the dev perplexity and
    BLEU (beam, the sweep's dev set), the best curve step and whether the curve had
    flattened; `chosen` marks each model's lowest dev perplexity, the recipe a suite taking
    this sweep's recipes trains with (the first point id on a tie). Empty unless some model
    has more than one recipe among rows that take none from elsewhere (a tuned suite run
    again after its search moved on is not a sweep: Table 2 keeps its last recipe)."""
    rows = _rows(df, "table2")
    if "recipe" in rows:
        rows = rows[rows["recipe"].fillna("").astype(str) == ""]
    keys = ["model", "peak_lr", "dropout"]
    if rows.empty or not set(keys) <= set(rows) or "dev_ppl" not in rows:
        return pd.DataFrame()
    rows = rows[rows["runner"] == "translate"].copy()
    rows["peak_lr"] = pd.to_numeric(rows["peak_lr"]).fillna(1e-3)  # the options' default
    if rows.empty or rows.groupby("model")[["peak_lr", "dropout"]].nunique().max().max() < 2:
        return pd.DataFrame()
    rows["dev_ppl"] = pd.to_numeric(rows["dev_ppl"], errors="coerce")
    rows = rows.sort_values(["model", "dev_ppl", "point_id"], kind="stable")
    rows["chosen"] = ~rows.duplicated("model")
    cols = [*keys, *(c for c in ("dev_ppl", "dev_bleu", "best_step", "steps_run", "converged",
                                 "chosen") if c in rows)]
    return rows[cols].sort_values(keys, kind="stable").reset_index(drop=True)


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
    """Dev BLEU (greedy, the curve's dev verses) against counted training FLOPs and against
    training seconds: per model (per recipe, in a recipe sweep) the mean over seeds at each
    evaluation step, a band from the lowest to the highest seed, and the retrieval
    baseline's BLEU on the same verses (the cost target) where the rows have it. Right: what
    the Table 2 verdict uses, test BLEU with beam 4, one dot per seed, the suite's trivial
    baselines as lines; in a recipe sweep (dev only), what its choice uses instead: each
    recipe's dev perplexity, the chosen one ringed; in a tuning search, each trial's best
    dev BLEU, and (a third panel, where its trials recorded it) each trial's best dev
    perplexity so far against FLOPs, what its pruner compares."""
    df = load_results(out_dir, [suite])
    every = _rows(df, "table2")
    rows = every[every["runner"] == "translate"]
    if rows.empty:
        raise BadInput(f"no finished translation points in suite {suite!r}; run "
                       f"`tvr run translation-quick` first")
    series = read_series(out_dir, suite)
    series = series[series["point_id"].isin(rows["point_id"])]
    wide = series.pivot_table(index=["point_id", "step"], columns="metric",
                              values="value").reset_index()
    if not {"dev_bleu_greedy", "train_flops", "train_s"} <= set(wide.columns):
        raise BadInput(f"suite {suite!r} has no dev BLEU curves")
    search = is_search(out_dir, suite)
    sweep = pd.DataFrame() if search else recipes(df)
    rows = _with_trials(rows) if search else _with_recipe(rows, sweep)
    wide = wide.merge(rows[["point_id", "model", "seed", "recipe", "chosen", "curve"]],
                      on="point_id")
    # a search's pruner compares dev perplexity: its curves, where the trials recorded it
    ppl = search and "dev_ppl" in wide and bool(wide["dev_ppl"].notna().any())
    fig, axes = plt.subplots(1, 4 if ppl else 3, figsize=(19 if ppl else 15, 4.6),
                             layout="constrained",
                             gridspec_kw={"width_ratios": [3, 3, 3, 2.4] if ppl else [3, 3, 2]})
    models = list(dict.fromkeys(rows["model"]))
    colors = dict(zip(models, plt.get_cmap("tab10").colors, strict=False))
    seeds = rows.groupby(["model", "recipe"])["seed"].nunique()
    _cost_panels(axes[:2], wide, rows, seeds, colors)
    if ppl:
        _ppl_panel(axes[2], wide, colors)
    side = axes[-1]
    done = df[df["status"].eq("ok") & df["model"].isin(BASELINES)] if "model" in df else df
    if "test_bleu" in rows and rows["test_bleu"].notna().any():
        _test_panel(side, rows, done, models, colors)
    elif len(sweep):  # a recipe sweep scores dev only: what its choice reads
        _recipe_panel(side, sweep, models, colors)
    elif search:
        _search_panel(side, rows, models, colors)
    else:
        fig.delaxes(side)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 4),
               fontsize=8, frameon=False)
    fig.suptitle(_title(rows, int(seeds.max()), bool(len(sweep)), search), fontsize=10)
    return fig


def _title(rows: pd.DataFrame, n: int, sweep: bool, search: bool) -> str:
    """bleu_curves' title: what a line is (recipe sweep, tuning search or Table 2), over
    how many seeds, on how many test verses."""
    what = (f"line = mean over seeds, band = lowest to highest of {n} seeds" if n > 1
            else "one seed per line")
    return (("Table 2 recipe sweep: dev BLEU (greedy) against training cost, a line per "
             "model and recipe (thick: the recipe chosen, lowest dev perplexity), "
             if sweep else
             "Table 2 tuning search: dev BLEU (greedy) against training cost, a line per "
             "trial (thick: the trial chosen, highest dev BLEU on its curve), "
             if search else "Table 2: dev BLEU (greedy) against training cost, ")
            + what
            + (f"; test set {int(rows['test_sentences'].iloc[0])} verses"
               if "test_sentences" in rows and rows["test_sentences"].notna().any() else ""))


def _with_recipe(rows: pd.DataFrame, sweep: pd.DataFrame) -> pd.DataFrame:
    """rows with `recipe` ("lr 0.003, dropout 0.1" in a recipe sweep, else ""), `curve`
    (-1: no dash pattern) and `chosen`
    (the recipe the sweep picks for its model; every row outside a sweep)."""
    rows = rows.copy()
    rows["curve"] = -1  # one style per model: no dash patterns to tell trials apart
    if sweep.empty:
        return rows.assign(recipe="", chosen=True)
    lr = pd.to_numeric(rows["peak_lr"]).fillna(1e-3)  # the options' default, as recipes()
    rows["recipe"] = [f"lr {v:g}, dropout {p:g}" for v, p in zip(lr, rows["dropout"],
                                                                 strict=True)]
    picked = sweep[sweep["chosen"]]
    rows["chosen"] = [((m, v, p) in set(zip(picked["model"], picked["peak_lr"],
                                            picked["dropout"], strict=True)))
                      for m, v, p in zip(rows["model"], lr, rows["dropout"], strict=True)]
    return rows


SEARCH_KEY = "best_dev_bleu_greedy"  # what `tvr tune` ranks its trials by


def _with_trials(rows: pd.DataFrame) -> pd.DataFrame:
    """A tuning search's rows with `recipe` ("trial k": the model's trial rows numbered
    from 0 in the order they were written, pruned ones included; Optuna's numbers, which
    `tvr tune` prints, also count the trials cut short and asked again), `curve` (a number
    per trial across models: its dash pattern) and `chosen`: the trial whose recipe the
    tuned suites take, the highest best dev BLEU among those not pruned, the first point id
    on a tie. The same rule as
    harness.train.translation.recipe.best_row, restated because the report reads stored
    files only (it may not import harness.train); a test checks that they agree."""
    rows = rows.copy()
    rows["recipe"] = "trial " + rows.groupby("model").cumcount().astype(str)
    rows["curve"] = np.arange(len(rows))  # a dash pattern per trial, across models
    value = pd.to_numeric(rows.get(SEARCH_KEY), errors="coerce")
    pruned = rows.get("stopped_by", pd.Series("", index=rows.index)).eq("pruned")
    ranked = rows.assign(_v=value.where(~pruned)).dropna(subset=["_v"])
    best = ranked.sort_values(["_v", "point_id"], ascending=[False, True]).drop_duplicates(
        "model")
    rows["chosen"] = rows["point_id"].isin(best["point_id"])
    return rows


def _search_panel(ax: plt.Axes, rows: pd.DataFrame, models: list[str], colors: dict) -> None:
    """Each trial's best dev BLEU (greedy) per model, in trial order: a dot per finished
    trial, an open circle per pruned one, the chosen ringed; what the choice uses."""
    for i, model in enumerate(models):
        mine = rows[rows["model"] == model].reset_index(drop=True)
        x = i + (np.arange(len(mine)) - (len(mine) - 1) / 2) * min(0.08, 0.8 / len(mine))
        y = pd.to_numeric(mine[SEARCH_KEY], errors="coerce")
        pruned = mine.get("stopped_by", pd.Series("", index=mine.index)).eq("pruned")
        ax.scatter(x[~pruned], y[~pruned], color=colors[model], s=22, zorder=3)
        ax.scatter(x[pruned], y[pruned], facecolors="none", edgecolors=colors[model], s=22,
                   zorder=3)
        pick = mine["chosen"].to_numpy()
        ax.scatter(x[pick], y[pick], facecolors="none", edgecolors="black", s=80, lw=1.2,
                   zorder=4)
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="best dev BLEU on the curve (greedy)", xlim=(-0.5, len(models) - 0.5))
    ax.set_title("what the choice uses: a dot per trial (open: pruned),\nringed: the chosen "
                 "(highest)", fontsize=9)


def _cost_panels(axes, wide: pd.DataFrame, rows: pd.DataFrame, seeds: pd.Series,
                 colors: dict) -> None:
    """Dev BLEU against FLOPs (axes[0]) and seconds (axes[1]): per model and recipe the mean
    over seeds and a lowest-to-highest band (a recipe not chosen: a thin line), and the
    retrieval target where the rows have it. Seeds are matched by evaluation, the k-th of
    each (at the same update where evaluations are every n updates; at about the same
    FLOPs, not the same update, where they are every n FLOPs), and placed at their mean
    FLOPs and seconds."""
    others = False
    for (model, recipe), curves in wide.groupby(["model", "recipe"], sort=False):
        curves = curves[curves["dev_bleu_greedy"].notna()]  # an evaluation: BLEU measured
        g = curves.assign(k=curves.groupby("point_id")["step"].rank(method="first")
                          ).groupby("k")
        band = g["dev_bleu_greedy"].agg(["mean", "min", "max", "count"]).reset_index()
        band = band[band["count"] == band["count"].max()]  # evaluations every seed reached
        x = {"flops": g["train_flops"].mean().loc[band["k"]].to_numpy(),
             "s": g["train_s"].mean().loc[band["k"]].to_numpy()}
        n = seeds[(model, recipe)]
        chosen = bool(curves["chosen"].iloc[0])
        label = (f"{model} ({recipe}; {n} seed{'s' if n > 1 else ''})" if recipe else
                 f"{model} ({n} seed{'s' if n > 1 else ''})") if chosen else None
        others |= not chosen
        for ax, key in zip(axes, ("flops", "s"), strict=True):
            ax.plot(x[key], band["mean"], label=label,
                    **_line(int(curves["curve"].iloc[0]), chosen, colors[model]))
            if n > 1:
                ax.fill_between(x[key], band["min"], band["max"], alpha=0.2,
                                color=colors[model], lw=0)
    if others:
        axes[0].plot([], [], color="0.4", lw=0.7, alpha=0.5,
                     label="thin: the model's other recipes")
    from_retrieval = rows.get("target_from", pd.Series(dtype=str)).eq("retrieval")
    if from_retrieval.any():  # every point's target: the same verses, the same baseline
        target = pd.to_numeric(rows.loc[from_retrieval, "target_bleu"], errors="coerce").mean()
        for ax in axes:
            ax.axhline(target, color="grey", ls="--", lw=1,
                       label="retrieval baseline, same dev verses" if ax is axes[0] else None)
    axes[0].set_xlabel("training FLOPs (forward + backward, counted)")
    axes[1].set_xlabel("training seconds (updates only, measured)")
    axes[0].set_ylabel("dev BLEU (greedy)")


def _line(k: int, chosen: bool, color: Any) -> dict[str, Any]:
    """A curve's style: the chosen recipe thick with dots; a search's other trials thin with
    a dash pattern each (k: the trial's number among every model's, -1 outside a search),
    so two that coincide (pruned at the same rung, of one model or two) stay told apart."""
    dashes = {} if chosen or k < 0 else {"dashes": (1 + k % 6, 1 + k // 6)}
    return {"marker": "o" if chosen else None, "ms": 3, "color": color,
            "lw": 1.5 if chosen else 0.7, "alpha": 1 if chosen else 0.5, **dashes}


def _ppl_panel(ax: plt.Axes, wide: pd.DataFrame, colors: dict) -> None:
    """A search's best dev perplexity so far (whole dev set) against FLOPs, a line per trial
    that recorded it: what its pruner's rungs compare (lowest kept)."""
    for (model, _), curves in wide.groupby(["model", "recipe"], sort=False):
        c = curves.dropna(subset=["dev_ppl"]).sort_values("step")
        c = c[c["step"] > 0]  # the untrained model's perplexity is the vocabulary's size
        if len(c):
            ax.plot(c["train_flops"], c["dev_ppl"].cummin(), drawstyle="steps-post",
                    **_line(int(curves["curve"].iloc[0]), bool(curves["chosen"].iloc[0]),
                            colors[model]))
    ax.set_yscale("log")
    ax.set(xlabel="training FLOPs (forward + backward, counted)",
           ylabel="best dev perplexity so far (log, whole dev set)")
    ax.set_title("what the pruner compares at each rung: the best dev perplexity\nso far "
                 "(a trial not among the best at a rung is stopped)", fontsize=9)


def _recipe_panel(ax: plt.Axes, sweep: pd.DataFrame, models: list[str], colors: dict) -> None:
    """Dev perplexity of each recipe per model (a dot each), the chosen one ringed: what a
    suite taking this sweep's recipes reads."""
    for i, model in enumerate(models):
        mine = sweep[sweep["model"] == model].reset_index(drop=True)
        x = i + (np.arange(len(mine)) - (len(mine) - 1) / 2) * 0.12
        ax.scatter(x, mine["dev_ppl"], color=colors[model], s=22, zorder=3)
        pick = mine["chosen"].to_numpy()
        ax.scatter(x[pick], mine.loc[pick, "dev_ppl"], facecolors="none", edgecolors="black",
                   s=80, lw=1.2, zorder=4)
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set(ylabel="dev perplexity (log)")
    ax.set_title("what the choice uses: a dot per recipe,\nringed: the chosen (lowest)",
                 fontsize=9)


def _test_panel(ax: plt.Axes, rows: pd.DataFrame, baselines: pd.DataFrame,
                models: list[str], colors: dict) -> None:
    """Test BLEU (beam 4) per model, a dot per seed and a bar at the mean; baselines."""
    for i, model in enumerate(models):
        mine = rows[rows["model"] == model]
        x = i + (np.arange(len(mine)) - (len(mine) - 1) / 2) * 0.08
        ax.scatter(x, mine["test_bleu"], color=colors[model], s=25, zorder=3)
        ax.hlines(mine["test_bleu"].mean(), i - 0.25, i + 0.25, color="black", lw=1.5)
    styles = dict(zip(BASELINES, ("--", ":", "-."), strict=True))
    for _, b in baselines.drop_duplicates("model", keep="last").iterrows():
        ax.axhline(float(b["test_bleu"]), color="grey", ls=styles[b["model"]], lw=1,
                   label=f"{b['model']} {float(b['test_bleu']):.2f}")
    missing = [b for b in BASELINES if b not in set(baselines["model"])]
    if missing:
        ax.text(0.02, 0.98, f"not measured: {', '.join(missing)}", transform=ax.transAxes,
                va="top", fontsize=7, color="0.3")
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right", fontsize=8)
    top = max([float(rows["test_bleu"].max()), *pd.to_numeric(baselines["test_bleu"])])
    ax.set(ylabel="test BLEU (beam 4)", ylim=(0, 1.35 * top))  # headroom for the notes
    ax.set_title("what the verdict uses:\ndot: a seed; bar: their mean", fontsize=9)
    if len(baselines):
        ax.legend(fontsize=7, title="baselines", title_fontsize=7, loc="upper right")
