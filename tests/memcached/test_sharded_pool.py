"""The sharded memcached pool: keys placed by the client's rendezvous hash (bit for bit pymemcache's HashClient),
one multiget per server touched, chisel's split/merge on the per-server batches; exact hand-worked cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pymemcache.client.rendezvous import RendezvousHash
from tailtune_client.hashing import server_for

from base.errors import BadInputError
from simulation import memcached
from simulation.memcached import MemcachedDeployment

# the paper profile: a query of k keys that does not wait takes N_S + P_S = 85 + 6.5k + 3.3 + 0.6k µs
A_PLUS_C, B_PLUS_D = 88.3, 7.1


def _table(requests: list[tuple[float, list[str]]]) -> pa.Table:
    rid, ts, keys = [], [], []
    for i, (t, ks) in enumerate(requests):
        rid += [i] * len(ks)
        ts += [t] * len(ks)
        keys += ks
    return pa.table({"request_id": pa.array(rid, pa.int64()), "ts": pa.array(ts, pa.float64()),
                     "key": pa.array(keys, pa.string()), "value_size": pa.array([100] * len(keys), pa.int64())})


def _batches(keys: list[str], names: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in keys:
        s = server_for(k, names)
        out[s] = out.get(s, 0) + 1
    return out


def test_placement_is_the_clients_and_pymemcaches_hash() -> None:
    dep = MemcachedDeployment(servers=3, pool="sharded", server_addresses="10.0.0.1:11211,10.0.0.2:11211,mc:7000")
    names = dep.addresses()
    ring = RendezvousHash(nodes=list(names))
    rng = np.random.default_rng(5)
    keys = [f"user:{int(x)}:{'ab' * int(y)}" for x, y in zip(rng.integers(0, 10**9, 5000), rng.integers(0, 4, 5000),
                                                               strict=True)]
    requests = [(i * 1e-3, keys[i * 50 : (i + 1) * 50]) for i in range(100)]
    trace = memcached.prepare(_table(requests))
    sh = memcached.shards_for(trace, dep, 100)
    for i, (_, ks) in enumerate(requests):
        assert trace.request_keys(i) == ks
        lo, hi = int(sh.offsets[i]), int(sh.offsets[i + 1])
        got = {names[int(s)]: int(k) for s, k in zip(sh.server[lo:hi], sh.keys[lo:hi], strict=True)}
        assert got == _batches(ks, names)
        assert all(server_for(k, names) == ring.get_node(k) for k in ks)
        # batches in the order of their first key, as the client submits them
        assert [names[int(s)] for s in sh.server[lo:hi]] == list(dict.fromkeys(server_for(k, names) for k in ks))


def test_sharded_batching_takes_the_largest_server_batch() -> None:
    dep = MemcachedDeployment(servers=2, worker_threads=1, query_threads=2, pool="sharded")
    names = dep.addresses()
    requests = [(0.0, [f"a{j}" for j in range(30)]), (1.0, [f"b{j}" for j in range(7)])]
    trace = memcached.prepare(_table(requests))
    r = memcached.replay(trace, dep, "batching", {}, seed=1)
    widest = [max(_batches(ks, names).values()) for _, ks in requests]
    assert r.latencies_ms.tolist() == pytest.approx([(A_PLUS_C + B_PLUS_D * w) / 1e3 for w in widest], abs=1e-9)
    assert r.queries == sum(len(_batches(ks, names)) for _, ks in requests)
    assert r.query_threads == 2


def test_sharded_chisel_splits_per_server_batch() -> None:
    # elephant (> 10 keys): each server's batch is split into chunks of at most 4 keys, one lane thread each
    # (4 threads per lane, 4 workers per server): the request takes the largest chunk's round trip
    dep = MemcachedDeployment(servers=2, worker_threads=4, query_threads=8, pool="sharded")
    names = dep.addresses()
    keys = [f"e{j}" for j in range(16)]
    b = _batches(keys, names)
    trace = memcached.prepare(_table([(0.0, keys)]))
    r = memcached.replay(trace, dep, "chisel", {"split_keys": 4, "merge": 1, "elephant_threshold": 10}, seed=1)
    chunks = {s: -(-k // 4) for s, k in b.items()}
    assert all(c <= 4 for c in chunks.values()), b  # every chunk has its own thread and worker
    largest = max(-(-k // c) for k, c in zip(b.values(), chunks.values(), strict=True))
    assert r.queries == sum(chunks.values())
    assert r.latencies_ms[0] == pytest.approx((A_PLUS_C + B_PLUS_D * largest) / 1e3, abs=1e-9)


def test_replica_is_the_default_and_sharded_needs_keys() -> None:
    assert MemcachedDeployment().pool == "replica"
    trace = memcached.prepare(pa.table({"request_id": pa.array([0, 0, 1], pa.int64()),
                                        "ts": pa.array([0.0, 0.0, 1e-3])}))
    base = memcached.replay(trace, MemcachedDeployment(), "batching", {}, seed=3)
    assert base.latencies_ms.tolist() == memcached.replay(
        trace, MemcachedDeployment(pool="replica"), "batching", {}, seed=3).latencies_ms.tolist()
    with pytest.raises(BadInputError, match="needs the trace's keys"):
        memcached.replay(trace, MemcachedDeployment(pool="sharded"), "batching", {}, seed=3)
    with pytest.raises(BadInputError, match="unknown memcached pool"):
        memcached.replay(trace, MemcachedDeployment(pool="ring"), "batching", {}, seed=3)
    with pytest.raises(BadInputError, match="distinct host:port"):
        MemcachedDeployment(servers=2, server_addresses="a:1").addresses()


def test_simulate_cli_pool_sharded(cli, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(_table([(i * 1e-3, [f"k{i}-{j}" for j in range(1 + (i % 3) * 40)]) for i in range(60)]), path)
    res = cli("simulate", "--trace", str(path), "--policy", "batching", "--pool", "sharded", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["requests"] == 60
    assert out["ops"] > 60  # the 41- and 81-key requests touch both servers
    dep = MemcachedDeployment(pool="sharded")
    assert dep.cli_args() == ["--pool", "sharded"]


def test_tuner_evaluator_takes_the_pool_option() -> None:
    from tuner.evaluators._kvsim_memcached import KvsimMemcachedEvaluator
    from tuner.space import Candidate

    src = {"profile": "mice-elephant", "requests": 200}
    ev = KvsimMemcachedEvaluator(src, pool="sharded")
    assert ev.setup.pool == "sharded" and ev.spec().options["pool"] == "sharded"
    m = ev.evaluate(Candidate("batching", {}), seed=1)
    rep = KvsimMemcachedEvaluator(src).evaluate(Candidate("batching", {}), seed=1)
    assert m.p50_ms > 0 and m != rep  # fan-out over servers changes the figures
    assert "--pool" in ev.simulate_args(Candidate("batching", {}), 1)
