"""Real memcached (127.0.0.1, Debian package): profile P_S/N_S, then batching vs Chisel at low and high load.

Starts a private memcached (4 worker threads), profiles K = 1..200, feeds the measured profile to the analyzer
(1 server × 4 workers, 4 query threads) for its (L, B), and replays the same mice/elephant requests (Poisson,
mice of 5 keys, 5:1, elephants of 100 keys, 100-byte values) with the CPython client of
tests/servers/memcached_loadgen.py under: batching, chisel at the analyzer's levels, chisel split-only (L = 25),
chisel merge-only (B = 3). Variants are interleaved in each round; the table
shows medians over rounds (the machine is shared, so single runs are noisy).

    .venv/bin/python -m validation.chisel_memcached [--requests 2000] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
from kvsim.chisel import MemcachedSetup, ServiceProfile, SizeMix, grid_search

from analysis.memcached_profile import profile_memcached
from tests.servers.memcached_loadgen import mice_elephant_workload, run_loadgen
from tests.servers.memcached_server import running_memcached

LOADS_US = (2000.0, 700.0, 350.0)
THREADS = 4


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mice", type=int, default=5)
    ap.add_argument("--ratio", type=int, default=5)
    ap.add_argument("--json", type=str, default=None)
    args = ap.parse_args()
    out: dict[str, Any] = {"args": vars(args), "runs": []}
    with running_memcached(threads=4, memory_mb=64) as server:
        t0 = time.perf_counter()
        prof = profile_memcached(server.host, server.port, reps=50)
        a, b, c, d = prof.coefficients()
        out["profile"] = prof.to_dict()
        print(f"profile ({time.perf_counter() - t0:.1f} s): P_S = {a:.1f} + {b:.2f}K µs "
              f"(R² {prof.processing.r2:.3f}),"
              f" N_S = {c:.1f} + {d:.2f}K µs (R² {prof.network.r2:.3f}), T_S = {prof.total.intercept:.1f} + "
              f"{prof.total.slope:.2f}K µs (R² {prof.total.r2:.3f})")
        dep = MemcachedSetup(
            servers=1, worker_threads=4, query_threads=THREADS, profile=ServiceProfile(a, b, c, d)
        )
        print(f"load average before: {os.getloadavg()}")
        print("median of rounds:")
        print("A_us  variant          params (L, B)  mean_ms  p50_ms  p95_ms  p99_ms  queries  lag_ms")
        for i, a_us in enumerate(LOADS_US):
            lv = grid_search(SizeMix.mice_elephant(args.mice, args.ratio, a_us), dep)
            variants: list[tuple[str, str, dict[str, Any]]] = [
                ("batching", "batching", {}),
                ("chisel-analyzer", "chisel", {"split_keys": lv.split_keys, "merge": lv.merge}),
                ("chisel-split25", "chisel", {"split_keys": 25, "merge": 1}),
                ("chisel-merge3", "chisel", {"split_keys": 100, "merge": 3}),
            ]
            pred = {"batching": lv.batching.mean_us / 1e3, "chisel-analyzer": lv.predicted.mean_us / 1e3}
            results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in variants}
            for rnd in range(args.rounds):
                sizes, arr = mice_elephant_workload(
                    args.requests, args.mice, args.ratio, a_us, seed=100 * i + rnd
                )
                for name, policy, kw in variants:
                    first = i == 0 and rnd == 0 and name == "batching"
                    r = run_loadgen(server.host, server.port, sizes, arr, policy, query_threads=THREADS,
                                    keyspace_size=1000, seed=rnd, populate_keys=first, **kw)
                    results[name].append(r.to_dict())
            for name, policy, kw in variants:
                rs = results[name]
                agg = {k: float(np.median([r[k] for r in rs]))
                       for k in ("mean_ms", "p50_ms", "p95_ms", "p99_ms", "queries", "mean_dispatch_lag_ms")}
                row = {"A_us": a_us, "variant": name, "policy": policy, "params": kw, **agg,
                       "predicted_mean_ms": pred.get(name), "rounds": rs}
                out["runs"].append(row)
                lb = f"({kw.get('split_keys', '-')}, {kw.get('merge', '-')})"
                print(f"{a_us:5.0f} {name:16} {lb:14} {agg['mean_ms']:7.3f} {agg['p50_ms']:7.3f} "
                      f"{agg['p95_ms']:7.3f} {agg['p99_ms']:7.3f} {agg['queries']:8.0f} "
                      f"{agg['mean_dispatch_lag_ms']:7.3f}")
        out["loadavg_after"] = os.getloadavg()
        print(f"load average after: {out['loadavg_after']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
