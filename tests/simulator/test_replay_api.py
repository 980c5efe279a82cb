"""The one replay API (`kvsim.replay(workload, ReplayConfig) -> Result`), the catalogue and the typed memcached
replay: the core figures with and without the replica-selection ones, typed parameter errors, catalogue consistent
with the core."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import kvsim
import numpy as np
import pytest
from kvsim import memcached
from kvsim.memcached import MemcachedConfig

WALL = ("sim_wall_s", "events_per_s")


def _wl(sizes: bool = False) -> tuple[kvsim.Workload, np.ndarray | None]:
    rng = np.random.default_rng(3)
    k = rng.integers(1, 12, size=400)
    offsets = np.concatenate([[0], np.cumsum(k)])
    keys = rng.integers(0, 20_000, size=int(offsets[-1]))
    cluster = kvsim.Cluster(servers=12, slots=2, clients=4)
    sz = np.where(keys % 10 == 0, 512 * 1024.0, 1024.0) if sizes else None
    mean = None if sz is None else kvsim.DemandModel.default(cluster.service_rate).mean_s(sz)
    return kvsim.Workload(cluster, offsets, keys=keys, mean_demand_s=mean, load=0.5, seed=2), sz


def _same(a: Mapping[str, object], b: Mapping[str, object]) -> None:
    assert list(a) == list(b)
    assert {k: v for k, v in a.items() if k not in WALL} == {k: v for k, v in b.items() if k not in WALL}


def test_plain_replay_is_the_core_replay() -> None:
    wl, _ = _wl()
    new = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", params={"k": 3}, record_ops=True))
    # Naming round-robin adds the replica-selection figures and changes nothing else.
    ext = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", params={"k": 3}, record_ops=True, replica="round-robin"))
    core = ext.to_json()
    _same(new.to_json(), {k: v for k, v in core.items() if k in new.to_json()})
    np.testing.assert_array_equal(new.latency_ms, ext.latency_ms)
    assert new.records_table().equals(ext.records_table())
    assert new.replica is None and new.held is None and new.records is not None
    assert "replica" not in new.to_json()
    assert kvsim.replay(wl).policy == "fifo"


def test_extended_replay_is_deterministic_and_reports_replica_selection() -> None:
    wl, sizes = _wl(sizes=True)
    assert sizes is not None
    closed = kvsim.ClosedLoop(threads=6, think_ms=0.1)
    writes = kvsim.write_flags(wl.ops, write_fraction=0.2, seed=1)
    cfg = kvsim.ReplayConfig(
        policy="rein", replica="heron", sizes=sizes, thr_l_bytes=20_000.0, writes=writes, closed=closed, seed=3
    )
    new = kvsim.replay(wl, cfg)
    again = kvsim.replay(wl, dataclasses.replace(cfg))
    _same(new.to_json(), again.to_json())
    np.testing.assert_array_equal(new.latency_ms, again.latency_ms)
    assert new.replica == "heron" and new.replica_params is not None
    assert new.replica_params["thr_l_bytes"] == 20_000.0
    assert new.held is not None and new.classes is not None and new.closed is not None
    assert new.writes is not None and new.writes["ops"] > 0
    assert new.arrival_ms is not None and new.arrival_ms.size == wl.requests
    # The shorthand label: reported as the policy, the queue policy under its own key.
    labelled = dataclasses.replace(new, policy_label="heron").to_json()
    assert (labelled["policy"], labelled["queue_policy"]) == ("heron", "rein")
    # Naming round-robin reports the replica-selection figures; leaving it out does not.
    rr = kvsim.replay(wl, kvsim.ReplayConfig(replica="round-robin")).to_json()
    assert rr["replica"] == "round-robin" and rr["client_model"] == "open"


def test_parameter_errors_name_the_valid_parameters() -> None:
    wl, _ = _wl()
    with pytest.raises(kvsim.ParameterError) as e:
        kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", params={"K": 4}))
    assert str(e.value) == (
        "unknown parameter 'K' for policy 'rein': valid k (integer in 1..=64), range_factor ([1, 1e6]), "
        "r_q1 ([0.001, 1e6]), rate_step ([0, 1e6]), tau_1 ([1e-9, 1e9])"
    )
    with pytest.raises(kvsim.ParameterError, match=r"unknown parameter 'x' for replica selector 'ds': valid update_ms"):
        kvsim.replay(wl, kvsim.ReplayConfig(replica="ds", replica_params={"x": 1}))
    with pytest.raises(kvsim.ParameterError, match="'policy'"):
        kvsim.replay(wl, kvsim.ReplayConfig(policy="no-such-policy"))
    with pytest.raises(kvsim.ParameterError, match=r"'K' for policy 'rein': valid k \(integer"):
        kvsim.policy_spec("rein").param("K")


def test_catalogue_matches_the_core() -> None:
    specs = kvsim.policy_specs()
    assert [s.name for s in specs] == kvsim.policy_names()
    for s in specs:
        assert s.defaults() == kvsim.policy_defaults(s.name)
        assert s.fast_loop or s.loop_note
        for p in s.params:
            assert p.low <= p.default <= p.high, (s.name, p.name)
            if p.search is not None and p.search.kind != "cat":
                assert p.search.low is not None and p.search.high is not None
                assert p.low <= p.search.low <= p.search.high <= p.high
    assert [s.name for s in kvsim.replica_specs()] == kvsim.replica_names()
    rein = kvsim.policy_spec("rein")
    assert rein.param("k").search == kvsim.SearchSpec("int", 2.0, 8.0, None, False, None)
    assert rein.param("range_factor").search == kvsim.SearchSpec("float", 1.5, 8.0, 0.5, False, None)
    assert rein.param("tau_1").search == kvsim.SearchSpec("cat", None, None, None, False, (1.0, 2.0))
    assert rein.param("r_q1").search is None
    assert [p.name for p in kvsim.policy_spec("tailx").searched()] == [
        "thr_l_bytes", "tl_scale", "ts_scale", "allowance_scale"
    ]
    assert [s.name for s in kvsim.memcached_policy_specs()] == ["batching", "chisel"]
    assert "k = 4" in rein.help()


def test_typed_memcached_replay_is_deterministic_and_reports_its_figures() -> None:
    rng = np.random.default_rng(1)
    sizes = np.where(rng.random(300) < 0.1, 120, 4)
    arr = np.cumsum(rng.exponential(50e-6, 300))
    dep = kvsim.chisel.MemcachedSetup(servers=2, setup_us=5.0, service_cv=0.2)
    cfg = MemcachedConfig(policy="chisel", params={"split_keys": 30, "merge": 2}, deployment=dep, seed=4)
    typed = memcached.replay(sizes, arr, cfg)
    again = memcached.replay(sizes, arr, MemcachedConfig(policy="chisel", params={"split_keys": 30, "merge": 2},
                                                         deployment=dep, seed=4))
    assert typed.p99_ms == again.p99_ms and typed.params == again.params
    assert typed.params == {"split_keys": 30, "merge": 2, "elephant_threshold": 50}
    np.testing.assert_array_equal(typed.latencies_ms, again.latencies_ms)
    summary = typed.to_json()
    _same(summary, again.to_json())
    assert summary["ops"] == typed.queries and summary["requests"] == 300
    with pytest.raises(kvsim.ParameterError, match="not a param of batching"):
        memcached.replay(sizes, arr, MemcachedConfig(policy="batching", params={"merge": 2}))


@pytest.mark.parametrize("config", [kvsim.ReplayConfig(), kvsim.ReplayConfig(policy="stock", replica="round-robin")])
def test_stop_ends_a_replay_once_its_p99_is_certainly_above_the_bound(config: kvsim.ReplayConfig) -> None:
    wl, _ = _wl()
    whole = kvsim.replay(wl, config)
    lat = np.sort(whole.latency_ms[int(0.1 * wl.requests):])
    below = float(lat[int(0.99 * (lat.size - 1))])  # the 99th percentile's lower order statistic
    stopped = kvsim.replay(wl, dataclasses.replace(config, stop=(0.99, 0.5 * below)))
    assert stopped.stopped and stopped.to_json()["stopped"] is True and stopped.events < whole.events
    done = stopped.latency_ms > 0
    assert 0 < done.sum() < wl.requests
    assert np.array_equal(stopped.latency_ms[done], whole.latency_ms[done])  # the same replay, cut short
    kept = kvsim.replay(wl, dataclasses.replace(config, stop=(0.99, below)))  # not above: replayed to the end
    assert not kept.stopped and "stopped" not in kept.to_json() and kept.p99_ms == whole.p99_ms
    with pytest.raises(kvsim.ParameterError, match="stop"):
        kvsim.replay(wl, dataclasses.replace(config, stop=(0.99, float("nan"))))
