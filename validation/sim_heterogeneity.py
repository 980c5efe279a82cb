"""Replica selection with slow servers, and open vs closed-loop clients.

1. C3-style scenarios (single-key reads, one value size, uniform keys, 15 servers × 8 slots, RF 3, 15 clients,
   1 ms mean demand, exponential demands, open-loop Poisson at `--load` of the servers' time-averaged capacity):
   a. static: 3 of 15 servers 3× slower (spread evenly over the ring);
   b. time-varying: every 100 ms a random 20% of the servers is 3× slower for the whole interval;
   c. time-varying, slower changes: every 500 ms, 20%, 3×.
   round-robin vs least-outstanding vs c3 vs ds vs heron: p50 / p99 / p99.9, busiest server's load, steady flag.
2. Héron's synthetic setup (1 KiB / 512 KiB values, 10% of the keys large by key hash, Zipf 0.99 over 100k keys,
   RF 3, 15 × 8 slots, 3750 1-KiB ops/s per slot, single-key reads): open loop at `--load` vs closed loop
   (120 threads = one per slot, no think time: the saturating YCSB-like client) — does the ranking change?
(Events/s of the extension loop with each extension on: `bench/sim_extension_speed.py`.)
Run: .venv/bin/python -m validation.sim_heterogeneity [--requests N] [--load L] [--skip 1,2]
"""

from __future__ import annotations

import argparse
from typing import Any

import kvsim
import numpy as np

from validation.sim_replicas_validate import zipf_keys

SELECTORS: tuple[tuple[str, dict[str, float]], ...] = (
    ("round-robin", {}),
    ("least-outstanding", {}),
    ("c3", {}),
    ("ds", {}),
    ("heron", {}),
)


def _steady(r: kvsim.Result) -> str:
    flag = "yes" if r.steady_state else "**no**"
    if r.held is not None and r.held["unstable"]:
        flag += " (held unstable)"
    return flag


def c3_scenarios(n: int, load: float) -> None:
    print(f"\n## 1. C3-style slow servers: single-key, uniform keys, 15×8, RF 3, 1 ms demand, load {load}, {n} req")
    cluster = kvsim.Cluster(servers=15, slots=8, replication=3, service_rate=1000.0, clients=15)
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 1_000_000, n).astype(np.uint64)
    scenarios: tuple[tuple[str, kvsim.ServerModel | None], ...] = (
        ("none (all speed 1)", None),
        ("3 of 15 servers 3× slower", kvsim.ServerModel.slow_servers(15, 3, 3.0)),
        ("every 100 ms 20% 3× slower", kvsim.ServerModel(slowdown=kvsim.Slowdown(100.0, 0.2, 3.0))),
        ("every 500 ms 20% 3× slower", kvsim.ServerModel(slowdown=kvsim.Slowdown(500.0, 0.2, 3.0))),
    )
    print("| scenario | capacity factor | selector | p50 ms | p99 ms | p99.9 ms | util | max server load | steady |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, model in scenarios:
        cf = 1.0 if model is None else model.capacity_factor(15)
        wl = kvsim.Workload(cluster, np.arange(n + 1), keys=keys, load=load * cf, seed=1)
        for sel, params in SELECTORS:
            res = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica=sel, replica_params=params,
                                                      servers=model))
            print(
                f"| {label} | {cf:.3f} | {sel} | {res.p50_ms:.2f} | {res.p99_ms:.2f} | {res.p999_ms:.2f} |"
                f" {res.utilization:.2f} | {res.server_load_max:.2f} | {_steady(res)} |"
            )


def open_vs_closed(n: int, load: float) -> None:
    print(f"\n## 2. Héron setup, open loop (load {load}) vs closed loop (120 threads, think 0), {n} requests")
    cluster = kvsim.Cluster(servers=15, slots=8, replication=3, clients=15)
    model = kvsim.DemandModel.default(3750.0)
    thr = kvsim.default_thr_l(model, 1024.0)
    rng = np.random.default_rng(2)
    keys = zipf_keys(rng, n, 100_000, 0.99)
    large = (kvsim.tokens_for_keys(keys).view(np.uint64) % 10_000) < 1_000
    sizes = np.where(large, 524288.0, 1024.0)
    wl = kvsim.Workload(cluster, np.arange(n + 1), keys=keys, mean_demand_s=model.mean_s(sizes), load=load, seed=2)
    print(f"large keys 10% (of accesses {large.mean():.1%}), THR_L {thr:.0f} B")
    print(
        "| clients | selector | p50 ms | p95 ms | p99 ms | small p99 | large p99 | requests/s | util |"
        " max server load | held | steady |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    sels = (*SELECTORS, ("heron", {"busy_capacity": 4.0}))
    for closed in (None, kvsim.ClosedLoop(threads=120, think_ms=0.0)):
        for sel, params in sels:
            cfg = kvsim.ReplayConfig(
                policy="fifo", replica=sel, replica_params=params, sizes=sizes, thr_l_bytes=thr, closed=closed
            )
            res = kvsim.replay(wl, cfg)
            c: dict[str, Any] = res.classes or {"small": {}, "large": {}}
            span = (
                res.closed["makespan_s"]
                if res.closed is not None
                else float(wl.arrays()["arrival_ns"][-1]) / 1e9
            )
            label = sel + "".join(f" {k}={v:g}" for k, v in params.items())
            kind = "open" if closed is None else "closed 120"
            print(
                f"| {kind} | {label} | {res.p50_ms:.2f} | {res.p95_ms:.2f} | {res.p99_ms:.2f} |"
                f" {c['small'].get('p99_ms', float('nan')):.2f} | {c['large'].get('p99_ms', float('nan')):.2f} |"
                f" {res.requests / span:.0f} | {res.utilization:.2f} | {res.server_load_max:.2f} |"
                f" {res.held['opsets'] if res.held else 0} | {_steady(res)} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--load", type=float, default=0.6)
    ap.add_argument("--skip", default="", help="comma list of sections to skip: 1,2")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    if "1" not in skip:
        c3_scenarios(args.requests, args.load)
    if "2" not in skip:
        open_vs_closed(args.requests, args.load)


if __name__ == "__main__":
    main()
