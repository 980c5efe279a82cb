"""`tailx` (TailX delay queue at the coordinator), `duplicate` and `speculative` through kvsim and the
CLI. The exact schedules are hand-worked in simulator/core/tests/tailx_redundancy.rs; here: wiring, defaults
reported, and behaviour that could fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def _multiget_trace(tmp_path: Path, n_req: int = 1500, keys: int = 5) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    n = n_req * keys
    k = rng.integers(0, 20000, n)
    size = np.where(k % 10 == 0, 524288, 1024)
    path = tmp_path / "mget.parquet"
    pq.write_table(
        pa.table({"request_id": np.repeat(np.arange(n_req), keys), "ts": np.repeat(np.arange(n_req) * 1e-3, keys),
                  "key": [f"k{x}" for x in k], "value_size": pa.array(size, type=pa.int64())}),
        path,
    )
    return path


def test_cli_tailx_runs_without_params_and_reports_derived_values(cli: Any, tmp_path: Path) -> None:
    path = _multiget_trace(tmp_path)
    out = cli("simulate", "--trace", str(path), "--policy", "tailx", "--servers", "12", "--load", "0.3", "--json")
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["policy"] == "tailx" and obj["replica"] == "ds"
    p = obj["params"]
    # Default calibration: a 1 KiB value costs 1 / 3750 s, a 512 KiB one 32 times that (mean demands).
    assert p["ts_ms"] == pytest.approx(1e3 / 3750, rel=1e-6)
    assert p["tl_ms"] == pytest.approx(32e3 / 3750, rel=1e-6)
    assert p["thr_l_bytes"] == obj["bloom"]["thr_l_bytes"] > 1024
    assert (p["allowance_scale"], p["min_allowance"]) == (1.0, 1.0)
    assert set(obj["classes"]) == {"small", "large"} and obj["steady_state"]


def test_cli_tailx_params_and_replica_override(cli: Any, tmp_path: Path) -> None:
    path = _multiget_trace(tmp_path)
    out = cli("simulate", "--trace", str(path), "--policy", "tailx", "--replica", "least-outstanding",
              "--param", "tl_ms=2", "--param", "thr_l_bytes=100000", "--servers", "12", "--load", "0.3", "--json")
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["replica"] == "least-outstanding"
    assert obj["params"]["tl_ms"] == 2.0 and obj["params"]["thr_l_bytes"] == 100000.0
    assert obj["bloom"]["thr_l_bytes"] == 100000.0
    bad = cli("simulate", "--trace", str(path), "--policy", "tailx", "--param", "allowance_scale=-1")
    assert bad.exit_code == 2 and "allowance_scale" in bad.stderr


def test_tailx_procrastination_only_delays_never_loses_ops() -> None:
    import kvsim

    cluster = kvsim.Cluster(servers=8, slots=2, replication=3, clients=4)
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 12, 600)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    wl = kvsim.Workload(cluster, offsets, keys=rng.integers(0, 10**6, offsets[-1]).astype(np.uint64),
                        load=0.4, seed=2)
    fifo = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", warmup=0.0))
    tx = kvsim.replay(wl, kvsim.ReplayConfig(policy="tailx", warmup=0.0))
    none = kvsim.replay(wl, kvsim.ReplayConfig(policy="tailx", params={"allowance_scale": 0.0}, warmup=0.0))
    assert tx.requests == fifo.requests == 600 and tx.ops == fifo.ops
    # allowance_scale 0 never delays: exactly fifo's schedule.
    np.testing.assert_array_equal(none.latency_ms, fifo.latency_ms)
    # Without sizes TL = TS = the mean demand; the params say so.
    assert dict(tx.params)["tl_ms"] == dict(tx.params)["ts_ms"] == pytest.approx(1e3 / cluster.service_rate)
    assert not np.array_equal(tx.latency_ms, fifo.latency_ms)


def test_duplicate_and_speculative_report_copies(tmp_path: Path) -> None:
    import kvsim

    cluster = kvsim.Cluster(servers=8, slots=2, replication=3, clients=4)
    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 6, 800)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    wl = kvsim.Workload(cluster, offsets, keys=rng.integers(0, 10**6, offsets[-1]).astype(np.uint64),
                        load=0.2, seed=3)
    fifo = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="round-robin"))
    dup = kvsim.replay(wl, kvsim.ReplayConfig(policy="duplicate", replica="round-robin"))
    spec = kvsim.replay(wl, kvsim.ReplayConfig(policy="speculative", params={"min_samples": 20}, replica="round-robin"))
    assert dup.copies is not None and spec.copies is not None
    assert dup.copies["ops"] == wl.ops and 0 < dup.copies["wins"] <= wl.ops
    assert dup.utilization == pytest.approx(2 * fifo.utilization, rel=1e-9)
    assert 0 < spec.copies["ops"] < wl.ops and spec.to_json()["copies"] == spec.copies
    assert "copies" not in fifo.to_json()
    assert dict(spec.params)["percentile"] == 90.0
    one = kvsim.Workload(kvsim.Cluster(servers=4, replication=1), offsets,
                         keys=np.arange(offsets[-1], dtype=np.uint64), load=0.2, seed=3)
    with pytest.raises(kvsim.KvsimError, match="replication"):
        kvsim.replay(one, kvsim.ReplayConfig(policy="duplicate"))
