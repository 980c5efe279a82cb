"""Differential tests: the Rust engine and the pure-Python reference give identical per-request latencies."""

from __future__ import annotations

import kvsim
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.simulator.reference import reference_latencies


def _workload(
    seed: int, servers: int, slots: int, rf: int, n: int, load: float
) -> tuple[kvsim.Workload, int]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, n)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = rng.integers(0, 200, int(offsets[-1])).astype(np.uint64)
    clients = int(rng.integers(1, 4))
    cluster = kvsim.Cluster(
        servers=servers, slots=slots, replication=rf, clients=clients, net_latency_us=20.0
    )
    return kvsim.Workload(cluster, offsets, keys=keys, load=load, seed=seed), clients


def _compare(seed: int, servers: int, slots: int, rf: int, n: int, load: float, policy: str) -> None:
    wl, clients = _workload(seed, servers, slots, rf, n, load)
    got = kvsim.replay(wl, kvsim.ReplayConfig(policy=policy, warmup=0.0)).latency_ms
    want = reference_latencies(
        wl.arrays(), servers=servers, slots=slots, clients=clients, net_latency_ns=20_000, policy=policy
    )
    np.testing.assert_array_equal(np.round(got * 1e6).astype(np.int64), np.asarray(want, dtype=np.int64))


def test_fifo_and_rein_match_reference_on_a_busy_cluster() -> None:
    for policy in ("fifo", "rein"):
        _compare(seed=11, servers=6, slots=2, rf=3, n=400, load=0.9, policy=policy)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    servers=st.integers(1, 8),
    slots=st.integers(1, 4),
    n=st.integers(1, 120),
    load=st.floats(0.1, 1.2),
    policy=st.sampled_from(["fifo", "rein"]),
)
def test_random_small_workloads_match_reference(
    seed: int, servers: int, slots: int, n: int, load: float, policy: str
) -> None:
    _compare(seed, servers, slots, min(servers, 3), n, load, policy)


def test_rein_reference_agrees_on_algorithm1_cases() -> None:
    from tests.simulator.reference import bottleneck_queue, slack_queue

    assert [bottleneck_queue(c, 4, 3.0, 1.0) for c in (1.0, 3.0, 9.0, 27.0, 100.0)] == [0, 1, 2, 3, 3]
    assert slack_queue(7.0, 10.0, 0, [5.0, 4.0, 3.0, 2.0]) == 2


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    servers=st.integers(1, 6),
    slots=st.integers(1, 3),
    n=st.integers(1, 100),
    policy=st.sampled_from(["fifo", "rein"]),
    threads=st.integers(0, 8),
    think_us=st.integers(0, 500),
)
def test_speeds_and_closed_loop_match_reference(
    seed: int, servers: int, slots: int, n: int, policy: str, threads: int, think_us: int
) -> None:
    """Per-server speeds (0.5, 1, 2, 0.3) and a closed loop with fixed think time, Rust vs reference."""
    wl, clients = _workload(seed, servers, slots, min(servers, 3), n, 0.7)
    speeds = tuple([0.5, 1.0, 2.0, 0.3][(seed + s) % 4] for s in range(servers))
    closed = kvsim.ClosedLoop(threads=threads, think_ms=think_us / 1000, think_dist="fixed") if threads else None
    cfg = kvsim.ReplayConfig(
        policy=policy, replica="round-robin", warmup=0.0, servers=kvsim.ServerModel(speeds=speeds), closed=closed
    )
    got = kvsim.replay(wl, cfg)
    want = reference_latencies(
        wl.arrays(),
        servers=servers,
        slots=slots,
        clients=clients,
        net_latency_ns=20_000,
        policy=policy,
        speeds=list(speeds),
        threads=threads,
        think_ns=think_us * 1000,
    )
    np.testing.assert_array_equal(
        np.round(got.latency_ms * 1e6).astype(np.int64), np.asarray(want, dtype=np.int64)
    )
