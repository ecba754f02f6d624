"""A recipe per architecture, found by a tuning search (`tvr tune`, harness.run.tune): a
translation point whose options name a search (TranslateOptions.recipe) takes the recipe of
that search's best finished trial of the same model, before it runs, so its config_key (and
so its point id's digest) and its row say what it trained with.

The best trial is the one with the highest best dev BLEU on its curve (greedy, the curve's
verses): selection on the curve, as early stopping keeps the best weights, not on one
endpoint. Pruned trials stopped before their budget and do not compete; a tie goes to the
first config_key in sorted order (the point id of older runs, so ties go as they did).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.spec import Dimension, Point, TranslateOptions, config
from harness.console import say
from harness.errors import BadInput
from harness.results import config_keys, read_results, results_path
from models.registry import config_class

KEY = "best_dev_bleu_greedy"  # the trials' rows are ranked by it, highest first
OPTION_KEYS = {f.name for f in dataclasses.fields(TranslateOptions)}


def best_row(rows: pd.DataFrame, model: str) -> pd.Series | None:
    """The finished (not pruned) ok "translate" row of `model` with the best curve value."""
    if rows.empty or not {KEY, "runner", "model", "status"} <= set(rows.columns):
        return None
    mine = rows[(rows["runner"] == "translate") & (rows["model"] == model)
                & (rows["status"] == "ok")].copy()
    if "stopped_by" in mine:
        mine = mine[mine["stopped_by"].fillna("") != "pruned"]
    mine[KEY] = pd.to_numeric(mine[KEY], errors="coerce")
    mine = mine.dropna(subset=[KEY])
    if mine.empty:
        return None
    order = mine.assign(_key=config_keys(mine)).sort_values([KEY, "_key"],
                                                            ascending=[False, True], kind="stable")
    return order.drop(columns="_key").iloc[0]


def recipe_of(row: pd.Series, space: Mapping[str, Dimension]) -> dict[str, Any]:
    """The searched values of a trial's row, typed as its search space types them."""
    out: dict[str, Any] = {}
    for key, dim in space.items():
        value = row.get(key)
        if value is None or pd.isna(value):  # a row names only what its point changed
            value = default(key, str(row.get("model", "")))
        if value is None:
            raise BadInput(f"trial {row['point_id']} has no column {key!r}")
        if dim[0] == "choice":  # a CSV cell comes back as text or a number: match a choice
            value = next((c for c in dim[1] if str(c) == str(value) or c == value), value)
        out[key] = int(value) if dim[0].startswith("int") else \
            value if dim[0] == "choice" else float(value)
    return out


def default(key: str, model: str) -> Any:
    """The value a point trains with when it does not set `key` (a TranslateOptions field or
    a key of the model's config), so a trial told before its search tuned `key` (a knob
    added to the space later) reads as what it trained; None for a key neither has."""
    fields = {f.name: f for f in dataclasses.fields(TranslateOptions)}
    cls = config_class(model)
    if cls is not None:
        fields = {f.name: f for f in dataclasses.fields(cls)} | fields
    f = fields.get(key)
    return None if f is None or f.default is dataclasses.MISSING else f.default


def with_recipe(point: Point, recipe: dict[str, Any]) -> Point:
    """The point with these values: TranslateOptions fields in its options, the rest in its
    model config."""
    opts = {k: v for k, v in recipe.items() if k in OPTION_KEYS}
    arch = {k: v for k, v in recipe.items() if k not in OPTION_KEYS}
    return dataclasses.replace(point, config=config(dict(point.config) | arch),
                               options=dataclasses.replace(point.options, **opts))


def apply(points: list[Point], out_dir: Path, fixed: tuple[str, ...] = ()) -> list[Point]:
    """Every point naming a search, with its model's best recipe from <out>/<search>/, but
    for the keys the point keeps (TranslateOptions.recipe_keeps: a variation's own knob);
    `fixed`: keys the user set (`--set`), which the point keeps as well (an ablation of the
    recipe: its config_key names them in recipe_keeps, and a line says so)."""
    from experiments import SEARCHES

    out, found = [], {}
    for p in points:
        name = getattr(p.options, "recipe", "")
        if not name or p.runner != "translate":
            out.append(p)
            continue
        if name not in SEARCHES:
            raise BadInput(f"point {p.point_id}: recipe from {name!r}, which is not a "
                           f"search; valid: {', '.join(SEARCHES)}")
        if (name, p.subject) not in found:
            search = SEARCHES[name]()
            clash = sorted(set(fixed) & set(search.space.get(p.subject, {})))
            if clash:  # an ablation of the recipe: the point keeps it, its config_key says so
                say(f"--set {', '.join(clash)}: {p.subject} keeps the value set, not the one "
                    f"of search {name!r}; the rest of its recipe comes from the search")
            trials = read_results(results_path(out_dir, name))
            row = best_row(trials, p.subject)
            if row is None:
                raise BadInput(f"no finished {p.subject} trial of search {name!r} in "
                               f"{results_path(out_dir, name)}; run `tvr tune {name}` first")
            done = int(((trials["model"] == p.subject)  # a row per trial told, not failed
                        & trials["status"].isin(["ok", "diverged"])).sum())
            if done < search.trials:
                say(f"warning: search {name!r} has finished {done} of its {search.trials} "
                    f"{p.subject} trials; training with its best so far. A better recipe "
                    "found later trains new points, and the tables keep its rows only")
            found[name, p.subject] = recipe_of(row, search.space.get(p.subject, {}))
        own = p.options.recipe_keeps  # declared order kept: it is part of the config_key
        keeps = own + tuple(k for k in sorted(fixed) if k in found[name, p.subject]
                            and k not in own)
        if keeps != own:
            p = dataclasses.replace(p, options=dataclasses.replace(p.options,
                                                                   recipe_keeps=keeps))
        out.append(with_recipe(p, {k: v for k, v in found[name, p.subject].items()
                                   if k not in keeps}))
    return out
