"""The memcached client host (`client_cpus`, `client_processes`, `client_key_us`) reaches kvsim's engine from the
kvsim API and from tailtune's deployment: one request fanned out to 3 servers, its per-query overhead served in
turn on one CPU (CPython) or in parallel (unbounded), exact simulated times."""

from __future__ import annotations

import kvsim
import numpy as np
import pytest
from kvsim.chisel import MemcachedSetup, ServiceProfile

from simulation import memcached
from simulation.memcached import MemcachedDeployment, MemcachedTrace

# P_S = 1 + k, N_S = 10 + 2k: a one-key query takes 5 + 2 + 7 = 14 µs after its client work.
SIMPLE = ServiceProfile(1.0, 1.0, 10.0, 2.0)


def _kvsim(cpus: int, processes: int = 1, key_us: float = 0.0) -> kvsim.memcached.MemcachedResult:
    dep = MemcachedSetup(servers=3, worker_threads=1, query_threads=3 * processes, client_overhead_us=100.0,
                      profile=SIMPLE, client_cpus=cpus, client_processes=processes, client_key_us=key_us)
    shards = kvsim.memcached.shards_from_keys([0, 3], [0, 1, 2])
    return kvsim.memcached.replay([3], [0.0], kvsim.MemcachedConfig(policy="batching", deployment=dep,
                                                                    shards=shards))


def test_kvsim_client_cpus_serialize_the_overhead() -> None:
    assert _kvsim(0).latencies_ms.tolist() == [pytest.approx(0.114, abs=1e-12)]
    one = _kvsim(1)
    assert one.latencies_ms.tolist() == [pytest.approx(0.314, abs=1e-12)]  # 3 × 100 + 14 µs
    assert one.client_cpu_wait_us == pytest.approx(300.0)
    assert one.client_cpu_load == pytest.approx(300.0 / 314.0)
    assert _kvsim(2).latencies_ms.tolist() == [pytest.approx(0.214, abs=1e-12)]
    # the per-key parse (10 µs per key) after each response, in turn on the CPU behind the overheads queued
    # before it: parses of q0 300–310, q1 310–320, q2 (back at 314) 320–330
    assert _kvsim(1, key_us=10.0).latencies_ms.tolist() == [pytest.approx(0.330, abs=1e-12)]


def test_kvsim_rejects_a_bad_client_host() -> None:
    with pytest.raises(ValueError, match="client_processes"):
        MemcachedSetup(client_processes=0).validate()
    with pytest.raises(ValueError, match="client_cpus"):
        MemcachedSetup(client_cpus=-1).validate()
    with pytest.raises(ValueError, match="client_key_us"):
        MemcachedSetup(client_key_us=-1.0).validate()


def _trace(names: tuple[str, ...]) -> MemcachedTrace:
    """One request of 3 keys, one on each server."""
    from tailtune_client.hashing import server_index

    picked: dict[int, str] = {}
    for i in range(1000):
        picked.setdefault(server_index(f"k{i}", names), f"k{i}")
        if len(picked) == len(names):
            break
    keys = [picked[s] for s in sorted(picked)]
    return MemcachedTrace(source="t", sizes=np.array([3]), arrivals=np.array([0.0]),
                          keys=np.array(keys, dtype=object), key_offsets=np.array([0, 3]))


def test_tailtune_deployment_defaults_to_a_parallel_client_and_passes_the_client_host() -> None:
    # the default is the parallel client: the number of application processes is not known, and one simulated
    # CPython process for a whole fleet's trace would saturate
    assert (MemcachedDeployment().client_cpus, MemcachedDeployment().client_processes) == (0, 1)
    base = MemcachedDeployment(servers=3, worker_threads=1, query_threads=3, client_overhead_us=100.0,
                               pool="sharded", client_cpus=1)
    trace = _trace(base.addresses())
    # the default (paper) profile: P_S = 3.3 + 0.6k, N_S = 85 + 6.5k → 95.4 µs for one key after the client work
    one = memcached.replay(trace, base, "batching", {}, 0)
    assert one.latencies_ms.tolist() == [pytest.approx(0.3954, abs=1e-9)]
    par = memcached.replay(trace, MemcachedDeployment(**{**base.as_dict(), "client_cpus": 0}), "batching", {}, 0)
    assert par.latencies_ms.tolist() == [pytest.approx(0.1954, abs=1e-9)]
    three = memcached.replay(trace, MemcachedDeployment(**{**base.as_dict(), "client_processes": 3,
                                                           "query_threads": 9}), "batching", {}, 0)
    assert three.latencies_ms.tolist() == [pytest.approx(0.3954, abs=1e-9)]  # one request: one process


def test_client_host_fields_round_trip_through_records_and_cli_args() -> None:
    base = MemcachedDeployment()
    assert not {"client_cpus", "client_processes", "client_key_us"} & set(base.as_dict())
    dep = MemcachedDeployment(client_cpus=1, client_processes=4, client_key_us=3.5)
    d = dep.as_dict()
    assert (d["client_cpus"], d["client_processes"], d["client_key_us"]) == (1, 4, 3.5)
    assert MemcachedDeployment.from_dict(d) == dep
    args = dep.cli_args()
    assert args[args.index("--client-cpus") + 1] == "1"
    assert args[args.index("--client-processes") + 1] == "4"
    assert args[args.index("--client-key-us") + 1] == "3.5"
