"""Against a real memcached on 127.0.0.1: the profiler's fit and a brief load-generator run."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.memcached_profile import fit_line, profile_memcached
from base.errors import TailtuneError
from tests.servers.cassandra_server import free_port
from tests.servers.memcached_loadgen import QueryPlan, mice_elephant_workload, plan_queries, run_loadgen
from tests.servers.memcached_server import MemcachedNode


def test_fit_line_exact() -> None:
    f = fit_line([1, 2, 3], [5.0, 7.0, 9.0])
    assert (f.intercept, f.slope, f.r2) == pytest.approx((3.0, 2.0, 1.0))
    with pytest.raises(ValueError):
        fit_line([4, 4], [1.0, 2.0])


def test_profiler_fits_positive_slopes(memcached_server: MemcachedNode) -> None:
    prof = profile_memcached(memcached_server.host, memcached_server.port, ks=(1, 50, 100, 150, 200), reps=30,
                             warmup=3)
    a, b, c, d = prof.coefficients()
    # more keys cost more on the server and on the wire (200 keys against 1 is a tenfold difference, far above any
    # jitter of medians over 30 repetitions). How linear the round trip is depends on the machine's noise, so the
    # test checks that the reported fit is the fit of the reported medians, not a bound on R².
    assert prof.processing.slope > 0 and prof.network.slope > 0
    assert b > 0 and d > 0
    assert prof.total_us[-1] > prof.total_us[0]
    assert prof.total == fit_line(prof.ks, prof.total_us)
    assert 0.0 <= prof.total.r2 <= 1.0
    assert prof.to_dict()["r2_total"] == prof.total.r2
    print(f"profile: P_S = {a:.1f} + {b:.2f}K, N_S = {c:.1f} + {d:.2f}K, R² total {prof.total.r2:.3f}")


def test_profiler_names_the_address_it_cannot_reach() -> None:
    port = free_port()  # nothing listens there: the profiler starts no server of its own
    with pytest.raises(TailtuneError, match=rf"^memcached at 127\.0\.0\.1:{port}: "):
        profile_memcached("127.0.0.1", port, ks=(1, 2), reps=1)


def test_plan_queries_follows_the_simulator_dispatcher() -> None:
    plans = plan_queries([100, 5, 5, 5, 101], "chisel", threads=4, split_keys=50, merge=2)
    assert plans == [
        [QueryPlan(0, 0, 50, None), QueryPlan(0, 1, 50, None)],
        [QueryPlan(1, 2, 5, 0)],
        [QueryPlan(2, 2, 5, 0)],
        [QueryPlan(3, 3, 5, 1)],
        [QueryPlan(4, 0, 34, None), QueryPlan(4, 1, 34, None), QueryPlan(4, 2, 33, None)],
    ]
    assert [len(p) for p in plan_queries([100, 5], "batching", threads=4)] == [1, 1]


def test_loadgen_brief_run(memcached_server: MemcachedNode) -> None:
    sizes, arrivals = mice_elephant_workload(300, mice_keys=5, ratio=5, interarrival_us=1000.0, seed=4)
    expected_chunks = int(np.sum(np.where(sizes > 50, 4, 1)))
    at = (memcached_server.host, memcached_server.port)
    b = run_loadgen(*at, sizes, arrivals, "batching", query_threads=4, keyspace_size=200)
    c = run_loadgen(*at, sizes, arrivals, "chisel", split_keys=25, merge=1, keyspace_size=200)
    assert (b.requests, b.queries) == (300, 300)
    assert (c.requests, c.queries) == (300, expected_chunks)
    for r in (b, c):
        assert np.all(r.latencies_ms > 0)
        assert 0 < r.p50_ms <= r.p95_ms <= r.p99_ms
        assert r.mean_ms == pytest.approx(float(np.mean(r.latencies_ms)))
    m = run_loadgen(*at, sizes, arrivals, "chisel", split_keys=100, merge=3, keyspace_size=200)
    assert m.queries <= 300 and m.queries + m.merged_queries * 2 >= 300
