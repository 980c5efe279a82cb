from __future__ import annotations

from typing import Any

import optuna
import pytest

from base.errors import BadInputError
from tuner.kinds import space_for
from tuner.space import Candidate, apply_overrides, cassandra_space, memcached_space, parse_override


def _param(space: Any, policy: str, name: str) -> Any:
    return {p.name: p for p in space.policy_space(policy).params}[name]


def test_cassandra_ranges_from_fanout_and_value_sizes():
    summary = {
        "fanout": {"bottleneck_p99": 10},
        "value_size": {"thr_l_candidates": [{"bytes": 1000, "key_share": 0.1, "access_share": 0.2},
                                            {"bytes": 50000, "key_share": 0.01, "access_share": 0.05}]},
        "slack_bounds": [{"utilization": 0.5, "upper_ms": 7.0, "lower_ms": 1.0}],
    }
    sp = cassandra_space(summary)
    k = _param(sp, "rein", "k")
    assert (k.low, k.high) == (2, 5)  # 1 + ceil(log2 10) = 5
    assert _param(sp, "rein", "range_factor").high == 8.0  # clamp(10, 4, 8)
    assert _param(sp, "tailx", "thr_l_bytes").choices == (1000, 50000)
    assert _param(sp, "rein-sbf", "boost_after_ms").choices == (0.0, 1.0, 2.0, 5.0)  # up to 7 ms


@pytest.mark.parametrize("summary", [None, {}, {"fanout": None}, {"fanout": {"bottleneck_p99": None}},
                                     {"value_size": {"thr_l_candidates": None}}, {"slack_bounds": None}])
def test_cassandra_defaults_without_summary(summary):
    sp = cassandra_space(summary)
    assert _param(sp, "rein", "k").high == 8
    assert _param(sp, "rein", "range_factor").high == 8.0
    assert _param(sp, "tailx", "thr_l_bytes").choices == (4096, 16384, 65536)
    assert _param(sp, "rein-sds", "boost_after_ms").choices == (0.0, 1.0, 2.0, 5.0, 10.0, 20.0)


def test_memcached_ranges_from_multiget_sizes():
    sp = memcached_space({"multiget_size": {"p50": 4, "p99": 120, "max": 300}})
    assert (_param(sp, "chisel", "elephant_threshold").low, _param(sp, "chisel", "elephant_threshold").high) == (4, 120)
    assert _param(sp, "chisel", "split_keys").high == 300
    d = memcached_space(None)
    assert (_param(d, "chisel", "elephant_threshold").low, _param(d, "chisel", "elephant_threshold").high) == (10, 100)


def test_conditional_params_only_for_the_chosen_policy():
    sp = apply_overrides(cassandra_space(None), policies=["fifo", "rein"])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = set()
    for _ in range(30):
        t = study.ask()
        cand = sp.suggest(t)
        seen.add(cand.policy)
        if cand.policy == "fifo":
            assert set(t.params) == {"policy"}
            assert cand.params == {}
        else:
            assert set(t.params) == {"policy", "rein.k", "rein.range_factor", "rein.rate_step", "rein.tau_1"}
            assert cand.params["r_q1"] == 5.0  # fixed, not asked
        assert sp.candidate_from_params(t.params) == cand
        study.tell(t, 1.0)
    assert seen == {"fifo", "rein"}


def test_grid_leaves_out_infeasible_rein_rates():
    sp = apply_overrides(cassandra_space(None), {"rein.k": {"low": 2, "high": 4}, "rein.range_factor": {"fixed": 3.0},
                                                 "rein.tau_1": {"fixed": 1.0},
                                                 "rein.rate_step": {"low": 0, "high": 3, "step": 1}},
                         policies=["rein"])
    pts = list(sp.grid())
    # r_q1 = 5: k=2 allows steps 0..3 (4), k=3 steps < 2.5 → 0,1,2 (3), k=4 steps < 5/3 → 0,1 (2)
    assert len(pts) == 9
    assert len(list(sp.grid(feasible_only=False))) == 12
    assert sp.infeasible(Candidate("rein", {"k": 4, "range_factor": 3.0, "rate_step": 2.0, "r_q1": 5.0, "tau_1": 1.0}))


def test_contains():
    sp = apply_overrides(cassandra_space(None), {"rein.tau_1": {"fixed": 1.0}}, policies=["rein", "fifo"])
    paper = Candidate("rein", {"k": 4, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0})
    assert sp.contains(paper)
    assert sp.contains(Candidate("fifo"))
    assert not sp.contains(Candidate("rein", {**paper.params, "range_factor": 3.25}))  # off the 0.5 step
    assert not sp.contains(Candidate("rein", {**paper.params, "k": 9}))
    assert not sp.contains(Candidate("brb-equalmax"))


def test_overrides_parse_and_errors():
    assert parse_override("rein.k=2:6") == ("rein.k", {"low": 2.0, "high": 6.0})
    assert parse_override("rein.range_factor=1.5:4:0.5") == (
        "rein.range_factor", {"low": 1.5, "high": 4.0, "step": 0.5})
    assert parse_override("rein.tau_1=2") == ("rein.tau_1", {"fixed": 2})
    assert parse_override("chisel.merge=1|2|4") == ("chisel.merge", {"choices": [1, 2, 4]})
    sp = apply_overrides(cassandra_space(None), dict([parse_override("rein.k=2:6")]), policies=["rein"])
    assert (_param(sp, "rein", "k").kind, _param(sp, "rein", "k").high) == ("int", 6)
    with pytest.raises(BadInputError, match=r"field 'nope\.k'"):
        apply_overrides(cassandra_space(None), {"nope.k": {"fixed": 1}})
    with pytest.raises(BadInputError, match="unknown policy 'tailz'"):
        apply_overrides(cassandra_space(None), policies=["tailz"])
    with pytest.raises(BadInputError):
        parse_override("k=3")
    with pytest.raises(BadInputError, match="store"):
        space_for("redis")


def test_space_roundtrip():
    sp = cassandra_space({"fanout": {"bottleneck_p99": 4}})
    assert type(sp).from_dict(sp.as_dict()) == sp
