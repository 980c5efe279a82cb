"""server speeds / slowdowns, writes at every replica, closed-loop clients through kvsim and the CLI.
Exact schedules are hand-worked in simulator/core/tests/heterogeneity.rs; here: the binding's figures on small
hand-worked cases, wiring, JSON keys and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kvsim
import numpy as np
import pytest

# Evenly spaced ring of 2 servers: the token of ring position g is -2^63 + g * ((2^64 - 1) // 2).
_STEP = (2**64 - 1) // 2


def _tokens(groups: list[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.array([-(2**63) + g * _STEP for g in groups], dtype=np.int64)


def _two_servers(replication: int = 1, servers: int = 2) -> kvsim.Cluster:
    return kvsim.Cluster(
        servers=servers, slots=1, replication=replication, service_rate=1000.0, net_latency_us=50.0, clients=1
    )


def test_closed_loop_one_thread_on_a_half_speed_server_is_exact() -> None:
    # Three single-key requests to server 1 (speed 0.5), deterministic demand 1 ms → 2 ms of service each.
    # One thread, fixed think 0.3 ms: arrivals 0, 2.1 + 0.3 = 2.4, 4.8 ms; latency 0.05 + 2 + 0.05 = 2.1 ms.
    c = _two_servers()
    wl = kvsim.Workload(
        c, np.arange(4), tokens=_tokens([1, 1, 1]), load=0.5, seed=1, demand_dist="deterministic"
    )
    res = kvsim.replay(
        wl,
        kvsim.ReplayConfig(
            policy="fifo",
            replica="round-robin",
            warmup=0.0,
            servers=kvsim.ServerModel(speeds=(1.0, 0.5)),
            closed=kvsim.ClosedLoop(threads=1, think_ms=0.3, think_dist="fixed"),
        ),
    )
    assert res.latency_ms.tolist() == pytest.approx([2.1, 2.1, 2.1])
    assert res.arrival_ms is not None and res.arrival_ms.tolist() == pytest.approx([0.0, 2.4, 4.8])
    assert res.closed is not None
    assert res.closed["makespan_s"] == pytest.approx(6.9e-3)
    assert res.closed["throughput_rps"] == pytest.approx(3 / 6.9e-3)
    # Server 1 was busy 6 ms over the 6.9 ms makespan (1 slot; a closed loop's load is its achieved utilization,
    # not demand over the 4.8 ms span of the issue times); server 0 idle.
    assert res.server_load.tolist() == pytest.approx([0.0, 6.0 / 6.9])
    assert res.steady_state
    j: dict[str, Any] = res.to_json()
    assert j["client_model"] == "closed" and j["servers"]["capacity_factor"] == pytest.approx(0.75)
    assert j["servers"]["slow_servers"] == 1


def test_writes_are_served_at_every_replica_and_triple_the_work() -> None:
    c = _two_servers(replication=3, servers=3)
    rng = np.random.default_rng(2)
    tokens = rng.integers(-(2**63), 2**63 - 1, 400, dtype=np.int64)
    wl = kvsim.Workload(c, np.arange(401), tokens=tokens, load=0.1, seed=3, demand_dist="deterministic")
    reads = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="round-robin"))
    writes = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="round-robin", writes=np.ones(400, dtype=bool)))
    assert writes.writes == {"ops": 400, "copies": 800}
    # Deterministic 1 ms demands: every write costs 3 ms of server time, a read 1 ms.
    assert writes.utilization == pytest.approx(3 * reads.utilization)
    assert reads.writes is None and reads.to_json()["client_model"] == "open"
    # Consistency ONE: a write is answered by the first of its replicas, so it is never slower than the
    # slowest read path — at this light load most requests see no queue at all: 1.1 ms.
    assert np.median(writes.latency_ms) == pytest.approx(1.1)
    mixed = kvsim.write_flags(400, write_fraction=0.25, seed=5)
    assert 60 < int(mixed.sum()) < 140
    assert kvsim.write_flags(3, ops=["GET", "set", "update"]).tolist() == [False, True, True]


def test_slowdowns_make_load_aware_selection_pay() -> None:
    c = kvsim.Cluster(servers=12, slots=4, replication=3, service_rate=1000.0, clients=12)
    rng = np.random.default_rng(4)
    n = 6000
    model = kvsim.ServerModel(slowdown=kvsim.Slowdown(interval_ms=200.0, fraction=0.25, factor=4.0))
    cf = model.capacity_factor(12)
    assert cf == pytest.approx(1 - 0.25 * 0.75)
    wl = kvsim.Workload(c, np.arange(n + 1), keys=rng.integers(0, 10**6, n).astype(np.uint64), load=0.5 * cf, seed=4)
    rr = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="round-robin", servers=model))
    lo = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="least-outstanding", servers=model))
    plain = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="round-robin"))
    # Slowed servers hurt oblivious selection's tail; least-outstanding routes around them.
    assert rr.p99_ms > 1.5 * plain.p99_ms
    assert lo.p99_ms < rr.p99_ms
    rj: dict[str, Any] = rr.to_json()
    assert rj["servers"]["slowdown"]["duration_ms"] == 200.0


def test_bad_model_parameters_are_named() -> None:
    with pytest.raises(kvsim.ParameterError, match="server_speeds"):
        kvsim.ServerModel(speeds=(1.0,)).capacity_factor(2)
    with pytest.raises(kvsim.ParameterError, match="slowdown_duration"):
        slow = kvsim.Slowdown(interval_ms=1.0, fraction=0.5, factor=2.0, duration_ms=2.0)
        kvsim.ServerModel(slowdown=slow).capacity_factor(2)
    with pytest.raises(kvsim.ParameterError, match="threads"):
        kvsim.ClosedLoop(threads=0).native()
    with pytest.raises(kvsim.ParameterError, match="write_fraction"):
        kvsim.write_flags(3, write_fraction=1.5)


def _trace(tmp_path: Path, with_op: bool) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    n = 2000
    cols: dict[str, Any] = {
        "request_id": np.arange(n),
        "ts": np.arange(n) * 1e-3,
        "key": [f"k{x}" for x in rng.integers(0, 5000, n)],
    }
    if with_op:
        cols["op"] = np.where(np.arange(n) % 4 == 0, "set", "get")
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table(cols), path)
    return path


def test_cli_json_for_speeds_writes_and_closed_loop(cli: Any, tmp_path: Path) -> None:
    path = _trace(tmp_path, with_op=True)
    out = cli(
        "simulate", "--trace", str(path), "--policy", "rein", "--replica", "c3", "--servers", "8",
        "--slow-servers", "2", "--slow-factor", "4", "--writes-from-op", "--client-model", "closed",
        "--threads", "16", "--think-ms", "0.5", "--think-dist", "fixed", "--json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["policy"] == "rein" and obj["replica"] == "c3"
    assert obj["servers"]["speeds"] == [0.25, 1.0, 1.0, 1.0, 0.25, 1.0, 1.0, 1.0]
    assert obj["servers"]["capacity_factor"] == pytest.approx((6 + 0.5) / 8)
    assert obj["writes"] == {"source": "op column", "ops": 500, "copies": 1000}
    assert obj["client_model"] == "closed"
    cl = obj["closed"]
    assert (cl["threads"], cl["think_ms"], cl["think_dist"]) == (16, 0.5, "fixed")
    # 16 threads, each request ≥ 0.1 ms of network + think 0.5 ms: at most 16 / 0.6 ms requests per second.
    assert 0 < cl["throughput_rps"] < 16 / 0.6e-3
    out = cli(
        "simulate", "--trace", str(path), "--policy", "fifo", "--servers", "8", "--write-fraction", "0.5",
        "--slowdown-interval-ms", "20", "--slowdown-fraction", "0.25", "--json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["writes"]["source"] == "write_fraction" and 800 < obj["writes"]["ops"] < 1200
    assert obj["writes"]["copies"] == 2 * obj["writes"]["ops"]
    assert obj["servers"]["slowdown"] == {"interval_ms": 20.0, "fraction": 0.25, "factor": 3.0, "duration_ms": 20.0}
    assert obj["client_model"] == "open" and "closed" not in obj


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--client-model", "half-open"], "client_model"),
        (["--client-model", "closed", "--threads", "0"], "threads"),
        (["--write-fraction", "1.5"], "write_fraction"),
        (["--server-speeds", "1,x"], "server_speeds"),
        (["--server-speeds", "1,1"], "server_speeds"),
        (["--slow-servers", "9"], "slow_servers"),
        (["--slowdown-interval-ms", "10", "--slowdown-duration-ms", "20"], "slowdown_duration"),
        (["--writes-from-op"], "op"),
    ],
)
def test_cli_bad_extension_input_exits_2_naming_the_field(
    cli: Any, tmp_path: Path, args: list[str], field: str
) -> None:
    path = _trace(tmp_path, with_op=False)
    out = cli("simulate", "--trace", str(path), "--policy", "fifo", "--servers", "8", *args)
    assert out.exit_code == 2, out.stdout
    assert field in out.stderr


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--write-fraction", "0.1"], "write_fraction"),
        (["--size-aware-cost"], "size_aware_cost"),
        (["--client-model", "closed"], "client_model"),
    ],
)
def test_cli_memcached_policies_refuse_the_cassandra_extensions(
    cli: Any, tmp_path: Path, args: list[str], field: str
) -> None:
    path = _trace(tmp_path, with_op=False)
    out = cli("simulate", "--trace", str(path), "--policy", "chisel", *args)
    assert out.exit_code == 2 and field in out.stderr, out.stderr
