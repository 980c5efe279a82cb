"""The study's pruners: a rule applied rung by rung.

A trial reports one value per rung (steps 0..P-1: the prefixes of the first seed, shortest first; step P: the
whole first seed). Both rules compare a trial's value *at its last rung* with other trials' values at the same
rung. Optuna's `PercentilePruner` compares the trial's best value over all its steps instead (a learning curve's
rule): for rungs that measure different things — a prefix and a whole replay — that lets a good prefix excuse a
bad whole replay.

- `RungPruner` (one prefix rung: traces whose replays are cheap): stopped when worse than the
  `keep_percentile`-th percentile of the *completed* trials' values at that rung, once `startup_trials` trials
  have completed. The first `startup_trials` trials replay every seed.
- `HalvingPruner` (several prefix rungs: large traces, where a whole replay costs a minute): successive halving,
  with Optuna's `SuccessiveHalvingPruner`'s promotion rule over our rungs: a trial goes on only when its value is
  among the best `1 / factor` of the values every trial reported at that rung so far, itself included (while
  fewer than `factor` trials have reported there, only when it is the best so far). No trial is exempt, so the
  study's cost is about `factor / (factor - 1)` times the first rung's for every trial, whatever the trace size.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

__all__ = ["HalvingPruner", "RungPruner"]


class RungPruner(optuna.pruners.BasePruner):
    """Stops a trial whose value at its last rung is in the worst `100 - keep_percentile` % of the completed
    trials' values at that rung (after `startup_trials` completed trials; a NaN value is always stopped)."""

    def __init__(self, keep_percentile: float, startup_trials: int) -> None:
        if not 0.0 <= keep_percentile <= 100.0:
            raise ValueError(f"keep_percentile must be in [0, 100], got {keep_percentile}")
        self.keep_percentile = keep_percentile
        self.startup_trials = startup_trials

    def prune(self, study: Any, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None:
            return False
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if len(done) < self.startup_trials:
            return False
        value = trial.intermediate_values[step]
        if math.isnan(value):
            return True
        others = [t.intermediate_values[step] for t in done if step in t.intermediate_values]
        if not others:
            return False
        if study.direction == StudyDirection.MAXIMIZE:
            return bool(value < float(np.nanpercentile(others, 100.0 - self.keep_percentile)))
        return bool(value > float(np.nanpercentile(others, self.keep_percentile)))


class HalvingPruner(optuna.pruners.BasePruner):
    """Lets a trial past its last rung only when its value there is among the best `1 / factor` of the values
    all trials (any state, itself included) reported at that rung; a NaN value is always stopped."""

    def __init__(self, factor: int) -> None:
        if factor < 2:
            raise ValueError(f"factor must be >= 2, got {factor}")
        self.factor = factor

    def prune(self, study: Any, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None:
            return False
        value = trial.intermediate_values[step]
        if math.isnan(value):
            return True
        others = [
            t.intermediate_values[step]
            for t in study.get_trials(deepcopy=False)
            if t.number != trial.number and step in t.intermediate_values
        ]
        competing = sorted(v for v in [value, *others] if not math.isnan(v))
        if study.direction == StudyDirection.MAXIMIZE:
            competing.reverse()
        keep = max(len(competing) // self.factor, 1)
        bar = competing[keep - 1]
        return bool(value < bar) if study.direction == StudyDirection.MAXIMIZE else bool(value > bar)
