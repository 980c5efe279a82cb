"""TailX's evaluation setup (TailX §4): tailx vs rein (and fifo), p50/p95/p99, per class.

Cluster: 16 servers × 8 slots (TailX's 16 nodes; Rein's concurrency 8), RF 3, 16 clients, default size calibration
(1 KiB = 1/3750 s; 2 MiB ≈ 124× that), exponential demands, open-loop Poisson at 75% of capacity (TailX: "75%
system load"), warm-up 10%. Keys Zipf 0.99 (TailX) or uniform (`--keys uniform`, a control without hot servers).
1. Multiget sizes: 80% of multigets of 5 keys, 20% of 100 keys, all values 1 KiB. Classes: short (5) / long (100).
2. Large values: multigets of 20 keys; 20% of multigets contain 10% / 20% / 50% large values (2 MiB, drawn from
   their own Zipf population of 5k keys — TailX: 100k large vs 20M small records), the rest 1 KiB (1M keys).
   Classes: small / large (a request touching a value above THR_L).
Configurations: fifo (round-robin), rein (round-robin; Rein as published, op-count cost), rein with the size-aware
cost (Σ mean demand), rein + ds, rein + c3, tailx + ds (its default), tailx + round-robin, tailx + c3.
`--closed`: closed-loop clients instead (threads with no think time, TailX's YCSB clients): per case, the thread count
is the smallest one whose fifo + round-robin run reaches `--load` utilization ("75% system load" of a closed loop),
found by doubling then bisection; every configuration then runs with that many threads.
Run: .venv/bin/python -m validation.sim_tailx [--requests N] [--keys zipf|uniform] [--load 0.75]
     [--closed]
"""

from __future__ import annotations

import argparse
from typing import Any

import kvsim
import numpy as np
import numpy.typing as npt

RATE = 3750.0
SMALL, LARGE = 1024.0, 2.0 * 1024 * 1024
# (policy, replica, Rein's size-aware cost)
CONFIGS: tuple[tuple[str, str, bool], ...] = (
    ("fifo", "round-robin", False),
    ("rein", "round-robin", False),
    ("rein", "round-robin", True),
    ("rein", "ds", False),
    ("rein", "c3", False),
    ("tailx", "ds", False),
    ("tailx", "round-robin", False),
    ("tailx", "c3", False),
)


class KeyGen:
    def __init__(self, rng: np.random.Generator, universe: int, dist: str, offset: int) -> None:
        self.rng, self.universe, self.dist, self.offset = rng, universe, dist, offset
        if dist == "zipf":
            p = np.arange(1, universe + 1, dtype=np.float64) ** -0.99
            self.cdf = np.cumsum(p / p.sum())

    def draw(self, n: int) -> npt.NDArray[np.uint64]:
        if self.dist == "zipf":
            idx = np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), self.universe - 1)
        else:
            idx = self.rng.integers(0, self.universe, n)
        out: npt.NDArray[np.uint64] = (idx + self.offset).astype(np.uint64)
        return out


def pct(v: npt.NDArray[np.float64], warm: int) -> dict[str, float]:
    s = v[warm:]
    if s.size == 0:
        return {}
    p50, p95, p99 = np.percentile(s, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "n": float(s.size)}


def calibrate_threads(
    wl: kvsim.Workload, sizes: npt.NDArray[np.float64], thr: float, target: float
) -> kvsim.ClosedLoop:
    """Smallest thread count whose fifo + round-robin closed loop reaches `target` utilization."""

    def util(t: int) -> float:
        cfg = kvsim.ReplayConfig(
            policy="fifo", replica="round-robin", sizes=sizes, thr_l_bytes=thr, closed=kvsim.ClosedLoop(threads=t)
        )
        return kvsim.replay(wl, cfg).utilization

    lo, hi = 1, 2
    while util(hi) < target and hi < 4096:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if util(mid) < target else (lo, mid)
    return kvsim.ClosedLoop(threads=hi)


def run_case(
    title: str,
    cluster: kvsim.Cluster,
    offsets: npt.NDArray[np.int64],
    keys: npt.NDArray[np.uint64],
    sizes: npt.NDArray[np.float64],
    load: float,
    class_mask: npt.NDArray[np.bool_] | None,
    class_names: tuple[str, str],
    closed_loop: bool,
) -> None:
    model = kvsim.DemandModel.default(RATE)
    thr = kvsim.default_thr_l(model, SMALL)
    wl = kvsim.Workload(cluster, offsets, keys=keys, mean_demand_s=model.mean_s(sizes), load=load, seed=1)
    a, b = class_names
    closed = calibrate_threads(wl, sizes, thr, load) if closed_loop else None
    print(f"\n### {title}" + (f" — closed loop, {closed.threads} threads" if closed is not None else ""))
    print(
        f"| policy | replica | p50 | p95 | p99 | {a} p50 | {a} p99 | {b} p50 | {b} p99 | util | max load | steady |"
        + (" requests/s |" if closed is not None else "")
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if closed is not None else ""))
    base: dict[str, dict[str, float]] = {}
    for policy, replica, size_aware in CONFIGS:
        cfg = kvsim.ReplayConfig(
            policy=policy, replica=replica, sizes=sizes, thr_l_bytes=thr, size_aware_cost=size_aware, closed=closed
        )
        res = kvsim.replay(wl, cfg)
        if class_mask is None:
            c: dict[str, Any] = res.classes or {"small": {}, "large": {}}
            ca = {k[:-3]: v for k, v in c["small"].items() if k.endswith("_ms")}
            cb = {k[:-3]: v for k, v in c["large"].items() if k.endswith("_ms")}
        else:
            # Same warm-up cut as the overall figures: the first 10% of requests by arrival.
            warm = int(np.floor(0.1 * res.requests))
            lat = res.latency_ms[warm:]
            ca = pct(lat[~class_mask[warm:]], 0)
            cb = pct(lat[class_mask[warm:]], 0)
        if policy == "rein" and not size_aware:
            base[replica] = {"p50": res.p50_ms, "p95": res.p95_ms, "p99": res.p99_ms}
        thr_col = f" {res.closed['throughput_rps']:.0f} |" if res.closed is not None else ""
        print(
            f"| {policy}{' size-aware' if size_aware else ''} | {replica}"
            f" | {res.p50_ms:.2f} | {res.p95_ms:.2f} | {res.p99_ms:.2f} |"
            f" {ca.get('p50', float('nan')):.2f} | {ca.get('p99', float('nan')):.2f} |"
            f" {cb.get('p50', float('nan')):.2f} | {cb.get('p99', float('nan')):.2f} |"
            f" {res.utilization:.2f} | {res.server_load_max:.2f} | {'yes' if res.steady_state else '**no**'} |"
            + thr_col
        )
        if policy == "tailx" and replica in base:
            b0 = base[replica]
            print(
                f"|  | (tailx vs rein, same replica) | {100 * (1 - res.p50_ms / b0['p50']):+.0f}% |"
                f" {100 * (1 - res.p95_ms / b0['p95']):+.0f}% | {100 * (1 - res.p99_ms / b0['p99']):+.0f}% |"
                "  |  |  |  |  |  |  |" + ("  |" if closed is not None else "")
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=30_000)
    ap.add_argument("--keys", choices=("zipf", "uniform"), default="zipf")
    ap.add_argument("--load", type=float, default=0.75)
    ap.add_argument("--closed", action="store_true", help="closed loop calibrated to --load utilization")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: 1,2")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    n = args.requests
    closed = bool(args.closed)
    cluster = kvsim.Cluster(servers=16, slots=8, replication=3, clients=16)
    clients = f"closed loop at {args.load} utilization" if closed else f"open loop, load {args.load}"
    print(f"TailX setup: 16×8, RF 3, keys {args.keys}, {clients}, {n} requests ")
    print("(reduction rows: + = tailx lower than rein with the same replica selection)")
    if "1" not in skip:
        rng = np.random.default_rng(1)
        long = rng.random(n) < 0.2
        counts = np.where(long, 100, 5)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        keys = KeyGen(rng, 1_000_000, args.keys, 0).draw(int(offsets[-1]))
        sizes = np.full(keys.size, SMALL)
        run_case(
            "1. 80% multigets of 5 keys, 20% of 100 keys, 1 KiB values",
            cluster, offsets, keys, sizes, args.load, long, ("short", "long"), closed,
        )  # fmt: skip
    if "2" not in skip:
        for share in (0.10, 0.20, 0.50):
            rng = np.random.default_rng(2)
            small_keys = KeyGen(rng, 1_000_000, args.keys, 0)
            large_keys = KeyGen(rng, 5_000, args.keys, 10_000_000)
            offsets = np.arange(0, 20 * n + 1, 20, dtype=np.int64)
            keys = small_keys.draw(20 * n)
            is_large = np.zeros(20 * n, dtype=bool)
            heavy = np.flatnonzero(rng.random(n) < 0.2)
            k_large = round(20 * share)
            for r in heavy:
                pos = 20 * r + rng.choice(20, size=k_large, replace=False)
                is_large[pos] = True
            keys[is_large] = large_keys.draw(int(is_large.sum()))
            sizes = np.where(is_large, LARGE, SMALL)
            run_case(
                f"2. multigets of 20 keys, 20% of them with {share:.0%} large (2 MiB) values",
                cluster, offsets, keys, sizes, args.load, None, ("small", "large"), closed,
            )  # fmt: skip


if __name__ == "__main__":
    main()
