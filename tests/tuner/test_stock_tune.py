"""The stock Cassandra tune: the knob space, the user's current settings as the baseline, the overload rule,
`--server` and the alternatives side by side."""

from __future__ import annotations

from typing import Any

import pytest

from base.errors import BadInputError
from simulation.source import WorkloadSource
from simulation.stock import parse_speculative_retry
from simulation.stock_knobs import stock_knobs
from tuner.evaluators import EvaluatorSpec, build_evaluator
from tuner.space import Candidate, cassandra_space, patched_space, speculative_retry_choices, stock_space
from tuner.tune import TuneRequest, parse_candidate, patched_defaults, run_tune, stock_defaults

_SRC = WorkloadSource(profile="soundcloud", requests=2000)


def test_current_keeps_min_max_arguments_together() -> None:
    c = parse_candidate("stock:speculative_retry=MIN(99p,5ms),driver=python")
    assert c == Candidate("stock", {"speculative_retry": "MIN(99p,5ms)", "driver": "python"})
    assert parse_candidate("rein:k=4,range_factor=3").params == {"k": 4.0, "range_factor": 3.0}


def test_every_speculative_retry_choice_is_cassandras_normalised_text() -> None:
    choices = speculative_retry_choices()
    assert len(set(choices)) == len(choices)
    assert {"NEVER", "ALWAYS", "99p", "5ms", "MIN(99p,5ms)", "MAX(99p,5ms)"} <= set(choices)
    for text in choices:
        assert parse_speculative_retry(text).render() == text


@pytest.mark.parametrize("driver", ["java4", "python"])
def test_stock_space_is_exactly_the_drivers_modelled_knobs(driver: str) -> None:
    space = stock_space(driver)
    (ps,) = space.policies
    assert ps.policy == "stock" and ps.fixed == {"driver": driver}
    assert [p.name for p in ps.params] == [k.name for k in stock_knobs(driver)]
    # the defaults (Cassandra's and the driver's own) are a point of the space: the baseline is searched first
    assert space.contains(stock_defaults(driver))


def test_defaults_take_the_current_settings_on_top() -> None:
    cur = stock_defaults("java4", {"speculative_retry": "MIN(99p,5ms)"})
    assert cur.params["speculative_retry"] == "MIN(99p,5ms)"
    assert cur.params["dynamic_snitch_badness_threshold"] == 1.0 and cur.params["driver"] == "java4"


@pytest.mark.parametrize(("load", "overloaded"), [(0.75, True), (0.3, False)])
def test_always_overloads_a_loaded_cluster(load: float, overloaded: bool) -> None:
    ev = build_evaluator(EvaluatorSpec("kvsim-cassandra", {"source": _SRC.as_dict(), "servers": 16, "load": load}))
    always = stock_defaults("java4", {"speculative_retry": "ALWAYS"})
    never = stock_defaults("java4", {"speculative_retry": "NEVER"})
    ev.evaluate(always, 0)
    ev.evaluate(never, 0)
    reason = ev.overloaded(always)
    assert ev.overloaded(never) is None
    if overloaded:
        # ALWAYS doubles the reads: 2 × 0.75 = 1.5 of the servers' capacity
        assert reason is not None and "1.50" in reason and "overloads the cluster" in reason
    else:
        assert reason is None


def test_requests_that_time_out_make_a_candidate_infeasible() -> None:
    # 20 ms stalls and a 5 ms read timeout: reads queued behind a stall expire, their requests time out
    ev = build_evaluator(EvaluatorSpec("kvsim-cassandra", {"source": _SRC.as_dict(), "servers": 16, "load": 0.5,
                                                            "stall_rate": 5.0, "stall_ms": 20.0}))
    short = stock_defaults("java4", {"speculative_retry": "NEVER", "read_timeout_ms": 5.0})
    usual = stock_defaults("java4", {"speculative_retry": "NEVER"})
    ev.evaluate(short, 0)
    ev.evaluate(usual, 0)
    reason = ev.overloaded(short)
    assert reason is not None and "answered with a read timeout" in reason and "cannot serve it" in reason
    assert ev.overloaded(usual) is None


def test_stock_tune_never_recommends_an_overloading_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    import tuner.tune as tune_module

    seen: list[tuple[str, float, str | None]] = []
    recommendation = tune_module._recommendation

    def spy(job: Any, trials: list[Any], *args: Any, **kwargs: Any) -> Any:
        seen.extend((t.user_attrs["candidate"]["params"]["speculative_retry"], t.user_attrs["replays"],
                     t.user_attrs.get("infeasible")) for t in trials)
        return recommendation(job, trials, *args, **kwargs)

    monkeypatch.setattr(tune_module, "_recommendation", spy)
    req = TuneRequest(source=_SRC, deployment="cassandra", trials=4, seeds=2, storage="memory", mlflow=False,
                      plots=False, evaluator_options={"servers": 16, "stall_rate": 2.0, "stall_ms": 20.0},
                      overrides={"stock.speculative_retry": {"choices": ["ALWAYS", "NEVER"]}},
                      alternative_trials=0, tables=("ks.a", "ks.b"))
    rec = run_tune(req)
    assert rec.server == "stock" and rec.policy == "stock"
    assert rec.trial_states.get("PRUNED", 0) >= 1  # ALWAYS was tried (grid of two) and pruned
    assert rec.params["speculative_retry"] != "ALWAYS"
    assert rec.alternatives is not None
    assert rec.alternatives["stock"]["params"]["speculative_retry"] == "NEVER"
    assert rec.alternatives["patched"]["verdict"] == "not searched"
    assert rec.render["cql"] == [f"ALTER TABLE ks.{t} WITH speculative_retry = '{rec.params['speculative_retry']}';"
                                 for t in ("a", "b")]
    # ALWAYS overloads its prefix (a quarter of the first seed): pruned there, nothing more replayed
    always = [(replays, why) for text, replays, why in seen if text == "ALWAYS"]
    assert always and all(replays == 0.25 and why and "overloads" in why for replays, why in always)


def test_patched_server_keeps_the_scheduler_space_and_shows_stock_beside_it() -> None:
    req = TuneRequest(source=_SRC, deployment="cassandra", trials=3, seeds=2, storage="memory", mlflow=False,
                      plots=False, evaluator_options={"servers": 16}, server="rein-patched", alternative_trials=3,
                      # a 2000-request replay is too short for a percentile threshold to settle: fixed ones only
                      overrides={"stock.speculative_retry": {"choices": ["NEVER", "50ms"]}})
    rec = run_tune(req)
    assert rec.server == "rein-patched" and rec.policy != "stock"
    assert rec.baseline["policy"] == "fifo" and "json" in rec.render
    assert rec.alternatives is not None
    stock = rec.alternatives["stock"]
    assert stock["server"] == "stock" and stock["policy"] == "stock" and stock["trials"] == 3
    assert stock["verdict"] in ("recommend", "keep current") and "ci" in stock and "p99_ms" in stock
    assert rec.alternatives["patched"]["server"] == "rein-patched"


@pytest.mark.parametrize("driver", ["java4", "python"])
def test_patched_space_is_the_scheduler_space_plus_the_drivers_stock_knobs(driver: str) -> None:
    today = cassandra_space()
    space = patched_space(today, driver)
    assert [p.policy for p in space.policies] == [p.policy for p in today.policies]
    snitch = {"dynamic_snitch_badness_threshold", "dynamic_snitch_update_interval", "dynamic_snitch_reset_interval"}
    knobs = {k.name for k in stock_knobs(driver)}
    for ps, old in zip(space.policies, today.policies, strict=True):
        names = [p.name for p in ps.params]
        assert names[: len(old.params)] == [p.name for p in old.params]  # today's space first, unchanged
        added = set(names[len(old.params):])
        # the snitch knobs where a snitch may pick replicas (`replica` searched, ds among its choices)
        assert added == (knobs if ps.policy in ("tailx", "replica") else knobs - snitch), ps.policy
        assert ps.fixed["driver"] == driver
    tailx = {p.name: p for p in space.policy_space("tailx").params}
    assert tailx["dynamic_snitch_update_interval"].when == (("replica", "ds"),)
    # the paper default and the current config, stock knobs at Cassandra's defaults, lie in the space
    rein = patched_defaults(Candidate("rein", {"k": 4, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 1.0,
                                               "tau_1": 1.0}), driver)
    assert rein.params["speculative_retry"] == "99p" and space.contains(rein)
    assert space.contains(patched_defaults(Candidate("fifo"), driver))
    heron = patched_defaults(Candidate("heron", {"queue": "rein", "thr_l_bytes": 65536}), driver)
    assert heron.params["speculative_retry"] == "99p" and space.contains(heron)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"server": "stock", "current": Candidate("rein", {"k": 4})}, "policy"),
        ({"server": "rein-patched", "current": Candidate("stock", {})}, "policy"),
        ({"server": "patched"}, "server"),
        ({"driver": "go"}, "driver"),
    ],
)
def test_inconsistent_requests_are_refused(kwargs: dict[str, object], field: str) -> None:
    req = TuneRequest(source=_SRC, deployment="cassandra", trials=1, seeds=1, storage="memory", mlflow=False,
                      plots=False, evaluator_options={"servers": 16}, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(BadInputError) as info:
        run_tune(req)
    assert info.value.problems[0].field == field


def test_server_is_not_a_memcached_setting() -> None:
    req = TuneRequest(source=WorkloadSource(profile="mice-elephant", requests=500), deployment="memcached",
                      trials=1, seeds=1, storage="memory", mlflow=False, plots=False, server="stock")
    with pytest.raises(BadInputError, match="Cassandra setting"):
        run_tune(req)


def test_chunk_is_asked_only_with_in_queries() -> None:
    import optuna

    space = stock_space("java4")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    shapes = set()
    for _ in range(40):
        trial = study.ask()
        cand = space.suggest(trial)
        shapes.add(cand.params["multiget.shape"])
        assert ("multiget.chunk" in cand.params) == (cand.params["multiget.shape"] == "in")
        assert space.contains(cand)
        assert space.candidate_from_params(trial.params) == cand
        study.tell(trial, 1.0)
    assert shapes == {"in", "per-partition"}
    per_partition = stock_defaults("java4", {"multiget.shape": "per-partition", "multiget.chunk": 4})
    assert "multiget.chunk" not in per_partition.params and space.contains(per_partition)
