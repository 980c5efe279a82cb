"""Study mechanics on every storage backend, with the deterministic fake evaluator."""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import pytest

from base.errors import BadInputError
from tests.tuner._runner import config as fake_config
from tests.tuner.fakes import FakeEvaluator, fake_p99
from tuner.evaluators import EvaluatorSpec
from tuner.kinds import space_for
from tuner.objective import parse_objective
from tuner.space import Candidate, apply_overrides
from tuner.study import LOCK_GRACE_S, StudyConfig, open_storage, prepare_study, release_stale_lock, run_study

PAPER = Candidate("rein", {"k": 4, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0})


@pytest.fixture(params=["memory", "journal", "sqlite", "postgresql"])
def storage(request, tmp_path):
    if request.param == "postgresql":  # a fresh database on the session's throw-away PostgreSQL server
        with request.getfixturevalue("postgres_server").database() as url:
            yield url
        return
    yield {"memory": "memory", "journal": str(tmp_path / "j.log"),
           "sqlite": f"sqlite:///{tmp_path / 'optuna.db'}"}[request.param]


def _finished(study: Any) -> list[Any]:
    return [t for t in study.get_trials(deepcopy=False) if t.state.name in ("COMPLETE", "PRUNED")]


def test_study_runs_exact_budget_with_seeds_and_ci(storage):
    cfg = fake_config(storage, trials=12, delay_s=0.0)
    ev = FakeEvaluator()
    progress = []
    out = run_study(cfg, evaluator=ev, warm_start=[PAPER],
                    on_progress=lambda d, n, b: progress.append((d, n, b)))
    fin = _finished(out.study)
    assert len(fin) == 12 == out.finished
    first = out.study.trials[0]  # the warm-start paper default is trial 0
    assert first.user_attrs["candidate"]["params"]["k"] == 4
    # mean over seeds 0 and 1 of the known landscape: (2.00 + 2.01) / 2
    assert first.values[0] == pytest.approx(2.005)
    assert first.user_attrs["per_seed"] == [[2.0], [2.01]]
    assert first.user_attrs["ci"][0] > 0
    assert progress[-1][0] == 12 and progress[-1][2] == pytest.approx(2.005)
    for t in fin:
        if t.state.name == "COMPLETE":
            cand = Candidate.from_dict(t.user_attrs["candidate"])
            assert t.values[0] == pytest.approx((fake_p99(cand, 0) + fake_p99(cand, 1)) / 2)
        else:
            assert "infeasible" in t.user_attrs  # no prefix in this config: only infeasible trials prune


def test_cache_and_infeasible_do_not_replay(tmp_path):
    cfg = fake_config(str(tmp_path / "j.log"), trials=3, delay_s=0.0)
    ev = FakeEvaluator()
    bad = Candidate("rein", {**PAPER.params, "k": 8, "rate_step": 2.0})
    run_study(cfg, evaluator=ev, warm_start=[PAPER])
    s = prepare_study(cfg, open_storage(cfg.storage))
    s.enqueue_trial(cfg.space.optuna_params(PAPER))
    s.enqueue_trial(cfg.space.optuna_params(bad))
    calls = len(ev.calls)
    run_study(dataclasses.replace(cfg, trials=5), evaluator=ev)
    assert len(ev.calls) == calls  # neither the repeat nor the infeasible point was replayed
    t3, t4 = s.trials[3], s.trials[4]
    assert t3.user_attrs["cached_from"] == 0 and t3.values == s.trials[0].values
    assert t4.state.name == "PRUNED" and "rate_step" in t4.user_attrs["infeasible"]


def test_prefix_pruning_reports_intermediate(tmp_path):
    cfg = dataclasses.replace(fake_config(str(tmp_path / "j.log"), trials=20, delay_s=0.0), prefix=0.25,
                              startup_trials=3, keep_percentile=50.0)
    out = run_study(cfg, evaluator=FakeEvaluator())
    trials = out.study.get_trials(deepcopy=False)
    evaluated = [t for t in trials if "prefix_metrics" in t.user_attrs]
    assert evaluated and all(0 in t.intermediate_values for t in evaluated)
    pruned = [t for t in evaluated if t.state.name == "PRUNED"]
    assert pruned, "a median-keeping pruner must stop some of 20 trials"
    for t in pruned:
        assert "per_seed" not in t.user_attrs and t.user_attrs["replays"] == 0.25


def test_resume_keeps_finished_trials(storage):
    if storage == "memory":
        pytest.skip("in-memory studies do not outlive the process")
    cfg = fake_config(storage, trials=5, delay_s=0.0)
    first = run_study(cfg, evaluator=FakeEvaluator())
    before = {t.number: t.values for t in _finished(first.study)}
    again = run_study(dataclasses.replace(cfg, trials=9), evaluator=FakeEvaluator())
    fin = _finished(again.study)
    assert len(fin) == 9
    assert {t.number: t.values for t in fin if t.number in before} == before


def test_resume_removes_the_journal_lock_a_killed_run_left(tmp_path, caplog):
    # a kill -9 inside Optuna's append leaves `<journal>.lock`; Optuna's waiter would wait its 30 s grace period
    # from when it first sees the lock, however old the lock is
    cfg = fake_config(str(tmp_path / "j.log"), trials=3, delay_s=0.0)
    run_study(cfg, evaluator=FakeEvaluator())
    lock = tmp_path / "j.log.lock"
    os.symlink(tmp_path / "j.log", lock)  # what JournalFileSymlinkLock holds during an append
    old = lock.lstat().st_mtime - 3600
    os.utime(lock, (old, old), follow_symlinks=False)  # left an hour ago
    with caplog.at_level(logging.WARNING, logger="tailtune.tuner"):
        again = run_study(dataclasses.replace(cfg, trials=5), evaluator=FakeEvaluator())
    assert len(_finished(again.study)) == 5
    assert not lock.is_symlink() and not lock.exists()
    assert any("left by a killed run" in r.getMessage() for r in caplog.records)
    assert not release_stale_lock("memory") and not release_stale_lock(str(tmp_path / "j.log"))
    # a lock younger than the grace period may be another study's append in the same journal: left alone
    os.symlink(tmp_path / "j.log", lock)
    made = lock.lstat().st_mtime
    assert not release_stale_lock(str(tmp_path / "j.log"), now=made + LOCK_GRACE_S) and lock.is_symlink()
    assert release_stale_lock(str(tmp_path / "j.log"), now=made + LOCK_GRACE_S + 1) and not lock.is_symlink()


def test_different_setup_is_refused(tmp_path):
    cfg = fake_config(str(tmp_path / "j.log"), trials=2, delay_s=0.0)
    run_study(cfg, evaluator=FakeEvaluator())
    other = dataclasses.replace(cfg, objective=parse_objective("p50"))
    with pytest.raises(BadInputError, match="different setup"):
        run_study(other, evaluator=FakeEvaluator())


def test_two_worker_processes(tmp_path):
    cfg = fake_config(str(tmp_path / "j.log"), trials=10, delay_s=0.0)
    out = run_study(cfg, jobs=2)
    fin = _finished(out.study)
    assert 10 <= len(fin) <= 11  # each worker checks the budget before asking: overshoot at most jobs - 1
    assert len({t.number for t in fin}) == len(fin)


def test_parallel_needs_persistent_storage():
    with pytest.raises(BadInputError, match="storage"):
        run_study(fake_config("memory", trials=2, delay_s=0.0), jobs=2)


def test_constraints_reach_the_trials(tmp_path):
    from tuner.objective import Metrics

    space = apply_overrides(space_for("cassandra"), {"rein.tau_1": {"fixed": 1.0}}, policies=["rein", "fifo"])
    base = Metrics(p50_ms=0.55, p95_ms=1.0, p99_ms=2.2, p999_ms=4.4, mean_ms=0.7)
    cfg = StudyConfig(name="c", storage="memory", evaluator=EvaluatorSpec("tests.tuner.fakes:make"),
                      space=space, objective=parse_objective("p99", ["p50<=0%"]), seeds=(0,), trials=6,
                      prefix=0.0, startup_trials=3, baseline_metrics=base)
    out = run_study(cfg, evaluator=FakeEvaluator(), warm_start=[PAPER, Candidate("fifo")])
    t0, t1 = out.study.trials[0], out.study.trials[1]
    assert t0.user_attrs["constraints"] == [pytest.approx(0.5 / 0.55 - 1.0)]  # p50 = 2.0/4 vs 0.55: ok
    assert t1.user_attrs["constraints"] == [pytest.approx(2.5 / 0.55 - 1.0)]  # fifo p50 = 10/4: violated


class _FlatPrefixEvaluator(FakeEvaluator):
    """The fake landscape, except that every prefix looks the same: only the whole first seed tells trials apart
    (the prefix rung never stops a trial)."""

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Any:
        m = super().evaluate(candidate, seed, fraction)
        return m if fraction >= 1.0 else dataclasses.replace(m, p99_ms=1.0)


def test_second_rung_prunes_on_the_whole_first_seed(tmp_path):
    """With several seeds a trial that survives its prefix replays the whole first seed (step 1) before the
    others; a trial in the worst part of that rung is stopped there, having replayed prefix + one seed, and a
    trial that goes on replays the first seed only once."""
    ev = _FlatPrefixEvaluator()
    cfg = dataclasses.replace(fake_config(str(tmp_path / "j.log"), trials=30, delay_s=0.0), prefix=0.25,
                              startup_trials=3, keep_percentile=50.0)
    out = run_study(cfg, evaluator=ev)
    trials = out.study.get_trials(deepcopy=False)
    at_rung_1 = [t for t in trials if t.state.name == "PRUNED" and 1 in t.intermediate_values]
    assert at_rung_1, "a median-keeping pruner must stop some of 30 trials at the whole first seed"
    for t in at_rung_1:
        assert "per_seed" not in t.user_attrs and t.user_attrs["replays"] == 1.25
        assert t.intermediate_values[1] == t.user_attrs["first_seed_metrics"]["p99_ms"]
    done = [t for t in trials if t.state.name == "COMPLETE" and "cached_from" not in t.user_attrs]
    assert done
    seeds = list(cfg.seeds)
    for t in done:
        assert t.intermediate_values[1] == t.user_attrs["per_seed"][0][0]
        assert t.user_attrs["replays"] == 0.25 + len(seeds)
        label = Candidate.from_dict(t.user_attrs["candidate"]).label()
        whole = [(s, f) for (lab, s, f) in ev.calls if lab == label and f == 1.0]
        assert sorted(whole) == sorted((s, 1.0) for s in seeds)  # the first seed's whole replay is not repeated


def test_rung_pruner_compares_the_value_at_its_own_rung():
    """A trial with a good prefix (step 0) but a bad whole first seed (step 1) is stopped at step 1: the rule
    compares like with like, not the trial's best value over its steps."""
    import optuna

    from tuner.pruning import RungPruner

    study = optuna.create_study(direction="minimize", pruner=RungPruner(50.0, 2))
    for v0, v1 in ((5.0, 10.0), (6.0, 12.0), (7.0, 14.0)):
        t = study.ask()
        t.report(v0, 0)
        t.report(v1, 1)
        study.tell(t, v1)
    good_prefix_bad_seed = study.ask()
    good_prefix_bad_seed.report(1.0, 0)
    assert not good_prefix_bad_seed.should_prune()
    good_prefix_bad_seed.report(13.0, 1)
    assert good_prefix_bad_seed.should_prune()
    fine = study.ask()
    fine.report(1.0, 0)
    fine.report(11.0, 1)
    assert not fine.should_prune()
