"""Simulator speed: events/s per policy on the fork-join model of issue 3, ratio to the Python reference.

Model: 128 servers × 8 slots, RF 3, 3750 ops/s per slot, 50 µs, lognormal(2.5, 1.25) multiget sizes
(rounded up, ≥ 1), uniform keys over 1 M ids, Poisson arrivals at 75% load.
Run: PYTHONPATH=. .venv/bin/python bench/sim_speed.py
"""

from __future__ import annotations

import argparse
import time

import kvsim
import numpy as np

from tests.simulator.reference import reference_latencies


def make(cluster: kvsim.Cluster, n: int, seed: int) -> kvsim.Workload:
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, np.ceil(rng.lognormal(2.5, 1.25, n))).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = rng.integers(0, 1_000_000, int(offsets[-1])).astype(np.uint64)
    return kvsim.Workload(cluster, offsets, keys=keys, load=0.75, seed=seed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--python-requests", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cluster = kvsim.Cluster()
    t = time.perf_counter()
    wl = make(cluster, args.requests, 1)
    mat = time.perf_counter() - t
    print(f"materialize {args.requests} requests ({wl.ops} ops, {wl.opsets} opsets): {mat:.3f} s")
    print("policy        wall_s  events     M ev/s  M ops/s  bytes/op  p99_ms  steady")
    for policy in kvsim.policy_names():
        best = None
        for _ in range(args.repeat):
            r = wl.replay(policy)
            if best is None or r.sim_wall_s < best.sim_wall_s:
                best = r
        assert best is not None
        print(
            f"{policy:12s} {best.sim_wall_s:7.3f} {best.events:9d} {best.events_per_s / 1e6:8.2f}"
            f" {best.ops / best.sim_wall_s / 1e6:8.2f} {best.bytes_per_op:9.1f} {best.p99_ms:7.3f}"
            f"  {best.steady_state}"
        )
    small = make(cluster, args.python_requests, 2)
    arrays = small.arrays()
    for policy in ("fifo", "rein"):
        rust = min((small.replay(policy) for _ in range(args.repeat)), key=lambda r: r.sim_wall_s)
        t = time.perf_counter()
        reference_latencies(arrays, servers=128, slots=8, clients=128, net_latency_ns=50_000, policy=policy)
        py = time.perf_counter() - t
        print(
            f"python reference {policy}: {args.python_requests} requests {py:.2f} s "
            f"({rust.events / py / 1e6:.2f} M ev/s) vs rust {rust.sim_wall_s:.4f} s "
            f"→ {py / rust.sim_wall_s:.0f}×"
        )


if __name__ == "__main__":
    main()
