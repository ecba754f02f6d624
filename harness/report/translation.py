"""Translation tables: the paper's Table 2 (BLEU against training cost) and Table 3
(variations of the base model) in miniature, which suite is Table 2's reference, and the
third-party toolkit's rows beside ours (Table 2's figure: harness.report.translation_curves).
Read from stored rows only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.results import config_keys, read_results, results_path
from models import catalog

# Table 2's own columns beside the catalog's metrics (catalog.shown_in("table2")): the seeds
# counted, test BLEU's standard deviation over them, the seeds that reached the target and
# those that converged
TABLE2_DERIVED = ("seeds", "test_bleu_sd", "reached", "converged")
BASELINES = ("source-copy", "constant", "retrieval")  # their rows first, in this order
TABLE3_COLUMNS = {"n_layers": "N", "d_model": "d_model", "d_ff": "d_ff", "n_heads": "h",
                  "d_k": "d_k", "d_v": "d_v", "dropout": "P_drop",
                  "attn_dropout": "P_drop_attn", "label_smoothing": "eps_ls",
                  "pos_encoding": "positions", "seed": "seed", "n_params": "params",
                  "steps_run": "updates", "train_flops": "train FLOPs", "dev_ppl": "dev PPL",
                  "dev_bleu": "dev BLEU"}
TABLE3_MEASURED = ("updates", "train FLOPs", "dev PPL", "dev BLEU")  # the rest: what it sets
RUNNERS = ("translate", "source-copy", "constant", "retrieval")
ANCHOR = "translation-anchor"  # scripts/anchor's rows: a third-party toolkit on our split


def finished(df: pd.DataFrame, study_prefix: str) -> pd.DataFrame:
    """The finished (ok) translation and baseline rows of the studies named so."""
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
    """Each row's configuration key without its seed (`...-s<seed>`, as experiments.spec
    names points): what it trained and how it decoded; "" for a key not named so."""
    seeds = pd.to_numeric(rows["seed"], errors="coerce")
    out = []
    for pid, seed in zip(config_keys(rows), seeds, strict=True):
        head, sep, tail = pid.removesuffix("-compiled").rpartition("-s")
        out.append(head if sep and pd.notna(seed) and tail == f"{seed:.0f}" else "")
    return pd.Series(out, index=rows.index)


def table2(df: pd.DataFrame, toolkit: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model, baselines first: means over seeds (`seeds` counts them; `test_bleu_sd` is
    the standard deviation of test BLEU across seeds) of BLEU, chrF, dev perplexity, the
    length penalty chosen on dev, training FLOPs (forward + backward, counted), seconds,
    throughput (target subwords/s, counted FLOP/s, MFU against the machine's measured
    matmul peak), FLOPs and seconds to reach the target dev BLEU (`reached` seeds did),
    `converged` seeds (dev curve flat by the stopping rule, flat_by_rule), decoding speed
    with and without the cache. `toolkit`: scripts/anchor's rows; those trained on the same
    split, subwords and length limit are added last, each model named with its toolkit and
    version. A model's rows are those of its last recipe."""
    rows = last_recipe(finished(df, "table2"))
    if rows.empty:
        return pd.DataFrame()
    rows = pd.concat([rows, same_data(toolkit, rows)], ignore_index=True)
    rows = _with_rates(rows)
    values = [c for c in catalog.shown_in("table2") if c in rows]
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
    if "converged" in rows or "stopped_by" in rows:
        trained = pd.concat([pd.to_numeric(rows.get(c), errors="coerce") if c == "converged"
                             else rows.get(c) for c in ("converged", "stopped_by")
                             if c in rows], axis=1).notna().any(axis=1)
        flat = flat_by_rule(rows).where(trained).astype(float)  # NaN: a baseline, no curve
        out["converged"] = flat.groupby([rows[k] for k in keys], sort=False).sum(min_count=1)
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
    if "train_budget_s" in out:  # one row per config and seed: its longest run (not a
        # smoke test's)
        out = out.sort_values("train_budget_s", kind="stable").drop_duplicates(
            [c for c in ("model", "seed") if c in out], keep="last")
    return out.assign(model=out["model"] + " (" + out["toolkit"].astype(str) + " "
                      + out["toolkit_version"].astype(str) + ")")


def _data(frame: pd.DataFrame, cols: list[str]) -> pd.Series:
    """split/bpe/max_tokens per row as one text, the sizes as numbers (4000.0 as 4000: a
    column with empty cells, the baselines', reads back as floats)."""
    split, *sizes = cols
    out = frame[split].astype(str)
    for col in sizes:
        # astype(str): mapped over no rows the sizes stay float64, which text cannot add
        out = out + "/" + pd.to_numeric(frame[col], errors="coerce").map("{:g}".format).astype(str)
    return out


def _with_rates(rows: pd.DataFrame) -> pd.DataFrame:
    """Throughput from the stored totals where a row predates its own columns."""
    rows = rows.copy()
    secs = pd.to_numeric(rows.get("train_s", pd.Series(np.nan, index=rows.index)),
                         errors="coerce")
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
    rows = finished(df, "table2")
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
    rows = finished(df, "table3-")
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
    if "attn_dropout" in rows:  # -1 (or a row without it): the residual dropout, as the paper
        own = pd.to_numeric(rows["attn_dropout"], errors="coerce")
        rows["attn_dropout"] = own.where(own >= 0, pd.to_numeric(rows["dropout"]))
    if "steps_run" in rows:  # the paper's "train steps": the updates each run did
        rows["steps_run"] = pd.to_numeric(rows["steps_run"], errors="coerce").round().astype(
            "Int64")
    if "train_flops" in rows:  # a count past 1e14, shown as a float (1.9e+14)
        rows["train_flops"] = pd.to_numeric(rows["train_flops"], errors="coerce").astype(float)
    cols = ["variation", *(c for c in TABLE3_COLUMNS if c in rows)]
    # the paper's order: base, then A-E, each variation's rows by what they set
    rows["_order"] = rows["variation"].map(lambda v: "" if v == "base" else v)
    measured = [k for k, v in TABLE3_COLUMNS.items() if v in TABLE3_MEASURED]
    rows = rows.sort_values(["_order", *(c for c in cols[1:] if c not in ("n_params",
                                                                        *measured))],
                            kind="stable")
    return rows[cols].rename(columns=TABLE3_COLUMNS).reset_index(drop=True)


def table3_over_seeds(df: pd.DataFrame) -> pd.DataFrame:
    """table3 with its seeds together: one row per setting, the seeds it ran, the updates,
    training FLOPs, dev perplexity and BLEU their means over those seeds, and the BLEU's
    standard deviation over them."""
    per_seed = table3(df)
    if per_seed.empty:
        return per_seed
    keys = [c for c in per_seed if c not in ("seed", *TABLE3_MEASURED)]
    means = {c: (c, "mean") for c in TABLE3_MEASURED if c in per_seed}
    out = per_seed.groupby(keys, sort=False, dropna=False).agg(
        seeds=("dev BLEU", "size"), **means,
        **{"dev BLEU sd": ("dev BLEU", "std")}).reset_index()
    if "updates" in out:
        out["updates"] = out["updates"].astype(float).round().astype("Int64")
    return out


def flops_text(value: float) -> str:
    """6e13, 2.4e14: a FLOP count as people write it (two significant digits)."""
    mantissa, _, exponent = f"{value:.2g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def cost_to_target(curve: pd.DataFrame, target: float) -> dict[str, float]:
    """FLOPs and seconds of training at the first evaluation whose greedy dev BLEU reaches
    `target` (NaN where none did): `curve` is one run's wide curve (columns
    dev_bleu_greedy, train_flops, train_s; one row per evaluation, in step order)."""
    hit = curve[curve["dev_bleu_greedy"] >= target]
    if hit.empty:
        return {"flops": float("nan"), "seconds": float("nan")}
    first = hit.iloc[0]
    return {"flops": float(first["train_flops"]), "seconds": float(first["train_s"])}


def to_target(runs: pd.DataFrame, curves: pd.DataFrame) -> tuple[float, pd.DataFrame]:
    """The common dev BLEU target of Table 2's cost half, the lowest best greedy dev BLEU of
    any run (so every run reaches it), and `runs` with each one's flops_to_target and
    seconds_to_target. `curves`: the runs' wide curves (point_id, step, metrics)."""
    best = curves.groupby("point_id")["dev_bleu_greedy"].max()
    target = float(best.loc[best.index.isin(runs["point_id"])].min())
    cost = pd.DataFrame([cost_to_target(curves[curves["point_id"] == pid].sort_values("step"),
                                        target) for pid in runs["point_id"]],
                        index=runs.index)
    return target, runs.assign(flops_to_target=cost["flops"],
                               seconds_to_target=cost["seconds"])


def gmean(values: pd.Series) -> float:
    """The geometric mean of the finite positive values (a cost's typical value over seeds:
    costs spread by factors, not by amounts); NaN if none."""
    v = pd.to_numeric(values, errors="coerce")
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")


def flat_by_rule(rows: pd.DataFrame) -> pd.Series:
    """Per row, whether its run ended with its dev curve flat by the stopping rule: ended by
    patience where the rows record how they stopped (a run the cap ended did not meet the
    rule, however slowly it still rose), else the rows' `converged` flag."""
    if "stopped_by" in rows and rows["stopped_by"].notna().any():
        return rows["stopped_by"].astype(str).eq("patience")
    flag = pd.to_numeric(rows.get("converged", pd.Series(np.nan, index=rows.index)),
                         errors="coerce")
    return flag.fillna(0).gt(0)


def converged_table(matched: pd.DataFrame, converged: pd.DataFrame) -> pd.DataFrame:
    """Table 2 by stopping rule, a row per model and rule: `matched` (trained runs stopped at
    one FLOP budget) and `converged` (trained runs to a flat dev curve, with
    flops_to_target and seconds_to_target from to_target): seeds, test BLEU (mean, sd),
    seeds converged, updates run, epochs, training FLOPs, and, at convergence, the FLOPs and
    update seconds to the common target (geometric means over seeds). `converged` counts
    the seeds flat by the rule (flat_by_rule)."""
    out = []
    for stopped, runs in (("matched budget", matched), ("converged", converged)):
        for model, g in runs.groupby("model", sort=False):
            def col(name: str, g: pd.DataFrame = g) -> pd.Series:
                return pd.to_numeric(g.get(name, pd.Series(np.nan, index=g.index)),
                                     errors="coerce")

            steps = col("steps_run")
            row = {"model": model, "stopped": stopped, "seeds": int(g["seed"].nunique()),
                   "test_bleu": g["test_bleu"].mean(), "test_bleu_sd": g["test_bleu"].std(),
                   "converged": int(flat_by_rule(g).sum()),
                   "updates": f"{steps.min():,.0f}-{steps.max():,.0f}" if steps.notna().any()
                   else "",
                   "epochs": col("epochs").mean(),
                   "train_flops": pd.to_numeric(g["train_flops"]).mean()}
            if "flops_to_target" in g:
                row |= {"flops_to_target": gmean(g["flops_to_target"]),
                        "seconds_to_target": gmean(g["seconds_to_target"])}
            out.append(row)
    order = list(dict.fromkeys([*matched.get("model", []), *converged.get("model", [])]))
    table = pd.DataFrame(out)
    if table.empty:
        return table
    return table.sort_values("model", key=lambda m: m.map(order.index), kind="stable")
