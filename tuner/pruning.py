"""The study's pruner: a percentile rule applied rung by rung.

A trial reports one value per rung (step 0: the prefix of the first seed; step 1: the whole first seed). At a
rung the trial is stopped when its value *at that rung* is worse than the `keep_percentile`-th percentile of the
completed trials' values at the same rung, once `startup_trials` trials have completed. Optuna's
`PercentilePruner` compares the trial's best value over all its steps instead (a learning curve's rule): for rungs
that measure different things — a prefix and a whole replay — that lets a good prefix excuse a bad whole replay.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

__all__ = ["RungPruner"]


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
