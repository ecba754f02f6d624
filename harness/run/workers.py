"""Processes tuning one model on one Optuna study together (`tvr tune` run more than once):
each holds a worker slot, a file lock in the search's folder, and names it on its trials."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import optuna
from filelock import FileLock, Timeout

from harness.console import say
from harness.errors import BadInput

MAX_WORKERS = 16  # processes tuning one model at once


@dataclass
class Worker:
    """One process among those tuning a model on one study (Optuna's parallel search: more
    processes, one per core, each asking the study for its next trial). Each holds a slot
    (a file lock; slot 0 the first's), and its trials name it, so a RUNNING trial whose
    slot is free, or is this process's own before it asked anything, was left by a process
    that is gone. The study is changed under a lock shared by all (`setup`): the one that
    runs alone tidies it, and a trial is counted and asked by one process at a time."""

    slot: int
    alone: bool
    locks: list[FileLock]
    setup: FileLock

    def requeue_dead(self, st: optuna.Study) -> None:
        """Trials left RUNNING by a process that is gone: failed, their recipe asked again."""
        for t in st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            k = int(t.user_attrs.get("slot", 0))  # trials asked before slots: the first's
            if k == self.slot or k >= len(self.locks) or _took(self.locks[k], release=True):
                st.tell(t.number, state=optuna.trial.TrialState.FAIL)
                st.enqueue_trial(t.params, skip_if_exists=False)


@contextmanager
def worker(folder: Path, name: str, model: str) -> Iterator[Worker]:
    """A free slot among the processes tuning `model`, and whether it is the only one."""
    folder.mkdir(parents=True, exist_ok=True)
    locks = [FileLock(str(folder / f".tune-{model}{f'.{k}' if k else ''}.lock"))
             for k in range(MAX_WORKERS)]
    setup = FileLock(str(folder / f".tune-{model}.setup.lock"))
    with setup:
        mine = next((k for k, lock in enumerate(locks) if _took(lock)), None)
        if mine is None:
            raise BadInput(f"search {name!r} of {model} has {MAX_WORKERS} processes "
                           "running already; wait for one to end")
        others = [k for k, lock in enumerate(locks)
                  if k != mine and not _took(lock, release=True)]
    if others:
        say(f"{name} {model}: joining {len(others)} other process(es) on its study")
    try:
        yield Worker(mine, not others, locks, setup)
    finally:
        locks[mine].release()


def _took(lock: FileLock, release: bool = False) -> bool:
    """Whether `lock` was free (and is now held, unless `release`)."""
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    if release:
        lock.release()
    return True
