"""Duplication and speculative retry vs fifo across offered load (Rein §5.1, Fig. 9 shape).

Model: 16 servers × 8 slots, RF 3 (Rein's testbed: 16 nodes, concurrency 8, RF 3), 3750 ops/s per slot, 50 µs
one way, 16 clients, lognormal(1.5, 1.0) multiget sizes (≥ 1 key, mean ≈ 7.4), uniform keys over 1 M ids,
open-loop Poisson, exponential demands, warm-up 10%. Offered load counts the original ops only (copies add to it).
Run: .venv/bin/python -m validation.sim_redundancy [--requests 20000]
"""

from __future__ import annotations

import argparse

import kvsim
import numpy as np

LOADS = (0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.90)
POLICIES: tuple[tuple[str, dict[str, float]], ...] = (
    ("fifo", {}),
    ("duplicate", {}),
    ("speculative", {}),
    ("speculative", {"percentile": 99.0}),
)


def make(cluster: kvsim.Cluster, n: int, load: float, seed: int) -> kvsim.Workload:
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, np.ceil(rng.lognormal(1.5, 1.0, n))).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = rng.integers(0, 1_000_000, int(offsets[-1])).astype(np.uint64)
    return kvsim.Workload(cluster, offsets, keys=keys, load=load, seed=seed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20_000)
    args = ap.parse_args()
    cluster = kvsim.Cluster(servers=16, slots=8, replication=3, clients=16)
    print("| load | policy | p50 ms | p95 ms | p99 ms | util (incl. copies) | copies / ops | copy wins | steady |")
    print("|---|---|---|---|---|---|---|---|---|")
    for load in LOADS:
        wl = make(cluster, args.requests, load, 1)
        for policy, params in POLICIES:
            r = kvsim.replay(wl, kvsim.ReplayConfig(policy=policy, params=params, replica="round-robin"))
            pct = params.get("percentile", 90.0)
            label = policy + (f" p{pct:.0f}" if policy == "speculative" else "")
            cop = r.copies or {"ops": 0, "wins": 0}
            print(
                f"| {load:.2f} | {label} | {r.p50_ms:.2f} | {r.p95_ms:.2f} | {r.p99_ms:.2f} | {r.utilization:.2f} |"
                f" {cop['ops'] / r.ops:.2f} | {cop['wins']} | {'yes' if r.steady_state else '**no**'} |"
            )


if __name__ == "__main__":
    main()
