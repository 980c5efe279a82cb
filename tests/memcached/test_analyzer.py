"""The layered queueing analyzer against hand-computed values."""

from __future__ import annotations

import math

import pytest
from kvsim.chisel import (
    PAPER_PROFILE,
    MemcachedSetup,
    SizeMix,
    _erlang_c,
    _fork_join_wait,
    grid_search,
    predict_mean_latency,
    query_threads_rule,
)

IDLE = 1e12  # inter-arrival (µs) so long that no queue ever forms


def test_no_load_elephant_split_in_four_chunks() -> None:
    # 100 keys in 4 chunks of 25: N_S = 85 + 6.5·25 = 247.5, P_S = 3.3 + 0.6·25 = 18.3 -> 265.8
    mix = SizeMix((100,), (1.0,), IDLE)
    dep = MemcachedSetup(query_threads=8)
    assert predict_mean_latency(mix, dep, 25, 1).mean_us == pytest.approx(265.8, abs=1e-6)
    # batching: 85 + 650 + 3.3 + 60 = 798.3
    assert predict_mean_latency(mix, dep, None, 1).mean_us == pytest.approx(798.3, abs=1e-6)


def test_no_load_more_chunks_than_threads_run_in_rounds() -> None:
    # L = 6 -> 17 chunks of at most 6 keys on 8 threads: 3 rounds of 85 + 39 + 3.3 + 3.6 = 130.9
    mix = SizeMix((100,), (1.0,), IDLE)
    p = predict_mean_latency(mix, MemcachedSetup(query_threads=8), 6, 1)
    assert p.max_chunks == 17
    assert p.mean_us == pytest.approx(3 * 130.9, abs=1e-6)


def test_no_load_mice_with_client_overhead() -> None:
    # 10-key mouse: 60 (overhead) + 85 + 65 + 3.3 + 6 = 219.3
    mix = SizeMix((10,), (1.0,), IDLE)
    p = predict_mean_latency(mix, MemcachedSetup(query_threads=8, client_overhead_us=60.0), None, 1)
    assert p.mean_us == pytest.approx(219.3, abs=1e-6)
    assert p.mice_us == pytest.approx(219.3, abs=1e-6)


def test_fork_join_wait_uses_harmonic_numbers() -> None:
    # every branch waits (rho = 1): θ·H_3 with θ = 2
    assert _fork_join_wait(3, 1.0, 2.0) == pytest.approx(2.0 * (1 + 1 / 2 + 1 / 3))
    # rho = 0.5, mean wait 1 (θ = 2): ∫ 1 - (1 - 0.5 e^{-x/2})^2 dx = 2 - 0.25
    assert _fork_join_wait(2, 0.5, 1.0) == pytest.approx(1.75)
    assert _fork_join_wait(1, 0.3, 4.0) == pytest.approx(4.0)


def test_erlang_c() -> None:
    assert _erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert _erlang_c(2, 1.0) == pytest.approx(1 / 3)


def test_client_layer_is_kingman_with_round_robin_arrivals() -> None:
    # batching of 10-key mice only, 2 threads, A = 200: S = 159.3 (+ tiny server wait), rho = S / 400,
    # ca² = 1/2, cs² = 0 -> W_C = rho/(1-rho) · 1/4 · S
    mix = SizeMix((10,), (1.0,), 200.0)
    p = predict_mean_latency(mix, MemcachedSetup(servers=1, worker_threads=4, query_threads=2), None, 1)
    s = 159.3 + p.server_wait_us
    rho = s / 400.0
    assert p.client_utilization == pytest.approx(rho)
    assert p.client_wait_us == pytest.approx(rho / (1 - rho) * 0.25 * s, rel=1e-6)
    assert p.mean_us == pytest.approx(p.client_wait_us + s, rel=1e-9)


def test_overload_is_reported_unstable() -> None:
    mix = SizeMix.mice_elephant(10, 9, 20.0)
    p = predict_mean_latency(mix, MemcachedSetup(query_threads=8), None, 1)
    assert not p.stable and math.isinf(p.mean_us)


def test_query_thread_rule() -> None:
    assert query_threads_rule(2, 4, 0.0, 95.4) == 8
    assert query_threads_rule(2, 4, 180.0, 95.4) == 16  # ceil(8 · 180 / 95.4)
    mix = SizeMix((10,), (1.0,), 1000.0)
    assert MemcachedSetup().threads_for(mix) == 8
    # client phase 200 > T_S(10) = 159.3 -> ceil(8 · 200 / 159.3) = 11
    assert MemcachedSetup(client_overhead_us=200.0).threads_for(mix) == 11


def test_grid_search_low_load_splits_but_never_beyond_the_threads() -> None:
    for mice, ratio in ((1, 5), (5, 9), (10, 9)):
        levels = grid_search(SizeMix.mice_elephant(mice, ratio, 1000.0), MemcachedSetup(query_threads=8))
        assert 1 < levels.chunks <= 8
        assert levels.merge == 1
        assert levels.predicted.mean_us < levels.batching.mean_us
        assert levels.evaluated >= 16


def test_grid_search_merges_near_saturation_with_overhead() -> None:
    # A = 50 µs with 180 µs of client overhead: the query threads are ~98% busy under batching; merging
    # pools the overhead and brings the predicted mean down by more than 5x
    levels = grid_search(
        SizeMix.mice_elephant(1, 5, 50.0), MemcachedSetup(query_threads=8, client_overhead_us=180.0)
    )
    assert levels.batching.client_utilization > 0.95
    assert levels.merge > 1
    assert levels.predicted.stable
    assert levels.predicted.mean_us < levels.batching.mean_us / 5
    assert levels.predicted.mean_merged > 1.5


def test_paper_profile() -> None:
    assert PAPER_PROFILE.processing_us(100) == pytest.approx(63.3)
    assert PAPER_PROFILE.network_us(100) == pytest.approx(735.0)
