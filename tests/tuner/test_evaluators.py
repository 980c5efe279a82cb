"""The kvsim-backed evaluators keep the contract (tuner/evaluator.py) on small generated traces."""

from __future__ import annotations

import pytest

pytest.importorskip("kvsim")

from base.errors import BadInputError
from tuner.evaluators import EvaluatorSpec, KvsimCassandraEvaluator, KvsimMemcachedEvaluator, build_evaluator
from tuner.space import Candidate

REIN = Candidate("rein", {"k": 4, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0})


def test_cassandra_deterministic_crn_prefix_and_rebuild() -> None:
    ev = KvsimCassandraEvaluator({"profile": "soundcloud", "requests": 2000}, servers=16)
    a = ev.evaluate(REIN, 0)
    assert ev.evaluate(REIN, 0) == a  # same seed, same workload, same answer
    assert ev.evaluate(REIN, 1) != a  # another seed is another workload
    assert ev.evaluate(REIN, 0, 0.25) != a  # a prefix is a different (shorter) replay
    assert len(ev.latencies_ms(REIN, 0)) == ev.requests == 2000
    assert len(ev._prepared()._workloads) == 3
    again = build_evaluator(ev.spec())
    assert again.evaluate(REIN, 0) == a
    assert "oracle" not in ev.policies() and {"rein", "tailx", "heron", "replica"} <= set(ev.policies())
    with pytest.raises(BadInputError, match="field 'k'"):
        ev.evaluate(Candidate("rein", {"k": 0.5}), 0)
    with pytest.raises(BadInputError, match="field 'policy'"):
        ev.evaluate(Candidate("oracle", {}), 0)


def test_memcached_analyzer_choice_and_rebuild() -> None:
    ev = KvsimMemcachedEvaluator({"profile": "mice-elephant", "requests": 2000})
    choice = ev.reference(0)
    assert choice.policy == "chisel" and set(choice.params) == {"split_keys", "merge", "elephant_threshold"}
    m = ev.evaluate(choice, 0)
    assert build_evaluator(EvaluatorSpec.from_dict(ev.spec().as_dict())).evaluate(choice, 0) == m
    with pytest.raises(BadInputError, match="field 'merge'"):
        ev.evaluate(Candidate("chisel", {"merge": 1.5}), 0)
