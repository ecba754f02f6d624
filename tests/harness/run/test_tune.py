"""`tvr tune`: an Optuna search whose trials are points, resumable, whose best recipe lands in
the tuned suite's point ids and rows; the training loop's budget and pruning stops."""

from __future__ import annotations

import dataclasses
import math

import optuna
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

import experiments
from harness.cli import cli
from harness.results import read_results, read_series, results_path
from harness.run import search_doc, tune
from harness.train.translation import recipe
from harness.train.translation.data import TrainStream, make_batch
from harness.train.translation.train import Plan, train

SEARCH = "translation-tiny-tune"


def tvr(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """Two Transformer trials of the tiny search, then the tuned suite run on them."""
    out = tmp_path_factory.mktemp("tune")
    first = tvr("tune", SEARCH, "--only", "transformer", "--trials", "2", "--out", str(out),
                "--tracking-uri", "none")
    assert first.exit_code == 0, first.output
    run = tvr("run", "translation-tiny-tuned", "--only", "transformer", "--out", str(out),
              "--tracking-uri", "none")
    assert run.exit_code == 0, run.output
    return out, first.output + run.output


@pytest.mark.slow
def test_trials_are_rows_and_the_best_recipe_is_in_the_tuned_points_id_and_row(tuned):
    out, printed = tuned
    trials = read_results(results_path(out, SEARCH))
    assert len(trials) == 2 and set(trials["status"]) == {"ok"}
    best = recipe.best_row(trials, "transformer")
    assert best[recipe.KEY] == pd.to_numeric(trials[recipe.KEY]).max()
    space = experiments.SEARCHES[SEARCH]().space["transformer"]
    chosen = recipe.recipe_of(best, space)
    row = read_results(results_path(out, "translation-tiny-tuned")).iloc[-1]
    for key, value in chosen.items():  # in the configuration and in the row, as trained
        assert f"-{key}={value}-" in row["config_key"]
        assert row[key] == value or float(row[key]) == pytest.approx(float(value))
    assert "recipe=translation-tiny-tune" in row["config_key"]
    assert "transformer" in printed and "at_edge" in printed  # the summary table
    assert f"{SEARCH} transformer: trial 0 complete, best dev BLEU" in printed  # a line each
    assert f"{SEARCH} transformer: trial 1 " in printed and "best so far trial" in printed
    assert "## Space" in (out / SEARCH / "search.md").read_text()
    trials = experiments.SEARCHES[SEARCH]().trials  # the tuned run said the search is unfinished
    assert f"search {SEARCH!r} has finished 2 of its {trials} transformer trials" in printed


@pytest.mark.slow
def test_a_known_recipe_is_the_first_trial_and_is_not_asked_again(tmp_path):
    """Search.known: the recipe is tried before the sampler's proposals, once, whatever
    the reruns."""
    known = {"peak_lr": 5e-3, "n_layers": 1, "batch_tokens": 128}
    s = dataclasses.replace(experiments.SEARCHES[SEARCH](), known={"lstm": (known,)})
    base = next(b for b in s.base if b.subject == "lstm")
    for trials in (1, 2):
        tune.tune_model(s, base, tmp_path, torch.device("cpu"), None, trials, progress=False)
    rows = read_results(results_path(tmp_path, SEARCH))
    assert len(rows) == 2
    assert [recipe.recipe_of(r, s.space["lstm"]) == known for _, r in rows.iterrows()] == \
        [True, False]


@pytest.mark.slow
def test_a_rerun_continues_the_study_and_a_cut_trial_is_asked_again(tuned):
    """A trial left RUNNING with no heartbeat (asked outside a search, or by a harness before
    heartbeats) is beaten for once by the next process, goes silent, and is failed and asked
    again with its recipe by Optuna's retry callback, naming it."""
    out, _ = tuned
    s = experiments.SEARCHES[SEARCH]()
    st = tune.study(s, "transformer", out)
    with pytest.warns(UserWarning, match="Heartbeat"):  # asked outside optimize: no beat
        cut = st.ask({k: tune.distribution(d) for k, d in s.space["transformer"].items()})
    more = tvr("tune", SEARCH, "--only", "transformer", "--trials", "3", "--out", str(out),
               "--tracking-uri", "none", "--heartbeat", "1")
    assert more.exit_code == 0, more.output
    assert "trial(s) under way in other processes" in more.output  # its silence, waited for
    trials = tune.study(s, "transformer", out).get_trials()
    states = [t.state.name for t in trials]
    assert states.count("COMPLETE") == 3 and states[cut.number] == "FAIL"
    assert trials[-1].params == cut.params  # the cut trial's recipe, asked again
    assert tune.retried(trials[-1]) == cut.number
    assert len(read_results(results_path(out, SEARCH))) == 3


@pytest.mark.slow
def test_a_second_process_joins_the_study_and_leaves_the_others_trial_alone(tmp_path):
    """Two processes tune one model together: a trial whose heartbeat goes on (its process
    alive) is left alone and counts toward --trials; one whose heartbeat went silent (its
    process gone) is failed and asked again; once the first's heartbeat stops too, a rerun
    fails and asks again its trial as well."""
    import threading
    import time

    s = experiments.SEARCHES[SEARCH]()
    st = tune.study(s, "lstm", tmp_path, heartbeat=1)
    dists = {k: tune.distribution(d) for k, d in s.space["lstm"].items()}
    with pytest.warns(UserWarning, match="Heartbeat"):  # asked outside optimize: no beat
        live, dead = st.ask(dists), st.ask(dists)
    beats = tune.storage(tune.storage_url(s, tmp_path), heartbeat=1)
    ids = {t.number: beats.get_trial_id_from_study_id_trial_number(
        beats.get_study_id_from_name(st.study_name), t.number) for t in (live, dead)}
    beats.record_heartbeat(ids[dead.number])  # its last beat, then silence
    time.sleep(tune.GRACE + 1)
    stop = threading.Event()

    def beating() -> None:  # the first process, mid-trial
        while not stop.is_set():
            beats.record_heartbeat(ids[live.number])
            stop.wait(0.3)

    beater = threading.Thread(target=beating)
    beater.start()
    try:
        joined = tvr("tune", SEARCH, "--only", "lstm", "--trials", "2", "--out",
                     str(tmp_path), "--tracking-uri", "none", "--heartbeat", "1")
    finally:
        stop.set()
        beater.join()
    assert joined.exit_code == 0, joined.output
    trials = tune.study(s, "lstm", tmp_path, heartbeat=1).get_trials()
    assert trials[live.number].state.name == "RUNNING"  # not failed under its process
    assert trials[dead.number].state.name == "FAIL"
    (done,) = [t for t in trials if t.state.name == "COMPLETE"]  # 1 + the live one = 2
    assert done.params == dead.params  # asked again
    assert tune.retried(done) == dead.number
    alone = tvr("tune", SEARCH, "--only", "lstm", "--trials", "2", "--out", str(tmp_path),
                "--tracking-uri", "none", "--heartbeat", "1")
    assert alone.exit_code == 0, alone.output
    trials = tune.study(s, "lstm", tmp_path).get_trials()
    assert trials[live.number].state.name == "FAIL"  # its heartbeat silent: asked again
    assert trials[-1].params == live.params and trials[-1].state.name == "COMPLETE"
    assert tune.retried(trials[-1]) == live.number
    assert tune.finished(tune.study(s, "lstm", tmp_path)) == 2


@pytest.mark.slow
def test_a_lost_study_is_told_again_from_the_rows(tuned, tmp_path):
    """The rows are the record: a study started afresh (its database lost, or a rule for
    the rungs changed) is told every trial row with its recipe, value and state, once."""
    import shutil

    out, _ = tuned
    copy = tmp_path / "out"
    shutil.copytree(out / SEARCH, copy / SEARCH, ignore=shutil.ignore_patterns("optuna.db"))
    rows = read_results(results_path(copy, SEARCH)).iloc[:2]
    rows.loc[rows.index[0], "stopped_by"] = "pruned"  # pruned on dev perplexity
    old_rule = rows.iloc[[1]].assign(point_id="old", stopped_by="pruned")  # no curve of it
    rerun = rows.iloc[[1]].assign(**{recipe.KEY: 99.0})  # a point's last row is its outcome
    failed = rows.iloc[[1]].assign(point_id="failed", status="error")
    rows = pd.concat([rows, old_rule, rerun, failed], ignore_index=True)
    rows.to_csv(results_path(copy, SEARCH), index=False)
    assert "old" not in set(read_series(copy, SEARCH)["point_id"])
    s = experiments.SEARCHES[SEARCH]()
    st = tune.study(s, "transformer", copy)  # told once, whatever the number of restarts
    tune._tell_rows(st, copy, SEARCH, "transformer", s.space["transformer"],
                    tune.rung_unit(s.base[0], s), tune.last_step(s))
    trials = tune.study(s, "transformer", copy).get_trials()
    assert [t.user_attrs["point_id"] for t in trials] == list(rows["point_id"].iloc[:2])
    assert [t.state.name for t in trials] == ["PRUNED", "COMPLETE"]
    # what the trial's pruning hook reported, rebuilt from its curve
    live = {t.user_attrs.get("point_id"): t for t in tune.study(s, "transformer", out).get_trials()}
    assert trials[0].intermediate_values  # the sampler ranks a pruned trial by its last
    assert trials[0].intermediate_values == pytest.approx(
        live[trials[0].user_attrs["point_id"]].intermediate_values)
    assert trials[1].value == 99.0
    assert trials[1].params == recipe.recipe_of(rows.iloc[1], s.space["transformer"])
    dists = {k: tune.distribution(d) for k, d in s.space["transformer"].items()}
    random = dataclasses.replace(s, startup=10)  # its draws still random ones
    replay = optuna.create_study(sampler=optuna.samplers.TPESampler(
        seed=0, n_startup_trials=10)).ask(dists).params  # a new search's first draw
    (copy / SEARCH / "optuna.db").unlink()
    st = tune.study(random, "transformer", copy)  # rebuilt, then seeded: not a replay
    with pytest.warns(UserWarning, match="Heartbeat"):
        assert len(st.get_trials()) == 2 and st.ask(dists).params != replay
    narrow = dict(s.space["transformer"]) | {"peak_lr": ("log", 10.0, 20.0)}
    fresh = tmp_path / "fresh"
    shutil.copytree(copy / SEARCH, fresh / SEARCH, ignore=shutil.ignore_patterns("optuna.db"))
    st = tune.study(dataclasses.replace(s, space={"transformer": narrow}), "transformer", fresh)
    assert st.get_trials() == []  # outside the space: left out


def test_a_missing_search_is_one_line_naming_the_command(tmp_path):
    r = tvr("run", "translation-tiny-tuned", "--out", str(tmp_path), "--dry-run")
    assert r.exit_code == 2 and f"run `tvr tune {SEARCH}` first" in r.output
    assert "Traceback" not in r.output
    r = tvr("tune", "no-such-search", "--out", str(tmp_path))
    assert r.exit_code == 2 and SEARCH in r.output
    r = tvr("run", SEARCH, "--out", str(tmp_path), "--dry-run")
    assert r.exit_code == 2 and f"`tvr tune {SEARCH}`" in r.output


def test_pruned_trials_do_not_compete_and_edges_are_flagged():
    rows = pd.DataFrame({"point_id": ["a", "b", "c"], "runner": "translate",
                         "model": "transformer", "status": "ok",
                         recipe.KEY: [9.0, 5.0, 4.0], "stopped_by": ["pruned", "budget", "steps"]})
    assert recipe.best_row(rows, "transformer")["point_id"] == "b"
    edge = search_doc._at_edge
    assert edge(("log", 1e-4, 1e-2), 1e-2) and not edge(("log", 1e-4, 1e-2), 1e-3)
    assert search_doc._at_edge(("choice", (1024, 2048, 4096)), 4096)
    assert not search_doc._at_edge(("choice", ("pre", "post")), "pre")  # unordered: no edge
    assert not search_doc._at_edge(("choice", (False, True)), True)  # yes or no: no edge


def test_the_summary_gives_the_retrieval_bar_only_where_the_target_is_retrieval():
    row = pd.Series({"target_from": "retrieval", "target_bleu": 5.4})
    assert search_doc._retrieval(row) == {"retrieval_dev_bleu": 5.4}
    assert search_doc._retrieval(pd.Series({"target_bleu": 0.01})) == {}  # a fixed target
    assert search_doc._retrieval(pd.Series({"target_from": "retrieval", "target_bleu": None})) == {}


class _Tiny(torch.nn.Module):
    """Logits from the target through one matmul: the FLOP counter sees its cost."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.out = torch.nn.Embedding(12, 4), torch.nn.Linear(4, 12)

    def forward(self, src, tgt, src_key_padding_mask=None):
        return self.out(self.embed(tgt))


def _loop(plan: Plan, scores: list[float]):
    data = [make_batch([[5, 6, 7]], [[8, 9]], {"<pad>": 0, "<s>": 2, "</s>": 3})]
    torch.manual_seed(0)
    model = _Tiny()
    it = iter(scores)
    return train(model, TrainStream(data, 0), plan, torch.device("cpu"), 0,
                 lambda: {"dev_bleu_greedy": next(it)})


def test_the_flop_budget_and_the_pruner_stop_training():
    per_update = _loop(Plan(1, 1e-2, 1, 0.0, 1), [0.0, 1.0]).flops
    log = _loop(Plan(100, 1e-2, 5, 0.0, 1000, max_flops=3.5 * per_update), [0.0, 1.0])
    assert (log.steps, log.stopped_by) == (4, "budget")  # the update that passed the budget
    log = _loop(Plan(100, 1e-2, 5, 0.0, 1000, eval_flops=2 * per_update), [0.0] + [1.0] * 50)
    assert [s for s, _ in log.series["dev_bleu_greedy"]][:4] == [0, 2, 4, 6]
    seen = []

    def prune(flops: int, curve: dict[str, list[tuple[int, float]]]) -> bool:
        seen.append((flops, [v for _, v in curve["dev_bleu_greedy"]]))
        return len(seen) == 2

    log = _loop(Plan(100, 1e-2, 5, 0.0, 3, prune=prune), [0.0, 2.0, 1.0, 5.0])
    assert (log.steps, log.stopped_by, log.stopped_early) == (6, "pruned", False)
    # the curve so far at each evaluation
    assert seen == [(3 * per_update, [0.0, 2.0]), (6 * per_update, [0.0, 2.0, 1.0])]
    assert math.isfinite(log.best)


def test_the_pruner_halves_by_rung_and_the_sampler_is_optunas_tpe(tmp_path):
    st = tune.study(experiments.SEARCHES[SEARCH](), "lstm", tmp_path)
    assert isinstance(st.pruner, tune.RungPruner) and st.pruner.eta == 3
    assert isinstance(st.sampler, optuna.samplers.TPESampler)


def test_each_rung_compares_the_values_reported_in_its_own_span():
    """Rungs at steps [100, 300), [300, 900): a trial's first report in a span is its value
    there, compared with every trial's (told ones too) in the same span only; the top 1/3
    (at least the best) goes on."""
    pruner = tune.RungPruner(100, 3)
    assert [pruner.rung(s) for s in (99, 100, 299, 300, 899, 900)] == [-1, 0, 0, 1, 1, 2]
    st = optuna.create_study(direction="maximize", pruner=pruner)
    dist = {"x": optuna.distributions.FloatDistribution(0, 1)}

    def told(reports: dict[int, float]) -> None:
        st.add_trial(optuna.trial.create_trial(
            params={"x": 0.5}, distributions=dist, intermediate_values=reports,
            state=optuna.trial.TrialState.PRUNED))

    told({100: -5.0})  # an early starter, judged at rung 0
    told({100: -6.0, 300: -3.0})
    told({400: -2.0})  # a long warm-up: its first report in rung 1

    def judged(*reports: tuple[int, float]) -> list[bool]:
        trial = st.ask(dist)
        out = []
        for step, value in reports:
            trial.report(value, step)
            out.append(trial.should_prune())
        st.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return out

    # rung 0 holds -5 and -6 (not the long warm-up's later -2): -4.5 is the best of 3
    assert judged((100, -4.5)) == [False]
    # at 150 it is not judged again in rung 0; in rung 1 (-3, -2 and its own) it is not best
    assert judged((100, -4.0), (150, -1.0), (300, -2.5)) == [False, False, True]
    # a late first report is judged in its own rung only: -1.9 is the best of rung 1
    assert judged((500, -1.9)) == [False]
    # five in rung 0 with it (-6, -5, -4.5, -4, -3.9): the best goes on
    assert judged((120, -3.9)) == [False]
    # six with it: the top 2 (-3.9, -4) go on, -4.2 does not
    assert judged((110, -4.2)) == [True]
    # a failed trial (cut short, asked again) does not count: its reports would count twice
    cut = st.ask(dist)
    cut.report(-3.0, 100)
    st.tell(cut, state=optuna.trial.TrialState.FAIL)
    assert judged((100, -3.95)) == [False]  # the top 2 of seven: -3.9 and itself, not -3


class _Trial:
    """What the pruning hook uses of an Optuna trial: report and should_prune."""

    def __init__(self) -> None:
        self.reports: list[tuple[float, int]] = []

    def report(self, value: float, step: int) -> None:
        self.reports.append((value, step))

    def should_prune(self) -> bool:
        return True


def test_the_rungs_compare_the_best_dev_perplexity_and_a_spent_trial_is_never_pruned():
    trial = _Trial()
    prune = tune._pruner(trial, unit=10.0, last=900)
    curve: dict[str, list[tuple[int, float]]] = {"dev_ppl": [(0, float("nan"))]}

    def at(flops: int, ppl: float | None) -> bool:
        if ppl is not None:
            curve["dev_ppl"].append((flops, ppl))
        return prune(None, flops, curve)

    assert not at(500, None)  # nothing to report yet
    assert at(1000, 40.0)  # step 100: a rung
    assert not at(1005, 30.0)  # the same step: reported once
    assert at(2000, 35.0)  # worse than before: the best so far
    assert not at(9000, 9.0) and not at(9999, None)  # finished
    assert trial.reports == [(-math.log(40.0), 100), (-math.log(30.0), 200)]
    # a resumed run's hook starts afresh: the best before the resume still counts
    resumed = _Trial()
    tune._pruner(resumed, unit=10.0, last=900)(None, 3000, {"dev_ppl": [(1, 20.0), (2, 50.0)]})
    assert resumed.reports == [(-math.log(20.0), 300)]
    # a runaway model (perplexity inf throughout) is reported at the floor, so it is ranked
    runaway = _Trial()
    assert tune._pruner(runaway, unit=10.0, last=900)(None, 1000, {"dev_ppl": [(1, math.inf)]})
    assert runaway.reports == [(tune.FLOOR, 100)]


def test_a_trial_is_judged_only_once_its_warm_up_is_over():
    """Mid-warm-up a rung would rank warm-up lengths: the hook reports from the first
    evaluation at or past the warm-up's last update, and a stored curve is read the same."""
    trial = _Trial()
    prune = tune._pruner(trial, unit=10.0, last=900, warmup=50)
    curve = {"dev_ppl": [(0, float("nan")), (40, 30.0)],
             "train_flops": [(0, 0), (40, 1000), (60, 2000)]}
    assert not prune(None, 1000, curve) and trial.reports == []  # update 40 of a 50 warm-up
    curve["dev_ppl"].append((60, 35.0))
    assert prune(None, 2000, curve)  # judged, by the best so far (warm-up's included)
    assert trial.reports == [(-math.log(30.0), 200)]
    assert tune._reports(curve, 10.0, 900, warmup=50) == {200: -math.log(30.0)}
    assert tune._reports(curve, 10.0, 900) == {100: -math.log(30.0), 200: -math.log(30.0)}


@pytest.mark.slow
def test_a_trial_pruned_by_an_older_rule_is_asked_again_and_trained_again(tmp_path):
    """A pruned row whose curve has no report today's rule would make (here: none of the
    value the rungs compare) is not told to a new study: its recipe is asked again first and
    its point trained again, its new row (in place of the old) the trial's outcome."""
    s = experiments.SEARCHES[SEARCH]()
    base = next(b for b in s.base if b.subject == "lstm")
    tune.tune_model(s, base, tmp_path, torch.device("cpu"), None, 1, progress=False)
    path, series = results_path(tmp_path, SEARCH), tmp_path / SEARCH / "series.csv"
    rows = read_results(path).assign(stopped_by="pruned")
    rows.to_csv(path, index=False)
    curves = pd.read_csv(series)
    curves[curves["metric"] != tune.PRUNE_ON].to_csv(series, index=False)
    (tmp_path / SEARCH / "optuna.db").unlink()  # as a new rule names a new study
    st = tune.tune_model(s, base, tmp_path, torch.device("cpu"), None, 1, progress=False)
    again = read_results(path)  # trained again: its new row replaces the pruned one
    assert list(again["point_id"]) == list(rows["point_id"])
    assert again["stopped_by"].iloc[0] != "pruned"
    assert tune.PRUNE_ON in set(read_series(tmp_path, SEARCH)["metric"])
    assert [t.state.name for t in st.get_trials()] == ["COMPLETE"]
    assert st.trials[0].params == recipe.recipe_of(rows.iloc[0], s.space["lstm"])


def test_diverged_trials_are_results_and_bad_studies_are_one_line(tmp_path):
    rows = pd.DataFrame({"point_id": ["p"], "status": ["diverged"], recipe.KEY: [0.5]})
    results_path(tmp_path, "s").parent.mkdir(parents=True)
    rows.to_csv(results_path(tmp_path, "s"), index=False)
    assert tune._outcome(tmp_path, "s", type("P", (), {"point_id": "p"})()) == {"values": 0.5}
    (tmp_path / SEARCH).mkdir()
    (tmp_path / SEARCH / "optuna.db").write_bytes(b"not a database" * 100)
    r = tvr("tune", SEARCH, "--out", str(tmp_path), "--tracking-uri", "none")
    assert r.exit_code == 2 and "move it aside" in r.output and "Traceback" not in r.output


@pytest.mark.slow
def test_set_of_a_searched_key_is_an_ablation_the_id_names(tuned):
    """`--set peak_lr=...` on a tuned suite trains that value with the rest of the recipe,
    says so, and names the kept key in the point id (never a silent loss to the recipe)."""
    out, _ = tuned
    r = tvr("run", "translation-tiny-tuned", "--out", str(out), "--set", "peak_lr=0.5",
            "--only", "transformer", "--dry-run")
    assert r.exit_code == 0, r.output
    assert "--set peak_lr: transformer keeps the value set" in r.output
    base = next(p for p in experiments.SUITES["translation-tiny-tuned"]()
                if p.subject == "transformer")
    mine = dataclasses.replace(base, options=dataclasses.replace(base.options, peak_lr=0.5))
    [applied], [plain] = recipe.apply([mine], out, ("peak_lr",)), recipe.apply([base], out)
    assert applied.options.peak_lr == 0.5 != plain.options.peak_lr
    assert applied.options.recipe_keeps == ("peak_lr",)
    assert dict(applied.config)["n_layers"] == dict(plain.config)["n_layers"]
    assert "-recipe_keeps=peak_lr-" in applied.config_key


@pytest.mark.slow
def test_a_variation_keeps_its_own_knob_and_takes_the_rest_of_the_recipe(tuned):
    """A Table 3 variation of a tuned point (recipe_keeps) trains its own value of a searched
    key, and the best trial's values of the others; its id says both."""
    from experiments.spec import config

    out, _ = tuned
    base = next(p for p in experiments.SUITES["translation-tiny-tuned"]()
                if p.subject == "transformer")
    variation = dataclasses.replace(
        base, config=config(dict(base.config) | {"n_layers": 3}),
        options=dataclasses.replace(base.options, recipe_keeps=("n_layers",)))
    chosen = recipe.recipe_of(recipe.best_row(read_results(results_path(out, SEARCH)),
                                              "transformer"),
                              experiments.SEARCHES[SEARCH]().space["transformer"])
    [applied], [plain] = recipe.apply([variation], out), recipe.apply([base], out)
    assert dict(applied.config)["n_layers"] == 3 != chosen["n_layers"]
    # a key the user sets joins the declared ones after them; none set: the id is as declared
    two = dataclasses.replace(variation, options=dataclasses.replace(
        variation.options, recipe_keeps=("n_layers", "batch_tokens")))
    [kept] = recipe.apply([two], out)
    assert kept.options.recipe_keeps == ("n_layers", "batch_tokens")
    [more] = recipe.apply([two], out, ("peak_lr",))
    assert more.options.recipe_keeps == ("n_layers", "batch_tokens", "peak_lr")
    assert dict(plain.config)["n_layers"] == chosen["n_layers"]
    assert applied.options.peak_lr == plain.options.peak_lr == chosen["peak_lr"]
    assert "-recipe_keeps=n_layers-" in applied.config_key
    assert "-n_layers=3-" in applied.config_key


def test_the_tuned_table3_suite_keeps_each_variations_searched_knob():
    """translation-table3-tuned: every point names the Table 2 search as its recipe, 3 seeds
    per variation (the base is translation-cpu-converged's Transformer), seed-major, trained
    by Table 2's stopping rule, the baselines beside them; the dropout variation keeps its
    own values, the others keep nothing."""
    from experiments.translation import CONVERGED_CAP, CONVERGED_PATIENCE

    points = experiments.SUITES["translation-table3-tuned"]()
    trained = [p for p in points if p.runner == "translate"]
    assert {p.runner for p in points} - {"translate"} == {"source-copy", "constant",
                                                           "retrieval"}
    assert all(p.options.recipe == "translation-cpu-tune" for p in trained)
    assert len(trained) == 3 * 5 and {p.seed for p in trained} == {0, 1, 2}
    assert [p.seed for p in trained] == sorted(p.seed for p in trained)
    assert {(p.options.budget_flops, p.options.patience) for p in trained} == {
        (CONVERGED_CAP, CONVERGED_PATIENCE)}
    keeps = {p.options.recipe_keeps for p in trained}
    assert keeps == {(), ("dropout", "attn_dropout")}
    assert len({p.point_id for p in points}) == len(points)


@pytest.mark.slow
def test_the_search_figure_draws_a_line_per_trial_and_rings_the_recipe_chosen(tuned):
    """bleu-vs-cost of a tuning search: a line per trial, the chosen one the trial the tuned
    suite takes (highest best dev BLEU, pruned trials excluded), and a panel of each
    trial's value; made-up rows: a pruned trial with the highest value is not chosen."""
    import matplotlib.pyplot as plt

    from harness.report.translation_curves import _with_trials, bleu_curves

    out, _ = tuned
    fig = bleu_curves(out, SEARCH)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any("trial" in label for label in labels)
    assert "a dot per trial" in fig.axes[-1].get_title()
    pruner = fig.axes[2]  # what the rungs compare: a dev perplexity line per trial
    assert "perplexity" in pruner.get_ylabel() and pruner.get_yscale() == "log"
    assert len(pruner.get_lines()) == len(read_results(results_path(out, SEARCH)))
    plt.close(fig)
    rows = pd.DataFrame({"model": ["t", "t", "t", "l"], "point_id": ["a", "b", "c", "d"],
                         recipe.KEY: [5.0, 9.0, 7.0, 1.0],
                         "stopped_by": ["budget", "pruned", "patience", "budget"]})
    marked = _with_trials(rows)
    assert list(marked["recipe"]) == ["trial 0", "trial 1", "trial 2", "trial 0"]
    assert list(marked["chosen"]) == [False, False, True, True]
    rows["runner"], rows["status"] = "translate", "ok"
    for model in ("t", "l"):  # the figure's choice is the tuned suites' choice
        assert marked.loc[marked["chosen"] & (marked["model"] == model), "point_id"].item() \
            == recipe.best_row(rows, model)["point_id"]
    # the figure's trial numbers are those `tvr tune` prints and search.md gives
    assert [f"trial {tune.trial_number(rows, m, p)}" for m, p in
            zip(rows["model"], rows["point_id"], strict=True)] == list(marked["recipe"])


def test_a_trial_of_older_code_finds_its_row_by_config_key():
    """Older code named a trial by its long id, which its migrated row keeps as config_key:
    the trial's number reads it, and a tie for the best recipe goes to the first config_key,
    as it went to the first long id before ids were short."""
    rows = pd.DataFrame({"model": "t", "runner": "translate", "status": "ok",
                         "point_id": ["t-s0-ffff", "t-s0-0000", "old-long-c"],
                         "config_key": ["old-long-a", "old-long-b", ""],
                         recipe.KEY: [9.0, 9.0, 1.0]})
    assert [tune.trial_number(rows, "t", p) for p in ("old-long-b", "t-s0-ffff",
                                                      "old-long-c", "x")] == [1, 0, 2, None]
    assert recipe.best_row(rows, "t")["point_id"] == "t-s0-ffff"


def test_a_knob_added_to_the_space_reads_as_the_default_its_old_trials_trained_with():
    """A trial told before its search tuned source_eos or init has no such column: its row
    names only what its point changed, so it trained with the default, and recipe_of says
    so; a key neither the options nor the model's config has is still refused."""
    space = experiments.SEARCHES["translation-cpu-tune"]().space["transformer"]
    assert {"source_eos", "init"} <= set(space)
    cells = {"point_id": "p", "model": "transformer", "peak_lr": 1e-3, "warmup_steps": 100,
             "dropout": 0.1, "label_smoothing": 0.1, "batch_tokens": 2048.0, "n_layers": 2.0,
             "norm": "post", "attn_dropout": 0.0, "source_eos": float("nan")}
    row = pd.Series(cells, dtype=object)
    got = recipe.recipe_of(row, space)
    assert got["source_eos"] is False and got["init"] == "normal" and got["n_layers"] == 2
    later = pd.Series(cells | {"source_eos": "True", "init": "xavier"}, dtype=object)
    assert recipe.recipe_of(later, space)["source_eos"] is True
    with pytest.raises(Exception, match="no column 'nosuch'"):
        recipe.recipe_of(row, space | {"nosuch": ("float", 0.0, 1.0)})



def test_a_runaway_models_perplexity_is_infinite_not_an_overflow():
    """Every evaluation measures dev perplexity (the rungs compare it): a recipe whose loss is
    finite but huge must give inf, which the pruner passes over, not stop the search."""
    from harness.train.translation.train import perplexity

    data = [make_batch([[5, 6, 7]], [[8, 9]], {"<pad>": 0, "<s>": 2, "</s>": 3})]
    model = _Tiny()
    assert math.isfinite(perplexity(model, data, torch.device("cpu")))
    with torch.no_grad():
        model.out.weight.mul_(0).add_(torch.arange(12.0)[:, None] * 1e6)
    assert perplexity(model, data, torch.device("cpu")) == math.inf


def test_a_pruned_trial_is_told_by_the_perplexity_it_reached():
    """Optuna gives a pruned trial its last report as value (-ln perplexity here): the line
    says the perplexity, never that number as a BLEU."""
    st = optuna.create_study(direction="maximize")
    trial = st.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    trial.report(-math.log(40.0), 100)
    st.tell(trial, state=optuna.trial.TrialState.PRUNED)
    line = tune._told(st, 0, "transformer", SEARCH, pd.DataFrame())
    assert "Optuna trial 0 (no row) pruned, dev perplexity 40.0" in line and "BLEU" not in line


def test_a_study_that_fails_under_the_search_is_one_line_and_the_rows_stay(tmp_path):
    """A study database that fails after it opened (here: every new trial refused, as a
    full disk does) ends the search with one line naming the full disk and the way on, not
    a traceback, nor a damaged study to move aside."""
    import sqlite3

    s = experiments.SEARCHES[SEARCH]()
    tune.study(s, "transformer", tmp_path)
    with sqlite3.connect(tmp_path / SEARCH / "optuna.db") as db:
        db.execute("CREATE TRIGGER full BEFORE INSERT ON trials "
                   "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    result = tvr("tune", SEARCH, "--only", "transformer", "--trials", "1", "--out",
                 str(tmp_path), "--tracking-uri", "none")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    [line] = result.output.strip().splitlines()
    assert "the disk is full" in line and "free space" in line
    assert "Traceback" not in result.output and (tmp_path / SEARCH / "optuna.db").is_file()


def test_a_storage_that_cannot_be_opened_is_one_line_without_its_password(tmp_path):
    """`--storage` names a database Optuna cannot open (no server there, no such driver):
    exit 2 in one line that hides the password, before anything is written."""
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    for url, why in ((f"postgresql+psycopg://alice:s3cret@127.0.0.1:{port}/tune", "refused"),
                     ("nosuch://x", "nosuch")):
        r = tvr("tune", SEARCH, "--out", str(tmp_path), "--tracking-uri", "none",
                "--storage", url)
        assert r.exit_code == 2, r.output
        (line,) = r.output.strip().splitlines()
        assert "cannot open the studies there" in line and why in line, line
        assert "s3cret" not in line and "Traceback" not in r.output
    assert not any(tmp_path.iterdir())
