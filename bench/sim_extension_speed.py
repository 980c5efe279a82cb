"""Speed of the simulator's extension loop: events/s with each extension on alone (server speed factors,
time-varying slowdowns, writes, closed-loop clients) against the plain loop.

Model (the fork-join model of `bench/sim_speed.py`): 128 servers × 8 slots, RF 3, 3750 ops/s per slot, 50 µs,
lognormal(2.5, 1.25) multiget sizes (rounded up, ≥ 1), uniform keys over 1 M ids, Poisson arrivals at 75% of the
nominal capacity (so the slow-server cases are overloaded), fifo + round-robin, best of 3.
Run: .venv/bin/python -m bench.sim_extension_speed [--requests 100000]
"""

from __future__ import annotations

import argparse
from typing import Any

import kvsim
import numpy as np


def speed(n: int) -> None:
    print(f"\n## extension loop: fork-join 128×8, lognormal(2.5,1.25) multigets, 75% load, {n} requests (best of 3)")
    rng = np.random.default_rng(1)
    sizes = np.maximum(1, np.ceil(rng.lognormal(2.5, 1.25, n))).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = rng.integers(0, 1_000_000, int(offsets[-1])).astype(np.uint64)
    wl = kvsim.Workload(kvsim.Cluster(), offsets, keys=keys, load=0.75, seed=1)
    cases: tuple[tuple[str, dict[str, Any]], ...] = (
        ("none (plain loop)", {}),
        ("8 of 128 servers 3× slower", {"servers": kvsim.ServerModel.slow_servers(128, 8, 3.0)}),
        ("slowdowns every 50 ms, 20%, 3×", {"servers": kvsim.ServerModel(slowdown=kvsim.Slowdown(50.0, 0.2, 3.0))}),
        ("10% writes", {"writes": kvsim.write_flags(int(offsets[-1]), write_fraction=0.1, seed=1)}),
        ("closed loop 512 threads", {"closed": kvsim.ClosedLoop(threads=512)}),
    )
    print("| extension | M events/s | wall s | events | p99 ms | steady |")
    print("|---|---|---|---|---|---|")
    for label, kw in cases:
        cfg = kvsim.ReplayConfig(policy="fifo", replica="round-robin", **kw)
        res = min((kvsim.replay(wl, cfg) for _ in range(3)), key=lambda r: r.sim_wall_s)
        print(
            f"| {label} | {res.events_per_s / 1e6:.2f} | {res.sim_wall_s:.3f} | {res.events} | {res.p99_ms:.2f} |"
            f" {'yes' if res.steady_state else '**no**'} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100_000)
    args = ap.parse_args()
    speed(args.requests)


if __name__ == "__main__":
    main()
