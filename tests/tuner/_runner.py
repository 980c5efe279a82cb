"""Run a fake-evaluator study from the command line (the kill -9 resume test starts this as a subprocess)."""

from __future__ import annotations

import sys

from tuner.evaluators import EvaluatorSpec
from tuner.kinds import space_for
from tuner.objective import parse_objective
from tuner.space import apply_overrides
from tuner.study import StudyConfig, run_study


def config(storage: str, trials: int, delay_s: float) -> StudyConfig:
    space = apply_overrides(space_for("cassandra"), {"rein.tau_1": {"fixed": 1.0}}, policies=["rein"])
    return StudyConfig(name="resume", storage=storage, evaluator=EvaluatorSpec("tests.tuner.fakes:make",
                       {"delay_s": delay_s}), space=space, objective=parse_objective("p99"), seeds=(0, 1),
                       trials=trials, startup_trials=3, prefix=0.0)


if __name__ == "__main__":
    storage, trials, delay, jobs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    run_study(config(storage, trials, delay), jobs=jobs)
