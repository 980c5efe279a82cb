"""size-aware demand, demand distributions, replica selectors, per-class results, the large-key Bloom
filter, and `tailtune simulate --replica / --policy c3|ds|heron`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kvsim
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

RATE = 3750.0


def test_default_demand_model_makes_512k_cost_32_times_1k() -> None:
    m = kvsim.DemandModel.default(RATE)
    means = m.mean_s([1024, 524288]) * RATE
    np.testing.assert_allclose(means, [1.0, 32.0], rtol=1e-12)
    # bandwidth = (512 KiB − 1 KiB) / (31 / 3750 s) = 523264 · 3750 / 31 B/s
    assert m.bandwidth_bps == pytest.approx(523264 * 3750 / 31, rel=1e-12)
    # THR_L = t0 · bandwidth + 2 · median = (1/3750 · bw − 1024) + 2048
    assert kvsim.default_thr_l(m, 1024.0) == pytest.approx(523264 / 31 - 1024 + 2048, rel=1e-12)


def test_unknown_sizes_take_the_median_over_distinct_keys() -> None:
    # key a (100 B) appears three times: the median is over keys {a: 100, b: 300, c: 1000} = 300, not 100.
    info = kvsim.fill_unknown_sizes([100, 100, 100, np.nan, 300, 1000], ["a", "a", "a", "d", "b", "c"])
    assert info.median_bytes == 300.0
    assert info.unknown == 1
    assert info.sizes.tolist() == [100, 100, 100, 300, 300, 1000]
    assert info.heterogeneous
    with pytest.raises(kvsim.ParameterError, match="value_size"):
        kvsim.fill_unknown_sizes([np.nan])


def _wl(dist: str = "exponential", sigma: float = 1.0, n: int = 4000, load: float = 0.5) -> kvsim.Workload:
    cluster = kvsim.Cluster(servers=6, slots=2, replication=3, clients=4)
    mean = np.where(np.arange(n) % 10 == 0, 32.0, 1.0) / RATE
    return kvsim.Workload(
        cluster, np.arange(n + 1), keys=np.arange(n, dtype=np.uint64), mean_demand_s=mean, load=load,
        seed=5, demand_dist=dist, demand_sigma=sigma,
    )


def test_demand_distributions() -> None:
    n = 4000
    mean_ns = np.round(np.where(np.arange(n) % 10 == 0, 32.0, 1.0) / RATE * 1e9)
    det = _wl("deterministic").arrays()
    assert (det["demand_ns"] == mean_ns[det["op_input"]]).all()
    exp_default = kvsim.Workload(
        kvsim.Cluster(servers=6, slots=2, replication=3, clients=4), np.arange(n + 1),
        keys=np.arange(n, dtype=np.uint64), mean_demand_s=np.where(np.arange(n) % 10 == 0, 32.0, 1.0) / RATE,
        load=0.5, seed=5,
    ).arrays()
    assert (exp_default["demand_ns"] == _wl("exponential").arrays()["demand_ns"]).all()
    ln = _wl("lognormal", 0.5).arrays()
    small = mean_ns[ln["op_input"]] < 1e6
    assert ln["demand_ns"][small].mean() == pytest.approx(1e9 / RATE, rel=0.03)
    with pytest.raises(kvsim.ParameterError, match="demand_dist"):
        _wl("gamma")


def test_round_robin_through_the_sized_path_equals_the_core_replay() -> None:
    wl = _wl()
    core = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", warmup=0.0))
    ext = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", replica="round-robin", warmup=0.0))
    np.testing.assert_array_equal(core.latency_ms, ext.latency_ms)
    assert ext.replica == "round-robin" and ext.classes is None and ext.held is not None and ext.held["opsets"] == 0


def test_classes_bloom_and_selector_params_are_reported() -> None:
    wl = _wl(load=0.6)
    sizes = np.where(np.arange(wl.ops) % 10 == 0, 524288.0, 1024.0)
    r = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="heron", replica_params={"busy_capacity": 4},
                                            sizes=sizes, thr_l_bytes=20_000.0, warmup=0.1))
    out: dict[str, Any] = r.to_json()
    assert out["replica_params"]["thr_l_bytes"] == 20_000.0 and out["replica_params"]["busy_capacity"] == 4.0
    assert out["bloom"]["large_keys"] == 400 and out["bloom"]["fp_measured"] < 0.001
    # classes = the same warm-up cut, split by "touches a large value"
    lat = r.latency_ms[400:]
    large = (np.arange(wl.requests) % 10 == 0)[400:]
    assert out["classes"]["large"]["requests"] == int(large.sum())
    assert out["classes"]["small"]["p99_ms"] == pytest.approx(float(np.percentile(lat[~large], 99)), rel=1e-12)
    assert out["classes"]["large"]["p50_ms"] == pytest.approx(float(np.percentile(lat[large], 50)), rel=1e-12)


def test_load_aware_selection_cuts_the_small_requests_tail_against_random() -> None:
    cluster = kvsim.Cluster(servers=15, slots=8, replication=3, clients=15)
    n = 30_000
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 100_000, n).astype(np.uint64)
    sizes = np.where(keys % 10 == 0, 524288.0, 1024.0)
    m = kvsim.DemandModel.default(RATE)
    wl = kvsim.Workload(cluster, np.arange(n + 1), keys=keys, mean_demand_s=m.mean_s(sizes), load=0.6, seed=3)
    p99 = {}
    for rep in ("random", "least-outstanding", "c3"):
        r = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica=rep, sizes=sizes, thr_l_bytes=20_000.0))
        assert r.steady_state
        assert r.classes is not None
        p99[rep] = r.classes["small"]["p99_ms"]
    assert p99["least-outstanding"] < p99["random"] / 2
    assert p99["c3"] < p99["random"] / 2


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    servers=st.integers(2, 7),
    n=st.integers(1, 80),
    replica=st.sampled_from(["random", "least-outstanding", "ds", "c3", "heron"]),
    policy=st.sampled_from(["fifo", "rein", "brb-equalmax"]),
)
def test_every_op_runs_once_on_a_replica_of_its_key(
    seed: int, servers: int, n: int, replica: str, policy: str
) -> None:
    rng = np.random.default_rng(seed)
    cluster = kvsim.Cluster(servers=servers, slots=2, replication=min(3, servers), clients=3, net_latency_us=10)
    sizes_per_req = rng.integers(1, 6, n)
    offsets = np.concatenate([[0], np.cumsum(sizes_per_req)])
    keys = rng.integers(0, 60, int(offsets[-1])).astype(np.uint64)
    sizes = np.where(keys % 7 == 0, 524288.0, 1024.0)
    m = kvsim.DemandModel.default(RATE)
    wl = kvsim.Workload(cluster, offsets, keys=keys, mean_demand_s=m.mean_s(sizes), load=0.7, seed=seed)
    r = kvsim.replay(wl, kvsim.ReplayConfig(policy=policy, replica=replica, sizes=sizes, thr_l_bytes=20_000.0,
                                            warmup=0.0, record_ops=True, seed=seed))
    rec = r.records
    assert rec is not None
    arr = wl.arrays()
    op_group = np.repeat(arr["opset_group"], np.diff(arr["opset_ops"]))
    table = cluster.replica_table()
    assert all(rec["server"][i] in table[op_group[i]] for i in range(wl.ops))
    assert (rec["end_ns"] - rec["start_ns"] == arr["demand_ns"]).all()
    assert (rec["start_ns"] >= rec["enqueue_ns"]).all()
    assert (r.latency_ms >= 0.02 - 1e-9).all()


def _sized_trace(tmp_path: Path, negative: bool = False) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    n = 3000
    keys = rng.integers(0, 5000, n)
    size = [None if k % 97 == 0 else (524288 if k % 10 == 0 else 1024) for k in keys]
    if negative:
        size[5] = -1
    path = tmp_path / "sized.parquet"
    pq.write_table(
        pa.table({"request_id": np.arange(n), "ts": np.arange(n) * 1e-3, "key": [f"k{k}" for k in keys],
                  "value_size": pa.array(size, type=pa.int64())}),
        path,
    )
    return path


def test_cli_heron_shorthand_reports_params_classes_and_bloom(cli: Any, tmp_path: Path) -> None:
    path = _sized_trace(tmp_path)
    out = cli("simulate", "--trace", str(path), "--policy", "heron", "--servers", "15", "--load", "0.2",
              "--param", "busy_capacity=3", "--json")
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["policy"] == "heron" and obj["queue_policy"] == "fifo" and obj["replica"] == "heron"
    assert obj["params"]["busy_capacity"] == 3.0 and obj["params"]["thr_l_bytes"] > 1024
    assert set(obj["classes"]) == {"small", "large"}
    assert {"p50_ms", "p95_ms", "p99_ms"} <= set(obj["classes"]["small"])
    assert obj["demand"]["model"] == "size" and obj["demand"]["median_bytes"] == 1024.0
    assert obj["demand"]["unknown_sizes"] > 0 and obj["bloom"]["fp_measured"] < 0.001


def test_cli_replica_flag_combines_with_queue_policies(cli: Any, tmp_path: Path) -> None:
    path = _sized_trace(tmp_path)
    out = cli("simulate", "--trace", str(path), "--policy", "rein", "--replica", "c3", "--replica-param",
              "rate_control=0", "--servers", "12", "--load", "0.3", "--json")
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["policy"] == "rein" and obj["replica"] == "c3" and obj["replica_params"]["rate_control"] == 0.0
    bad = cli("simulate", "--trace", str(path), "--policy", "fifo", "--replica", "nearest")
    assert bad.exit_code == 2 and "'replica'" in bad.stderr
    neg = cli("simulate", "--trace", str(_sized_trace(tmp_path, negative=True)), "--policy", "ds")
    assert neg.exit_code == 2 and ":7: field 'value_size'" in neg.stderr


def test_cli_size_aware_cost_changes_rein_and_is_reported(cli: Any, tmp_path: Path) -> None:
    path = _sized_trace(tmp_path)
    args = ("simulate", "--trace", str(path), "--policy", "rein", "--servers", "12", "--load", "0.6", "--json")
    plain = cli(*args)
    aware = cli(*args, "--size-aware-cost")
    assert plain.exit_code == 0 and aware.exit_code == 0, aware.stderr
    p, a = json.loads(plain.stdout), json.loads(aware.stdout)
    assert p["size_aware_cost"] is False and a["size_aware_cost"] is True
    # Same requests and demands (common random numbers); only the queue assignment differs.
    assert p["requests"] == a["requests"] and p["ops"] == a["ops"]
    assert (p["mean_ms"], p["p99_ms"]) != (a["mean_ms"], a["p99_ms"])
    # With a single queue the cost cannot matter: k=1 gives identical results with and without the flag.
    one = ("--param", "k=1")
    assert json.loads(cli(*args, *one).stdout)["p99_ms"] == json.loads(cli(*args, *one, "--size-aware-cost").stdout)[
        "p99_ms"
    ]
    nosize = cli("simulate", "--trace", str(path), "--policy", "rein", "--no-sizes", "--size-aware-cost")
    assert nosize.exit_code == 2 and "size_aware_cost" in nosize.stderr and "value sizes" in nosize.stderr
