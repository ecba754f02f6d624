"""`tvr tune NAME`: a tuning search (experiments.spec.Search) run by Optuna, one study per
model, its trials measured as the points of the suite NAME by the sweep (rows, curves,
checkpoints and MLflow runs as for `tvr run`).

Optuna, not a hand-written loop: its TPE sampler proposes each trial's recipe from those
finished; a pruner of its kind (RungPruner: asynchronous successive halving, ASHA) stops a
trial whose best dev perplexity, at a rung of training FLOPs (budget / eta^k), is not in the
top 1/eta of the trials that reached that rung. The objective stays the best greedy dev BLEU on
the trial's curve; the rungs rank by the dev perplexity, measured on the whole dev set at
every evaluation, because early in training, at the first rung, greedy BLEU (on the
curve's 200 verses) is near 0 for every Transformer recipe (0.01-1.5 in the CPU search).
How well each of the two, at each rung, ranks the trials that ran to their end as their
objective does is measured on the search's own trials (harness.run.rungs; search.md's
last table). A trial is judged only once
its warm-up is over: mid-warm-up its learning rate is a fraction of its peak, and a rung
there ranks warm-up lengths, not recipes (in the CPU search 19 of the 21 Transformer trials
pruned at a rung were still warming up, the toolkit comparison's recipe among them). It
first reports at its first evaluation past the warm-up, and is compared at the rung that
evaluation falls in, with the values the other trials reported in the same rung.

The study lives in a storage Optuna opens (RDBStorage): <out>/NAME/optuna.db (SQLite) by
default, or any database URL it accepts (`tvr tune --storage`: PostgreSQL for processes on
several machines). A trial under way beats a heartbeat into the study (Optuna's own, from
Study.optimize, every `heartbeat` seconds); one silent for GRACE of them, its process gone
(killed, its machine lost), is failed by the next process that asks and asked again with
the same recipe (Optuna's RetryFailedTrialCallback: the new trial names the dead one), and
its point resumes from its checkpoint where the processes share a folder. A trial stopped
by a signal is failed and asked again at once. So a search stopped anywhere continues
where it was. The rows are the record and the study is rebuilt from them: a row no trial
of the study names (a lost or new database) is told to it as a finished trial, or a pruned
one with its curve's reports, which the sampler and the pruner's rungs learn from. Not
told: error rows, recipes outside today's space, and trials pruned by an older rule (on
another value than the one the rungs compare now, or mid-warm-up): those are asked again,
with the same recipe, and trained again from the start.

Several processes may tune one model together, one per core or machine (Optuna's parallel
search: each asks the same study for its next trial). `trials` counts the finished
(completed or pruned) trials of the study, each point once, and the trials under way: a
process stops once they reach it. When the rest are under way elsewhere it first waits one
grace period, so a dead one among them is failed and retried here rather than left
RUNNING. Two processes asking for the last trial in the same instant may both run one.
Models may run side by side.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import optuna
import pandas as pd
import torch
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, ProgrammingError, SQLAlchemyError

from experiments.spec import Dimension, Point, Search
from harness.console import say
from harness.errors import BadInput
from harness.results import config_keys, read_results, read_series, results_path, series_path
from harness.run.pruner import RungPruner
from harness.run.sweep import run_suite
from harness.schema import config_key_of
from harness.train.translation.recipe import KEY, best_row, recipe_of, with_recipe
from harness.train.translation.train import Curve
from harness.train.translation.translate_runner import warmup_steps

STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")
MAX_FAILED = 3  # trials in a row without a result (error rows): a bug, not a bad recipe
HEARTBEAT = 60  # seconds between the heartbeats of a trial under way (`tvr tune --heartbeat`)
GRACE = 3  # heartbeats a trial may miss before it is taken for dead, failed and asked again
RETRIES = 3  # times a dead trial is asked again: a recipe that kills its process (memory)
OPEN_ATTEMPTS = 4  # opening a new database another process is creating the tables of
# Optuna 4.9 renamed the callback that asks a dead trial again (RetryFailedTrialCallback)
RETRY = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) \
    or optuna.storages.RetryFailedTrialCallback


def distribution(dim: Dimension) -> optuna.distributions.BaseDistribution:
    kind, *args = dim
    if kind == "log":
        return optuna.distributions.FloatDistribution(args[0], args[1], log=True)
    if kind == "float":
        return optuna.distributions.FloatDistribution(args[0], args[1])
    if kind in ("int", "int-log"):
        return optuna.distributions.IntDistribution(args[0], args[1], log=kind == "int-log")
    if kind == "choice":
        return optuna.distributions.CategoricalDistribution(list(args[0]))
    raise ValueError(f"unknown search dimension {dim!r}")


def distributions(space: Mapping[str, Dimension]
                  ) -> dict[str, optuna.distributions.BaseDistribution]:
    return {k: distribution(d) for k, d in space.items()}


STEPS_PER_RUNG = 100  # pruner steps in the first rung: each evaluation a step of its own
PRUNE_ON = "dev_ppl"  # the curve value the rungs compare: -ln of its best so far is reported
RULE = f"{PRUNE_ON}-by-rung-after-warmup"  # names the study: one pruned by another rule is
# not reused


def rung_unit(base: Point, search: Search) -> float:
    """FLOPs per pruner step: the first rung, budget / eta^(rungs - 1), is STEPS_PER_RUNG."""
    return base.options.budget_flops / search.eta ** (search.rungs - 1) / STEPS_PER_RUNG


def last_step(search: Search) -> int:
    """The pruner step of the budget, the last rung: past it nothing is reported."""
    return STEPS_PER_RUNG * search.eta ** (search.rungs - 1)


def storage_url(search: Search, out_dir: Path, storage: str | None = None) -> str:
    """The URL of the search's studies: `storage` as given, or <out>/NAME/optuna.db."""
    if storage:
        return storage
    path = results_path(out_dir, search.name).parent / "optuna.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def shown(url: str) -> str:
    """A storage URL as a line may show it: a SQLite file's path; another without password."""
    try:
        parsed = make_url(url)
    except (SQLAlchemyError, ValueError):
        return "the study storage given"
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        return parsed.database
    return parsed.render_as_string(hide_password=True)


@contextmanager
def _quiet() -> Iterator[None]:
    """Optuna's heartbeat is experimental: its warning at every use says nothing new."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def storage(url: str, heartbeat: int = HEARTBEAT) -> optuna.storages.RDBStorage:
    """The studies' storage, with Optuna's heartbeat: a trial under way beats every
    `heartbeat` seconds; one silent for GRACE of them is failed by the next process that
    asks, and asked again (RETRY, up to RETRIES times, its new trial naming the dead one).
    Processes opening a new database together race to create its tables (PostgreSQL
    refuses the second CREATE TABLE): the loser opens it again, once the tables are there."""
    callback = "failed_trial_callback" if RETRY is optuna.storages.RetryFailedTrialCallback \
        else "heartbeat_stale_trial_callback"
    # SQLite: processes (and their heartbeats) wait their turn to write rather than fail
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}

    def opened() -> optuna.storages.RDBStorage:
        with _quiet():
            return optuna.storages.RDBStorage(
                url, engine_kwargs=engine, heartbeat_interval=heartbeat,
                grace_period=GRACE * heartbeat, **{callback: RETRY(max_retry=RETRIES)})

    for attempt in range(OPEN_ATTEMPTS - 1):
        try:
            return opened()
        except (IntegrityError, ProgrammingError):  # another process's tables, half made
            time.sleep(1 + attempt)
    return opened()


def study(search: Search, model: str, out_dir: Path, storage_: str | None = None,
          heartbeat: int = HEARTBEAT) -> optuna.Study:
    """The model's study in its storage (storage_url), told the rows it lacks, its dead
    trials failed and asked again, with a TPE sampler seeded by its trials so far."""
    url = storage_url(search, out_dir, storage_)
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a failed trial: our line, no trace
    try:
        st = optuna.create_study(
            study_name=f"{search.name}-{model}-{RULE}", storage=storage(url, heartbeat),
            load_if_exists=True, direction="maximize",
            pruner=RungPruner(STEPS_PER_RUNG, search.eta))
    except (SQLAlchemyError, optuna.exceptions.StorageInternalError, RuntimeError, ValueError,
            ImportError) as exc:  # damaged, another version's, a server that is not there
        why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
        if url.startswith("sqlite"):
            raise BadInput(f"{shown(url)}: not a study Optuna {optuna.__version__} can open "
                           f"({why}); move it aside to start the search again") from None
        raise BadInput(f"--storage {shown(url)}: Optuna {optuna.__version__} cannot open the "
                       f"studies there ({why})") from None
    base = next(b for b in search.base if b.subject == model)
    _tell_rows(st, out_dir, search.name, model, search.space[model],
               rung_unit(base, search), last_step(search))
    revive(st)
    # seeded by the trials so far, told ones included: a restarted or rebuilt search does
    # not replay its first draws (a replayed recipe is a trial already run); each trial of a
    # search reseeds it by its own number (tune_model's objective)
    st.sampler = sampler(search, len(st.get_trials(deepcopy=False)))
    return st


def sampler(search: Search, seed: int) -> optuna.samplers.TPESampler:
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=search.startup)


def revive(st: optuna.Study) -> None:
    """Fail the trials whose heartbeat went silent (asked again by the storage's callback),
    then beat once for each trial still RUNNING: Optuna never takes a trial that has no
    heartbeat for dead (one asked outside Study.optimize, or by a harness before heartbeats),
    so such a trial goes silent a grace period later, if nothing beats for it, and is asked
    again; a trial under way beats on, and loses nothing. At a process's start only: beaten
    at every look, a dead trial would never go silent."""
    fail_stale(st)
    beats = st._storage  # the study's storage (Optuna's own fail_stale_trials reads it so)
    for t in st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        beats.record_heartbeat(beats.get_trial_id_from_study_id_trial_number(
            beats.get_study_id_from_name(st.study_name), t.number))


def fail_stale(st: optuna.Study) -> None:
    """Optuna's: fail each trial silent for a grace period, which its callback asks again."""
    with _quiet():
        optuna.storages.fail_stale_trials(st)


@contextmanager
def _study_errors(url: str) -> Iterator[None]:
    """A study that fails under a running search (its database damaged, replaced, its disk
    full, its server gone): one line; the rows written so far are kept, and a rerun
    rebuilds the study."""
    try:
        yield
    except (SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
        raise click.ClickException(
            f"{shown(url)}: the study failed ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0]}); every finished trial is in results.csv: move the "
            "study aside and run the same command to rebuild it from them") from None


def counts(st: optuna.Study) -> dict[str, int]:
    """The study's trials by state, as Optuna holds them."""
    trials = st.get_trials(deepcopy=False)
    return {s: sum(t.state.name == s for t in trials) for s in STATES}


def finished(st: optuna.Study) -> int:
    """The finished (completed or pruned) trials, each point once: a row told twice (two
    processes rebuilding one study together) or a known recipe enqueued by two processes at
    once still counts once."""
    return len({t.user_attrs.get("point_id", f"#{t.number}") for t in st.get_trials(
        deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                optuna.trial.TrialState.PRUNED))})


def room(st: optuna.Study, trials: int, heartbeat: int, line: str) -> bool:
    """Whether this process may start another trial: fewer than `trials` finished (each
    point once) or under way. When the rest are under way in other processes, one of them
    may be dead with its heartbeat not yet silent for long: wait one grace period, so a dead
    one is failed and asked again (and run here), then look again."""
    fail_stale(st)
    done = finished(st)
    running = len(st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))
    if done >= trials or done + running < trials:
        return done < trials
    wait = (GRACE + 1) * heartbeat
    say(f"{line}: {running} trial(s) under way in other processes; {wait} s to tell a dead one "
        "by its silent heartbeat")
    time.sleep(wait)
    fail_stale(st)
    running = len(st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))
    return finished(st) + running < trials


class NoResult(Exception):
    """A trial whose point left no result (an error row): failed, and counted in a row."""


def tune_model(search: Search, base: Point, out_dir: Path, device: torch.device,
               tracking_uri: str | None, trials: int, progress: bool,
               storage_: str | None = None, heartbeat: int = HEARTBEAT) -> optuna.Study:
    """Trials of one model, run by Optuna's Study.optimize (a trial at a time, its heartbeat
    beating), until `trials` of them have finished (completed or pruned) or are under way."""
    space = search.space[base.subject]
    if not base.options.budget_flops > 0:
        raise BadInput(f"search {search.name!r}: its {base.subject} trials have no FLOP "
                       "budget (budget_flops), which its pruner's rungs are fractions of")
    unit, last = rung_unit(base, search), last_step(search)
    folder = results_path(out_dir, search.name).parent
    url = storage_url(search, out_dir, storage_)
    line = f"{search.name} {base.subject}"
    with _study_errors(url):
        older = _older_rule(out_dir, search.name, base.subject, space, unit, last)
        st = study(search, base.subject, out_dir, storage_, heartbeat)
        for recipe in [*search.known.get(base.subject, ()), *older.values()]:
            st.enqueue_trial(dict(recipe), skip_if_exists=True)  # once each, first
        asked: list[int] = []  # the trial of the current round

        def objective(trial: optuna.Trial) -> float:
            asked.append(trial.number)
            st.sampler = sampler(search, trial.number)  # drawn alike by no two trials
            point = with_recipe(base, {k: suggest(trial, k, d) for k, d in space.items()})
            trial.set_user_attr("point_id", point.point_id)
            run_suite(search.name, [point], device, out_dir, tracking_uri, progress=progress,
                      description=f"tuning search {search.name}: trial {trial.number} of "
                                  f"{base.subject}",
                      prune=_pruner(trial, unit, last, warmup_steps(point.options)),
                      redo=frozenset(older) & {point.point_id})
            outcome = _outcome(out_dir, search.name, point)
            if outcome.get("state") == optuna.trial.TrialState.PRUNED:
                raise optuna.TrialPruned()
            if outcome.get("state") == optuna.trial.TrialState.FAIL:
                raise NoResult(point.point_id)
            return outcome["values"]

        failed = 0
        while True:
            if failed == MAX_FAILED:
                raise click.ClickException(
                    f"{failed} trials of {base.subject} in a row ended without a result; see "
                    f"{folder / 'errors.log'}")
            if not room(st, trials, heartbeat, line):
                break
            asked.clear()
            try:  # Optuna's loop, one trial: stale trials failed, asked, beating, told
                st.optimize(objective, n_trials=1, catch=(NoResult,))
            except KeyboardInterrupt:  # stopped: failed by Optuna, asked again at once
                if asked:
                    retry(st, asked[0])
                raise
            except Exception:
                if not asked or not _taken_for_dead(st, asked[0]):
                    raise
                say(f"{line}: Optuna trial {asked[0]} was taken for dead (its heartbeat "
                    "stalled: its process stopped for a while) and asked again; its row stays")
                continue
            failed = failed + 1 if st.trials[asked[0]].state \
                == optuna.trial.TrialState.FAIL else 0
            say(_told(st, asked[0], base.subject, search.name,
                      read_results(results_path(out_dir, search.name))))
    return st


def suggest(trial: optuna.Trial, key: str, dim: Dimension) -> Any:
    """The trial's value of `key`: its recipe's where it has one (enqueued, or asked again),
    else the sampler's draw from the dimension."""
    kind, *args = dim
    if kind in ("log", "float"):
        return trial.suggest_float(key, args[0], args[1], log=kind == "log")
    if kind in ("int", "int-log"):
        return trial.suggest_int(key, args[0], args[1], log=kind == "int-log")
    if kind == "choice":
        return trial.suggest_categorical(key, list(args[0]))
    raise ValueError(f"unknown search dimension {dim!r}")


def retry(st: optuna.Study, number: int) -> None:
    """Ask a failed trial again, as the storage's callback asks a dead one (its new trial
    names it: retried); one not failed (stopped before Optuna told it) is left to its
    heartbeat, which has stopped."""
    trial = st.trials[number]
    if trial.state == optuna.trial.TrialState.FAIL:
        with _quiet():
            RETRY()(st, trial)


def retried(trial: optuna.trial.FrozenTrial) -> int | None:
    """The number of the failed trial this one asks again (RETRY's), None for a new one."""
    with _quiet():
        return RETRY.retried_trial_number(trial)


def _taken_for_dead(st: optuna.Study, number: int) -> bool:
    """Whether the trial was failed under its live process, its heartbeat silent too long
    (the process stopped: Ctrl-Z, a suspended machine), and asked again: Optuna's tell of
    its result then fails."""
    return st.trials[number].state == optuna.trial.TrialState.FAIL and any(
        retried(t) == number for t in st.get_trials(deepcopy=False))


def _tell_rows(st: optuna.Study, out_dir: Path, name: str, model: str,
               space: Mapping[str, Dimension], unit: float, last: int) -> None:
    """Tell the study each row of `model` that none of its trials names (by its point id,
    or by its config_key: a trial of older code's id; a point's last row): finished, with
    its value, or pruned, with the reports its pruning hook made (the sampler ranks a
    pruned trial by its last). Left out: an error row, a recipe outside
    today's space, and a trial pruned by an older rule (_older_rule): where that rule pruned
    by chance, the sampler would learn its recipe is bad. The pruner's rungs read the told
    trials' reports as they read those of trials it measured."""
    known = {t.user_attrs.get("point_id") for t in st.get_trials(deepcopy=False)}
    dists = distributions(space)
    told = 0
    for row, curve in trial_rows(out_dir, name, model):
        outcome = _outcome_of(row)
        reports = _reports(curve, unit, last, _warmup(row))
        if {row["point_id"], config_key_of(row)} & known \
                or outcome.get("state") == optuna.trial.TrialState.FAIL \
                or (outcome.get("state") == optuna.trial.TrialState.PRUNED and not reports):
            continue
        try:  # Optuna checks each value against its range
            trial = optuna.trial.create_trial(
                params=recipe_of(row, space), user_attrs={"point_id": row["point_id"]},
                distributions=dists, intermediate_values=reports,
                state=outcome.get("state", optuna.trial.TrialState.COMPLETE),
                value=outcome.get("values"))
        except (ValueError, BadInput) as exc:
            say(f"{name} {model}: trial row {row['point_id']} not told to the study ({exc})")
            continue
        st.add_trial(trial)
        told += 1
    if told:
        say(f"{name} {model}: {told} trials told to the study from the rows")


def trial_rows(out_dir: Path, name: str, model: str) -> Iterator[tuple[pd.Series, Curve]]:
    """Each point's last row of `model` in the search, with its stored curve."""
    rows = read_results(results_path(out_dir, name))
    if rows.empty or "model" not in rows:
        return
    series = read_series(out_dir, name) if series_path(out_dir, name).exists() else \
        pd.DataFrame()
    curves = {p: {m: list(zip(g["step"], g["value"], strict=True)) for m, g in c.groupby("metric")}
              for p, c in series.groupby("point_id")} if not series.empty else {}
    for _, row in rows[rows["model"] == model].drop_duplicates("point_id", keep="last").iterrows():
        yield row, curves.get(row["point_id"], {})


def _older_rule(out_dir: Path, name: str, model: str, space: Mapping[str, Dimension],
                unit: float, last: int) -> dict[str, dict[str, Any]]:
    """point id -> recipe of each trial of `model` pruned by an older rule: its curve has no
    report today's rule would have made (none of PRUNE_ON, or none past its warm-up), so
    today's pruner could not have stopped it. A recipe outside today's space is left out."""
    out: dict[str, dict[str, Any]] = {}
    for row, curve in trial_rows(out_dir, name, model):
        if _outcome_of(row).get("state") != optuna.trial.TrialState.PRUNED \
                or _reports(curve, unit, last, _warmup(row)):
            continue
        try:
            recipe = recipe_of(row, space)
        except BadInput:
            continue
        if all(_inside(space[k], v) for k, v in recipe.items()):
            out[str(row["point_id"])] = recipe
    return out


def _inside(dim: Dimension, value: Any) -> bool:
    kind, *args = dim
    return value in args[0] if kind == "choice" else args[0] <= value <= args[1]


def trial_number(rows: pd.DataFrame, model: str, point_id: Any) -> int | None:
    """A trial's number as search.md and the search figure give it: the place of its row
    among the model's rows, from 0 (Optuna's own numbers also count the trials cut short
    and asked again); None for a trial with no row. A trial of older code names its row by
    the row's config_key."""
    if rows.empty or "model" not in rows:
        return None
    mine = rows[rows["model"] == model]
    at = [i for i, ids in enumerate(zip(mine["point_id"], config_keys(mine), strict=True))
          if point_id in ids]
    return at[-1] if at else None


def _told(st: optuna.Study, number: int, model: str, name: str, rows: pd.DataFrame) -> str:
    """One line on a trial just told, numbered by its row (trial_number): how it ended, its
    value (a pruned one: the dev perplexity it had reached), the best so far."""
    t = st.trials[number]
    value = "" if t.value is None else f", best dev BLEU {t.value:.2f}"
    if t.state == optuna.trial.TrialState.PRUNED:  # Optuna's value: its last report
        last = t.intermediate_values[max(t.intermediate_values)] \
            if t.intermediate_values else None
        value = "" if last is None else f", dev perplexity {math.exp(-last):.1f}"
    k = trial_number(rows, model, t.user_attrs.get("point_id"))
    best = best_row(rows, model)
    return (f"{name} {model}: " + (f"trial {k}" if k is not None else
                                   f"Optuna trial {number} (no row)")
            + f" {t.state.name.lower()}{value}"
            + (f"; best so far trial {trial_number(rows, model, best['point_id'])} "
               f"({float(best[KEY]):.2f})" if best is not None else ""))


FLOOR = -700.0  # reported for a curve whose perplexity is all infinite (a runaway model)


def _pruner(trial: optuna.Trial, unit: float, last: int, warmup: int = 0
            ) -> Callable[[Point, int, Curve], bool]:
    """The trial's pruning hook: report -ln of the best dev perplexity on the curve so far
    (a resumed run's included; higher is better, as the study's direction; FLOOR where none
    is finite) at each FLOP step (one value per step: a tiny run's evaluations may share
    one), then ask the pruner; not before the update `warmup` (the learning rate's peak),
    and never at or past the last rung (`last` steps: the budget), where a trial has spent
    what it may and finished."""
    reported: set[int] = set()

    def prune(point: Point, flops: int, curve: Curve) -> bool:
        value, step = _value(curve), int(flops // unit)
        if value is None or step in reported or step >= last \
                or curve[PRUNE_ON][-1][0] < warmup:
            return False
        reported.add(step)
        trial.report(value, step)
        return trial.should_prune()

    return prune


def _value(curve: Curve) -> float | None:
    """What the pruning hook reports for a curve: -ln of its best PRUNE_ON, FLOOR where
    that is infinite; None where it has none yet."""
    ppl = [v for _, v in curve.get(PRUNE_ON, []) if not math.isnan(v)]
    return max(FLOOR, -math.log(min(ppl))) if ppl else None


def _reports(curve: Curve, unit: float, last: int, warmup: int = 0) -> dict[int, float]:
    """A stored curve's pruner reports, as its hook made them: at each evaluation after the
    first and from the update `warmup` on, by FLOP step, the first evaluation of a step only."""
    flops, ppl = dict(curve.get("train_flops", [])), curve.get(PRUNE_ON, [])
    out: dict[int, float] = {}
    for i, (step, _) in enumerate(ppl):
        k = int(flops.get(step, 0) // unit)
        if step and step >= warmup and k < last and k not in out:
            value = _value({PRUNE_ON: ppl[:i + 1]})
            if value is not None:
                out[k] = value
    return out


def _warmup(row: pd.Series) -> int:
    """A trial row's warm-up in updates (0 where the row has none)."""
    value = pd.to_numeric(row.get("warmup_steps"), errors="coerce")
    return 0 if pd.isna(value) else int(value)


def _outcome(out_dir: Path, name: str, point: Point) -> dict[str, Any]:
    """Optuna's tell() arguments from the trial's row: its value, pruned, or failed."""
    rows = read_results(results_path(out_dir, name))
    row = rows[rows["point_id"] == point.point_id].iloc[-1:] if not rows.empty else rows
    return {"state": optuna.trial.TrialState.FAIL} if row.empty else _outcome_of(row.iloc[0])


def _outcome_of(row: pd.Series) -> dict[str, Any]:
    """A trial row as tell() arguments: its curve's best dev BLEU (a diverged run's, or 0),
    pruned, or failed (an error row, or none of the value)."""
    failed = {"state": optuna.trial.TrialState.FAIL}
    if row.get("status") not in ("ok", "diverged"):
        return failed
    value = pd.to_numeric(row.get(KEY), errors="coerce")
    if row["status"] == "diverged":  # a bad recipe: its curve's best, or nothing
        return {"values": 0.0 if pd.isna(value) else float(value)}
    if str(row.get("stopped_by", "")) == "pruned":
        return {"state": optuna.trial.TrialState.PRUNED}
    return failed if pd.isna(value) else {"values": float(value)}


def bases(search: Search, only: tuple[str, ...]) -> list[Point]:
    names = [b.subject for b in search.base]
    unknown = [m for m in only if m not in names]
    if unknown:
        raise BadInput(f"--only {unknown[0]!r}: not a model of search {search.name!r}; "
                       f"valid: {', '.join(names)}")
    return [b for b in search.base if not only or b.subject in only]
