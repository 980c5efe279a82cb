"""A study whose trials all give the same p99 says why (`tuner.flat`): the model's servers are idle at the load."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.flat import IDLE, idle_reason
from tuner.kinds import tuner_kind


def _trial(p99: float, state: optuna.trial.TrialState = optuna.trial.TrialState.COMPLETE) -> Any:
    return optuna.trial.create_trial(
        state=state, value=p99 if state == optuna.trial.TrialState.COMPLETE else None,
        user_attrs={"metrics": {"p50_ms": 0.4, "p99_ms": p99}},
        distributions={}, params={},
    )


def test_equal_trials_to_within_rounding_say_the_servers_are_idle() -> None:
    remedy = tuner_kind("cassandra").idle_remedy
    reason = idle_reason([_trial(1.8204), _trial(1.8199), _trial(1.82)], remedy)
    assert reason == f"{IDLE} (3 trials, all 1.82 ms): {remedy}"
    assert "connection.jmx_port" in remedy and "--load" in remedy


def test_trials_that_differ_or_too_few_say_nothing() -> None:
    remedy = tuner_kind("memcached").idle_remedy
    assert idle_reason([_trial(1.82), _trial(1.84)], remedy) is None  # 1.82 vs 1.84: a knob moved the tail
    assert idle_reason([_trial(1.82)], remedy) is None  # one trial compares with nothing
    pruned = _trial(1.0, optuna.trial.TrialState.PRUNED)
    assert idle_reason([_trial(1.82), pruned], remedy) is None  # a pruned trial is no figure
