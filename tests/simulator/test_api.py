"""kvsim Python API and `tailtune simulate`: typed results, errors naming parameters, records, JSON keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kvsim
import numpy as np
import pytest

JSON_KEYS = {
    "policy",
    "params",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "p999_ms",
    "mean_ms",
    "requests",
    "ops",
    "events",
    "utilization",
    "server_load_max",
    "steady_state",
    "sim_wall_s",
    "events_per_s",
}


def _small(load: float = 0.5, seed: int = 3) -> kvsim.Workload:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, 500)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = [f"user:{k}" for k in rng.integers(0, 1000, int(offsets[-1]))]
    return kvsim.Workload(
        kvsim.Cluster(servers=8, slots=2, clients=4), offsets, keys=keys, load=load, seed=seed
    )


def test_hand_worked_fifo_two_requests() -> None:
    # RF 1 on 2 servers; both single-op requests hit the same key → same server, one slot: the second waits.
    cluster = kvsim.Cluster(
        servers=2, slots=1, replication=1, clients=1, net_latency_us=50.0, service_rate=1000.0
    )
    wl = kvsim.Workload(cluster, [0, 1, 2], keys=["a", "a"], timestamps=[0.0, 0.0], load=None)
    arrays = wl.arrays()
    d = arrays["demand_ns"].astype(np.int64)
    res = kvsim.replay(wl, kvsim.ReplayConfig(warmup=0.0))
    expected = np.array([d[0] + 100_000, d[0] + d[1] + 100_000]) / 1e6
    np.testing.assert_allclose(res.latency_ms, expected, rtol=0, atol=1e-9)
    assert res.requests == 2 and res.ops == 2 and res.events == 2 * 2 + 2


def test_same_seed_same_workload_across_policies() -> None:
    wl = _small()
    a = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein"))
    b = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein"))
    np.testing.assert_array_equal(a.latency_ms, b.latency_ms)
    f = kvsim.replay(wl)
    assert f.ops == a.ops and f.events == a.events
    assert f.utilization == a.utilization  # same demands, same arrivals


def test_bad_parameters_name_the_parameter() -> None:
    wl = _small()
    with pytest.raises(ValueError, match=r"'k'.*1\.\.=64"):
        kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", params={"k": 0}))
    with pytest.raises(kvsim.ParameterError, match="'policy'"):
        kvsim.replay(wl, kvsim.ReplayConfig(policy="lifo"))
    with pytest.raises(ValueError, match="'slots'"):
        kvsim.Cluster(slots=0)
    with pytest.raises(ValueError, match="'load'"):
        kvsim.Workload(kvsim.Cluster(servers=4), [0, 1], keys=["a"], load=-1.0)


def test_records_are_consistent_and_export_to_arrow() -> None:
    wl = _small()
    res = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein-sds", record_ops=True))
    rec = res.records
    assert rec is not None
    assert set(rec) == {"request", "opset", "server", "slot", "enqueue_ns", "start_ns", "end_ns", "demand_ns"}
    assert np.all(rec["end_ns"] - rec["start_ns"] == rec["demand_ns"])
    assert np.all(rec["start_ns"] >= rec["enqueue_ns"])
    table = res.records_table()
    assert table.num_rows == res.ops


def test_overload_is_flagged() -> None:
    res = kvsim.replay(_small(load=1.3))
    assert not res.steady_state
    assert res.server_load_max >= 1.0


def _trace(tmp_path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    rid = np.repeat(np.arange(300), rng.integers(1, 8, 300))
    keys = [f"k{x}" for x in rng.integers(0, 500, len(rid))]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"request_id": rid, "ts": rid * 0.001, "key": keys}), path)
    return path


def test_cli_json_has_the_contract_keys(cli: Any, tmp_path: Path) -> None:
    path = _trace(tmp_path)
    out = cli(
        "simulate", "--trace", str(path), "--policy", "rein", "--servers", "8", "--param", "k=3", "--json"
    )
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert set(obj) >= JSON_KEYS
    assert obj["params"]["k"] == 3.0 and obj["policy"] == "rein" and obj["requests"] == 300


def test_cli_warns_when_not_steady_and_rejects_bad_params(cli: Any, tmp_path: Path) -> None:
    path = _trace(tmp_path)
    out = cli(
        "simulate", "--trace", str(path), "--policy", "fifo", "--servers", "4", "--load", "1.5", "--json"
    )
    assert out.exit_code == 0
    assert "not in steady state" in out.stderr
    bad = cli("simulate", "--trace", str(path), "--policy", "rein", "--param", "r_q1=abc")
    assert bad.exit_code == 2
    assert "field 'r_q1'" in bad.stderr
