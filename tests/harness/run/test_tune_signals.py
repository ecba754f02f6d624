"""The committed study of the CPU search opens and resumes under heartbeats, and search.md's
table of the pruning signals: how well dev perplexity and greedy dev BLEU at each rung rank
the trials that ran to their end, on made-up curves and on the committed rows."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
from scipy import stats

import experiments
from harness.run import rungs, search_doc, tune

ROOT = Path(__file__).resolve().parents[3]
CPU = "translation-cpu-tune"


@pytest.mark.slow
def test_the_committed_study_opens_and_its_cut_trials_are_asked_again(tmp_path):
    """The study the CPU search left (results/translation-cpu-tune/optuna.db, trials cut
    short before heartbeats: RUNNING with none) opens as it is, finished trials and queue
    kept; a cut trial is beaten for once, goes silent, and is failed and asked again with
    its recipe and point."""
    committed = ROOT / "results" / CPU / "optuna.db"
    (tmp_path / CPU).mkdir()
    shutil.copyfile(committed, tmp_path / CPU / "optuna.db")  # the committed file untouched
    s = experiments.SEARCHES[CPU]()
    plain = optuna.load_study(study_name=f"{CPU}-transformer-{tune.RULE}",
                              storage=f"sqlite:///{tmp_path / CPU / 'optuna.db'}")
    before = tune.counts(plain)
    (cut,) = plain.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    st = tune.study(s, "transformer", tmp_path, heartbeat=1)  # no rows here: none told
    assert tune.counts(st) == before  # opened as it is, its cut trial beaten, not failed
    time.sleep(tune.GRACE + 1)
    tune.fail_stale(st)
    trials = st.get_trials()
    assert trials[cut.number].state.name == "FAIL"
    (again,) = [t for t in trials if tune.retried(t) == cut.number]
    assert again.state.name == "WAITING" and again.params == cut.params
    assert again.user_attrs["point_id"] == cut.user_attrs["point_id"]  # resumes its point
    assert tune.finished(st) == before["COMPLETE"] + before["PRUNED"]


def _curve(ppl: list[float], bleu: list[float], flops_per_eval: float) -> dict:
    steps = range(len(ppl))
    return {"dev_ppl": [(s, p) for s, p in zip(steps, ppl, strict=True)],
            "dev_bleu_greedy": [(s, b) for s, b in zip(steps, bleu, strict=True)],
            "train_flops": [(s, s * flops_per_eval) for s in steps]}


def test_each_signal_is_ranked_against_the_objective_at_each_rung():
    """Three finished trials whose perplexity at the first rung orders them as their ends do
    and whose BLEU there orders them the other way: rho +1 and -1; at the second rung both
    agree. The value at a rung is the best so far at the first evaluation at or past it; a
    pruned trial, an error row and a trial without perplexity stay out."""
    unit = 1.0  # a FLOP per pruner step: rungs at 100 and 300, an evaluation every 100
    trials = []
    for final, ppl_r0, bleu_r0 in ((10.0, 20.0, 0.3), (20.0, 15.0, 0.2), (30.0, 9.0, 0.1)):
        curve = _curve([math.nan, ppl_r0, ppl_r0 + 5, ppl_r0 - 1],
                       [0.0, bleu_r0, bleu_r0 / 2, final / 2], 100.0)
        trials.append(("t", pd.Series({"status": "ok", "stopped_by": "budget",
                                       "best_dev_bleu_greedy": final}), curve))
    pruned = pd.Series({"status": "ok", "stopped_by": "pruned", "best_dev_bleu_greedy": 99.0})
    error = pd.Series({"status": "error", "best_dev_bleu_greedy": 99.0})
    no_ppl = pd.Series({"status": "ok", "stopped_by": "budget", "best_dev_bleu_greedy": 1.0})
    old = _curve([math.nan] * 4, [0.0, 9.0, 9.0, 9.0], 100.0)
    trials += [("t", pruned, trials[0][2]), ("t", error, trials[0][2]), ("t", no_ppl, old)]
    table = rungs.ranks(trials, {"t": unit}, {"1/9": 100, "1/3": 300}).set_index(
        ["model", "rung"])
    assert table.loc[("t", "1/9"), "trials"] == 3
    assert table.loc[("t", "1/9"), "rho_dev_ppl"] == pytest.approx(1.0)
    assert table.loc[("t", "1/9"), "rho_dev_bleu_greedy"] == pytest.approx(-1.0)
    # at 300: perplexity's best so far keeps the order; BLEU's best so far is now final / 2
    assert table.loc[("t", "1/3"), "rho_dev_ppl"] == pytest.approx(1.0)
    assert table.loc[("t", "1/3"), "rho_dev_bleu_greedy"] == pytest.approx(1.0)
    assert table.loc[("pooled", "1/9"), "trials"] == 3
    assert rungs.at_rung(trials[0][2], unit, 100) == {
        "dev_ppl": -math.log(20.0), "dev_bleu_greedy": 0.3}
    assert rungs.at_rung(trials[0][2], unit, 400) == {}  # the curve never got there
    few = rungs.ranks(trials[:2], {"t": unit}, {"1/9": 100})
    assert few["trials"].tolist() == [2, 2] and few["rho_dev_ppl"].isna().all()


@pytest.mark.slow
def test_the_committed_trials_table_is_scipys_spearman_of_the_rows_and_curves():
    """On the committed rows and curves of the CPU search, read here with pandas alone: for
    each model and rung, the trials that ran to their end with both signals at the first
    evaluation whose FLOPs reach budget / 9 or budget / 3, and scipy's Spearman rho of each
    signal (best so far) with the row's best greedy dev BLEU. search.md shows that table."""
    out = ROOT / "results"
    s = experiments.SEARCHES[CPU]()
    rows = pd.read_csv(out / CPU / "results.csv", low_memory=False).drop_duplicates(
        "point_id", keep="last")
    rows = rows[(rows["status"] == "ok") & (rows["stopped_by"] != "pruned")]
    series = pd.read_csv(out / CPU / "series.csv")
    want = []
    for rung, frac in (("1/9", 1 / 9), ("1/3", 1 / 3)):
        for _, row in rows.iterrows():
            mine = series[series["point_id"] == row["point_id"]]
            at = mine.pivot_table(index="step", columns="metric", values="value")
            at = at[(at.index > 0) & (at["train_flops"] >= row["budget_flops"] * frac
                                      * (1 - 1e-12))]
            if at.empty or "dev_ppl" not in at:
                continue
            upto = mine[mine["step"] <= at.index[0]]
            ppl = upto.loc[upto["metric"] == "dev_ppl", "value"].dropna()
            if ppl.empty:
                continue
            bleu = upto.loc[upto["metric"] == "dev_bleu_greedy", "value"]
            want.append({"model": row["model"], "rung": rung, "ppl": -math.log(ppl.min()),
                         "bleu": bleu.max(), "final": row["best_dev_bleu_greedy"]})
    want = pd.DataFrame(want)
    table = search_doc.signal_table(s, out).set_index(["model", "rung"])
    groups = [*want.groupby(["model", "rung"]),
              *((("pooled", r), g) for r, g in want.groupby("rung"))]
    assert len(table) == len(groups) == 2 * (len(s.base) + 1)
    for key, group in groups:
        assert table.loc[key, "trials"] == len(group)
        for signal, column in (("ppl", "rho_dev_ppl"), ("bleu", "rho_dev_bleu_greedy")):
            expected = stats.spearmanr(group[signal], group["final"]).statistic
            assert table.loc[key, column] == pytest.approx(expected, abs=1e-12), (key, signal)
    assert table.loc[("pooled", "1/9"), "trials"] >= 30  # every model's finished trials
    doc = search_doc.document(s, out)
    assert "## The pruning signal against the objective" in doc
    assert "| pooled         | 1/9    |" in doc
