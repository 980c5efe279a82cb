"""Prefix rungs for large traces: their layout, the halving rule, and what a study replays with them."""

from __future__ import annotations

import dataclasses

import optuna
import pytest

from base.errors import BadInputError
from tests.tuner._runner import config as fake_config
from tests.tuner.fakes import FakeEvaluator
from tuner.pruning import HalvingPruner
from tuner.study import prefix_rungs, run_study


def test_rungs_go_below_the_prefix_while_they_replay_enough_requests():
    assert prefix_rungs(0.25, 1_000_000, 150_000) == (0.25,)  # 62 500 requests would be too few
    assert prefix_rungs(0.25, 3_000_000, 150_000) == (0.0625, 0.25)
    assert prefix_rungs(0.25, 10_000_000, 150_000) == (0.015625, 0.0625, 0.25)
    assert prefix_rungs(0.25, 10_000_000, 1) == prefix_rungs(0.25, 10_000_000, 1)  # deterministic
    assert prefix_rungs(0.25, 9_600_000, 150_000) == (0.015625, 0.0625, 0.25)  # 150 000 exactly: kept
    assert prefix_rungs(0.0, 10_000_000, 150_000) == ()
    assert prefix_rungs(0.25, 10_000_000, 150_000, factor=1) == (0.25,)


def test_rungs_must_rise_to_the_prefix():
    cfg = fake_config("memory", trials=2, delay_s=0.0)
    with pytest.raises(BadInputError, match="rungs"):
        dataclasses.replace(cfg, prefix=0.25, rungs=(0.25, 0.0625))
    with pytest.raises(BadInputError, match="rungs"):
        dataclasses.replace(cfg, prefix=0.25, rungs=(0.0625, 0.125))
    ok = dataclasses.replace(cfg, prefix=0.25, rungs=(0.0625, 0.25))
    assert ok.prefixes == (0.0625, 0.25)
    assert dataclasses.replace(cfg, prefix=0.25).prefixes == (0.25,)
    assert type(ok).from_json(ok.to_json()).prefixes == (0.0625, 0.25)


def _report(study: optuna.Study, value: float, step: int = 0) -> bool:
    t = study.ask()
    t.report(value, step)
    return t.should_prune()


def test_halving_keeps_the_best_quarter_of_a_rung():
    """Optuna's successive-halving promotion rule at our rungs: with fewer than `factor` values at the rung only
    the best so far goes on; then the best `n // factor` of the n values, the trial's own included."""
    study = optuna.create_study(direction="minimize", pruner=HalvingPruner(4))
    assert not _report(study, 10.0)  # alone: the best so far
    assert _report(study, 11.0)  # 2 values, not the best
    assert not _report(study, 9.0)  # 3 values, the best
    assert _report(study, 9.5)  # 4 values: only the best one (9.0) goes on
    assert not _report(study, 1.0)
    for v in (20.0, 21.0, 22.0):  # 8 values: the best two go on (1.0 and 9.0)
        assert _report(study, v)
    assert _report(study, 9.2)  # 9 values, best two: 1.0, 9.0
    assert not _report(study, 8.0)  # 10 values, best two: 1.0, 8.0
    assert _report(study, float("nan"))
    # another rung is judged on its own values
    assert not _report(study, 50.0, step=1)


def test_halving_maximize():
    study = optuna.create_study(direction="maximize", pruner=HalvingPruner(2))
    assert not _report(study, 1.0)
    assert not _report(study, 2.0)  # 2 values: the best one
    assert _report(study, 0.5)


def test_a_study_on_several_rungs_replays_a_fraction_of_every_trial():
    """Three prefix rungs and the whole first seed, halving by 4: every trial replays the shortest prefix, few go
    further, and a completed trial's replays add up its rungs and seeds."""
    ev = FakeEvaluator()
    rungs = (0.015625, 0.0625, 0.25)
    cfg = dataclasses.replace(fake_config("memory", trials=40, delay_s=0.0), prefix=0.25, rungs=rungs)
    out = run_study(cfg, evaluator=ev)
    trials = [t for t in out.study.get_trials(deepcopy=False) if "infeasible" not in t.user_attrs
              and "cached_from" not in t.user_attrs]
    assert len(trials) >= 10
    reached = [sum(1 for t in trials if step in t.intermediate_values) for step in range(len(rungs) + 1)]
    assert reached[0] == len(trials)
    assert reached == sorted(reached, reverse=True) and reached[-1] < reached[0] / 2, reached
    expected = {0: rungs[0], 1: sum(rungs[:2]), 2: sum(rungs), 3: sum(rungs) + 1}
    for t in trials:
        if t.state.name == "PRUNED":
            assert t.user_attrs["replays"] == pytest.approx(expected[t.last_step])
        else:
            assert t.state.name == "COMPLETE"
            assert t.user_attrs["replays"] == pytest.approx(sum(rungs) + len(cfg.seeds))
    whole = sum(float(t.user_attrs["replays"]) for t in trials)
    assert whole < 0.5 * len(trials) * (0.25 + len(cfg.seeds)), "halving must replay far less than every seed"
    fractions = sorted({f for (_, _, f) in ev.calls})
    assert fractions == [*rungs, 1.0]
