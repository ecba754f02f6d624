"""Table 2's figure: dev BLEU curves against counted training FLOPs and against training
seconds, per model (or per recipe in a recipe sweep, per trial in a tuning search), beside
what the suite's choice or verdict reads. Read from stored rows and curves only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.errors import BadInput
from harness.report.translation import BASELINES, finished, is_search, last_recipe, recipes
from harness.results import config_keys, load_results, read_series


def bleu_curves(out_dir: Path, suite: str) -> plt.Figure:
    """Dev BLEU (greedy, the curve's dev verses) against counted training FLOPs and against
    training seconds: per model (its last recipe, as in Table 2; per recipe in a recipe
    sweep, per trial in a tuning search) the mean over seeds at each
    evaluation step, a band from the lowest to the highest seed, and the retrieval
    baseline's BLEU on the same verses (the cost target) where the rows have it. Right: what
    the Table 2 verdict uses, test BLEU with beam 4, one dot per seed, the suite's trivial
    baselines as lines; in a recipe sweep (dev only), what its choice uses instead: each
    recipe's dev perplexity, the chosen one ringed; in a tuning search, each trial's best
    dev BLEU, and (a third panel, where its trials recorded it) each trial's best dev
    perplexity so far against FLOPs, what its pruner compares."""
    df = load_results(out_dir, [suite])
    every = finished(df, "table2")
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
    if not search and sweep.empty:  # a suite run again with a better recipe: as Table 2
        rows = last_recipe(rows)
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
    ranked = rows.assign(_v=value.where(~pruned), _key=config_keys(rows)).dropna(subset=["_v"])
    best = ranked.sort_values(["_v", "_key"], ascending=[False, True]).drop_duplicates(
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
        # the mean and band where every seed has a point; each seed is drawn to its own end
        band = band[band["count"] == curves["point_id"].nunique()]
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
                _seed_lines(ax, curves, "train_flops" if key == "flops" else "train_s",
                            colors[model], chosen)
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


def _seed_lines(ax: plt.Axes, curves: pd.DataFrame, x: str, color: Any, chosen: bool) -> None:
    """Each seed's own curve, thin, to its own last evaluation (the mean stops where the
    first seed stopped); gid "seed:<point id>", so a test can find them."""
    for pid, one in curves.groupby("point_id", sort=False):
        one = one.sort_values("step")
        ax.plot(one[x], one["dev_bleu_greedy"], color=color, lw=0.6,
                alpha=0.45 if chosen else 0.25, gid=f"seed:{pid}")


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
