"""The tuning search's pruner (harness.run.tune): asynchronous successive halving over the
reports Optuna stores, each trial judged at the rung its report falls in."""

from __future__ import annotations

import math

import optuna

# the trials whose reports a rung compares: a failed one (cut short) is asked again, and its
# reports would count twice
LIVE = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
        optuna.trial.TrialState.RUNNING)


class RungPruner(optuna.pruners.BasePruner):
    """Asynchronous successive halving (ASHA) for a maximised report, where each trial is
    compared only at the rung its report falls in. Rung k spans the steps [min_resource *
    eta^k, min_resource * eta^(k+1)); a trial's value there is its first report in that span;
    it is promoted if that value is in the top 1/eta (at least the best one) of the values of
    every trial of the study with a report in the span (told ones included), its own too.

    Why not Optuna's SuccessiveHalvingPruner: a trial's first report counts there at every
    rung below its step too (Optuna records it in trial system attributes), so a trial judged
    only after a long warm-up would be ranked by its late value against the others' early
    ones; and a trial told to a rebuilt study never competes (its rung records are Optuna's
    own). Here the rungs are read from the reports themselves."""

    def __init__(self, min_resource: int, eta: int) -> None:
        self.min_resource, self.eta = min_resource, eta

    def rung(self, step: int) -> int:
        """The rung whose span holds `step`; -1 below the first."""
        k = -1
        while step >= self.min_resource * self.eta ** (k + 1):
            k += 1
        return k

    def value_at(self, trial: optuna.trial.FrozenTrial, k: int) -> tuple[int, float] | None:
        """(step, value) of the trial's first report in rung k's span, None if none."""
        steps = sorted(s for s in trial.intermediate_values if self.rung(s) == k)
        return (steps[0], trial.intermediate_values[steps[0]]) if steps else None

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        step = trial.last_step
        if step is None or (k := self.rung(step)) < 0 or self.value_at(trial, k)[0] != step:
            return False  # before the first rung, or judged at this rung already
        value = trial.intermediate_values[step]
        if math.isnan(value):
            return True
        values = [v[1] for t in study.get_trials(deepcopy=False, states=LIVE)
                  if t.number != trial.number and (v := self.value_at(t, k)) is not None
                  and not math.isnan(v[1])]
        top = sorted([*values, value], reverse=True)[:max(1, (len(values) + 1) // self.eta)]
        return value < top[-1]
