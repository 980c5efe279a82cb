"""Replica selection with heterogeneous value sizes: every selector on the calibration model and on Héron's setup.

1. Calibration model: single-key reads, 10% of keys 512 KiB (rest 1 KiB), 15 servers × 8 slots, RF 3, open-loop
   Poisson, uniform keys, 15 clients: every selector at one load; overall / small / large p99 and steady flags.
2. Héron's synthetic setup: Zipf 0.99 keys, 1 KiB / 512 KiB, share of large values 1–20%: heron vs c3 vs ds.
(Events/s per selector: `bench/sim_speed.py --replica ...`.)
Run: .venv/bin/python -m validation.sim_replicas_validate [--requests N] [--load L] [--skip 1,2]
"""

from __future__ import annotations

import argparse
from typing import Any

import kvsim
import numpy as np
import numpy.typing as npt

RATE = 3750.0
SELECTORS = ("round-robin", "random", "least-outstanding", "ds", "c3", "heron")


def zipf_keys(rng: np.random.Generator, n: int, universe: int, alpha: float) -> npt.NDArray[np.uint64]:
    ranks = np.arange(1, universe + 1, dtype=np.float64)
    p = ranks**-alpha
    p /= p.sum()
    keys: npt.NDArray[np.uint64] = rng.choice(universe, size=n, p=p).astype(np.uint64)
    return keys


def row(name: str, r: kvsim.Result) -> str:
    c: dict[str, Any] = r.classes or {"small": {}, "large": {}}
    s, lg = c["small"], c["large"]
    held: dict[str, Any] = dict(r.held or {"opsets": 0, "unstable": False})
    return (
        f"{name:28s} {r.p50_ms:8.2f} {r.p99_ms:9.2f} {r.p999_ms:9.2f} | {s.get('p50_ms', 0):7.2f} "
        f"{s.get('p99_ms', 0):8.2f} | {lg.get('p50_ms', 0):8.2f} {lg.get('p99_ms', 0):9.2f} | "
        f"{r.server_load_max:5.2f} {r.steady_state!s:5s} {held['opsets']:6d} {held['unstable']!s:5s}"
    )


HEADER = (
    f"{'selector':28s} {'p50':>8s} {'p99':>9s} {'p99.9':>9s} | {'s.p50':>7s} {'s.p99':>8s} | {'l.p50':>8s} "
    f"{'l.p99':>9s} | {'maxld':>5s} {'steady':5s} {'held':>6s} unstable"
)


def calibration(n: int, load: float) -> None:
    print(f"\n## 1. calibration: single-key, 10% keys 512 KiB, 15×8, RF 3, uniform keys, load {load}, {n} requests")
    rng = np.random.default_rng(1)
    cluster = kvsim.Cluster(servers=15, slots=8, replication=3, clients=15)
    keys = rng.integers(0, 1_000_000, n).astype(np.uint64)
    sizes = np.where(keys % 10 == 0, 524288.0, 1024.0)
    model = kvsim.DemandModel.default(RATE)
    wl = kvsim.Workload(cluster, np.arange(n + 1), keys=keys, mean_demand_s=model.mean_s(sizes), load=load, seed=1)
    thr = kvsim.default_thr_l(model, 1024.0)
    print(HEADER)
    for sel in SELECTORS:
        print(row(sel, kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica=sel, sizes=sizes,
                                                           thr_l_bytes=thr))))
    for cap in (2, 4, 8):
        r = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="heron", replica_params={"busy_capacity": cap},
                                                sizes=sizes, thr_l_bytes=thr))
        print(row(f"heron busy_capacity={cap}", r))
    r = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="least-outstanding", replica_params={"global": 1},
                                            sizes=sizes, thr_l_bytes=thr))
    print(row("least-outstanding global=1", r))
    r = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica="c3", replica_params={"rate_control": 0},
                                            sizes=sizes, thr_l_bytes=thr))
    print(row("c3 rate_control=0", r))


def heron_sweep(n: int, load: float) -> None:
    print(f"\n## 2. Héron setup: Zipf 0.99 over 100k keys, 1 KiB / 512 KiB, load {load}, {n} requests")
    cluster = kvsim.Cluster(servers=15, slots=8, replication=3, clients=15)
    model = kvsim.DemandModel.default(RATE)
    thr = kvsim.default_thr_l(model, 1024.0)
    for share in (0.01, 0.02, 0.05, 0.10, 0.20):
        rng = np.random.default_rng(2)
        keys = zipf_keys(rng, n, 100_000, 0.99)
        # which keys are large: a hash of the key id, so popularity and size are independent
        large = (kvsim.tokens_for_keys(keys).view(np.uint64) % 10_000) < share * 10_000
        sizes = np.where(large, 524288.0, 1024.0)
        wl = kvsim.Workload(cluster, np.arange(n + 1), keys=keys, mean_demand_s=model.mean_s(sizes), load=load,
                            seed=2)
        print(f"\nlarge share {share:.0%} (of accesses: {large.mean():.1%})")
        print(HEADER)
        for sel, params in (("ds", {}), ("c3", {}), ("heron", {}), ("heron", {"busy_capacity": 4})):
            r = kvsim.replay(wl, kvsim.ReplayConfig(policy="fifo", replica=sel, replica_params=params, sizes=sizes,
                                                    thr_l_bytes=thr))
            label = sel + "".join(f" {k}={v}" for k, v in params.items())
            print(row(label, r))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--load", type=float, default=0.5)
    ap.add_argument("--skip", default="", help="comma list of sections to skip: 1,2")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    if "1" not in skip:
        calibration(args.requests, args.load)
    if "2" not in skip:
        heron_sweep(args.requests, args.load)


if __name__ == "__main__":
    main()
