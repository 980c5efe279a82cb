from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tuner.objective import Metrics, parse_objective
from tuner.recommend import decide, paired_test, pareto_front, pick_best, render_cassandra, render_memcached
from tuner.space import Candidate

BASE = Candidate("fifo")
BEST = Candidate("rein", {"k": 4, "range_factor": 3.0})


def _m(p99: float, p50: float = 1.0) -> Metrics:
    return Metrics(p50_ms=p50, p95_ms=p99 / 2, p99_ms=p99, p999_ms=p99 * 2, mean_ms=p50)


def test_paired_test_hand_worked():
    # diffs -1, -2, -3: mean -2, sd 1, t = -2/(1/sqrt 3) = -3.4641, df 2 → p = 0.03709
    assert paired_test([9.0, 8.0, 7.0], [10.0, 10.0, 10.0]) == pytest.approx(0.03709, abs=2e-5)
    assert paired_test([9.0, 9.0], [10.0, 10.0]) == 0.0  # zero spread, all improve
    assert paired_test([9.0, 11.0, 10.0], [10.0, 10.0, 10.0]) == pytest.approx(0.5)


def test_verdicts():
    o = parse_objective("p99", ["p50<=5%"])
    v = decide(BEST, [9.0, 8.0, 7.0], _m(8.0), BASE, [10.0, 10.0, 10.0], _m(10.0), o)
    assert v.recommend and v.label == "recommend" and v.improvement_pct == pytest.approx(20.0)
    v = decide(BEST, [9.0, 11.0, 9.5], _m(9.83), BASE, [10.0, 10.0, 10.0], _m(10.0), o)
    assert not v.recommend and "not significant" in v.reason
    v = decide(BEST, [9.0, 8.0, 7.0], _m(8.0, p50=1.2), BASE, [10.0] * 3, _m(10.0), o)
    assert not v.recommend and "p50<=5%" in v.reason
    v = decide(BASE, [10.0] * 3, _m(10.0), BASE, [10.0] * 3, _m(10.0), o)
    assert v.label == "keep current" and "already the best" in v.reason
    assert not decide(None, None, None, BASE, [10.0], _m(10.0), o).recommend


def _t(n: int, values: Any, constraints: Any = None, state: str = "COMPLETE") -> Any:
    return SimpleNamespace(number=n, values=values, state=SimpleNamespace(name=state),
                           user_attrs={"constraints": constraints or []})


def test_pick_best_respects_constraints_and_pareto():
    trials = [_t(0, [5.0], [0.1]), _t(1, [6.0], [-0.1]), _t(2, [7.0]), _t(3, None, state="PRUNED")]
    best = pick_best(trials, parse_objective("p99", ["p50<=0%"]))
    assert best is not None and best.number == 1
    multi = [_t(0, [1.0, 5.0]), _t(1, [2.0, 2.0]), _t(2, [3.0, 3.0]), _t(3, [0.5, 9.0], [0.2])]
    assert [t.number for t in pareto_front(multi)] == [0, 1, 3]
    best = pick_best(multi, parse_objective("p50,p99"))
    assert best is not None and best.number == 0


def test_render():
    c = render_cassandra(Candidate("rein", {"k": 4.0, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 0.5}))
    assert c["json"] == {"request_scheduler": "rein", "request_scheduler_options":
                         {"queues": 4, "range_factor": 3, "rate_q1": 5, "rate_step": 0.5}}
    assert c["properties"].splitlines() == ["scheduler.policy=rein", "scheduler.rein.queues=4",
                                            "scheduler.rein.rate_q1=5", "scheduler.rein.range_factor=3",
                                            "scheduler.rein.rate_step=0.5"]
    assert render_memcached(Candidate("chisel", {"split_keys": 13, "merge": 2}))["json"] == {
        "memcached_client": {"mode": "chisel", "merge": 2, "split_keys": 13, "elephant_threshold": 50}}


def test_one_seed_needs_batches_to_recommend() -> None:
    o = parse_objective("p99")
    v = decide(BEST, [8.0], _m(8.0), BASE, [10.0], _m(10.0), o)
    assert not v.recommend and "too short to estimate an interval" in v.reason and v.p_value is None
    batches_best, batches_base = [8.0, 7.5, 8.5, 8.2, 7.9], [10.0, 9.8, 10.3, 10.1, 9.9]
    v = decide(BEST, [8.0], _m(8.0), BASE, [10.0], _m(10.0), o, paired=(batches_best, batches_base))
    assert v.recommend and "over 5 batches of one replay" in v.reason


def test_batch_metrics_cut_warmup_and_split_contiguously() -> None:
    import numpy as np

    from tuner.evidence import batch_metrics, batch_values

    lat = np.concatenate([np.full(100, 1000.0), np.arange(1000, dtype=np.float64)])
    b = batch_metrics(lat, 100 / 1100)
    assert len(b) == 20 and b[0].p50_ms == 24.5 and b[-1].mean_ms == 974.5
    values, halves = batch_values(b, parse_objective("p99"))
    assert len(values) == 20 and halves[0] > 0
    assert batch_metrics(np.ones(99), 0.0) == []  # fewer than 2 batches of 50: no estimate


def test_memcached_render_is_complete() -> None:
    from tuner.recommend import render_memcached

    cfg = render_memcached(Candidate("chisel", {"split_keys": 16}))["json"]["memcached_client"]
    assert cfg == {"mode": "chisel", "split_keys": 16, "merge": 1, "elephant_threshold": 50}
