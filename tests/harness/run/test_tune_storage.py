"""`tvr tune` on a study in PostgreSQL, as processes on several machines share one: two real
`tvr tune` processes (each with its own --out, as on two machines) on a real PostgreSQL
cluster on loopback, one killed with SIGKILL mid-trial. Optuna's heartbeat finds the dead
trial, its retry callback asks it again, and the survivor runs it: every trial counts once."""

from __future__ import annotations

import signal
import time

import optuna
import pytest

import experiments
from harness.results import read_results, results_path
from harness.run import tune
from tests.harness.run.test_server import PG_BIN, postgres  # noqa: F401 - the fixture
from tests.prestart import tvr

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PG_BIN is None, reason="PostgreSQL server binaries are absent "
                                 "(Debian: apt-get install postgresql)")]

SEARCH, MODEL, TRIALS = "translation-tiny-tune", "lstm", 3


def _study(storage: optuna.storages.RDBStorage) -> optuna.Study | None:
    try:
        return optuna.load_study(study_name=f"{SEARCH}-{MODEL}-{tune.RULE}", storage=storage)
    except KeyError:  # not created yet
        return None


def _running(storage: optuna.storages.RDBStorage) -> list[optuna.trial.FrozenTrial]:
    st = _study(storage)
    return [] if st is None else [
        t for t in st.get_trials(states=(optuna.trial.TrialState.RUNNING,))
        if "point_id" in t.user_attrs]  # its point under way


def test_two_processes_on_one_postgresql_study_survive_one_killed_mid_trial(postgres, tmp_path):  # noqa: F811
    args = ("tune", SEARCH, "--only", MODEL, "--trials", str(TRIALS), "--storage", postgres,
            "--heartbeat", "1", "--tracking-uri", "none")
    # started together on a database with no tables yet: they race to create them
    first = tvr(tmp_path / "a", *args, machine="machine-a")
    second = tvr(tmp_path / "b", *args, machine="machine-b")
    try:
        db = tune.storage(postgres)  # a third to open it, while they do
        deadline = time.monotonic() + 300
        while len(_running(db)) < 2:  # both mid-trial
            assert first.poll() is None and second.poll() is None, "a process ended early"
            assert time.monotonic() < deadline, "the two processes never ran trials together"
            time.sleep(0.2)
        second.send_signal(signal.SIGKILL)
        assert second.wait(30) == -signal.SIGKILL
        out, _ = first.communicate(timeout=600)
    finally:
        for proc in (first, second):
            proc.kill()  # a no-op for a process that has ended
    assert first.returncode == 0, out
    trials = _study(db).get_trials()
    (dead,) = [t for t in trials if t.state.name == "FAIL"]  # the killed process's trial
    (again,) = [t for t in trials if tune.retried(t) == dead.number]
    assert again.state.name in ("COMPLETE", "PRUNED") and again.params == dead.params
    assert again.user_attrs["point_id"] == dead.user_attrs["point_id"]
    finished = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(finished) == TRIALS == tune.finished(_study(db))  # each once
    assert not [t for t in trials if t.state.name in ("RUNNING", "WAITING")]
    # a row per finished trial, on the machine that ran it: the dead one's on the survivor's
    rows = {m: read_results(results_path(tmp_path / m, SEARCH)) for m in ("a", "b")
            if results_path(tmp_path / m, SEARCH).exists()}
    assert again.user_attrs["point_id"] in set(rows["a"]["point_id"])
    assert {p for r in rows.values() for p in r["point_id"]} == \
        {t.user_attrs["point_id"] for t in finished}
    assert len(rows["a"]) == len(set(rows["a"]["point_id"]))
    s = experiments.SEARCHES[SEARCH]()
    assert tune.storage_url(s, tmp_path / "a", postgres) == postgres
    assert not (tmp_path / "a" / SEARCH / "optuna.db").exists()  # the study is in PostgreSQL
