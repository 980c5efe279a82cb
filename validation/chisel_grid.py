"""Chisel over the paper's 360 scenarios (simulator): analyzer levels vs batching, prediction vs replay.

Scenarios (ICAC'19 §V-A): mice of 1/5/10 keys, elephants of 100, mixes 9:1 and 5:1, Poisson inter-arrival
A in {50..1100} µs, client overhead 0/60/120/180 µs; default deployment 2 servers × 4 worker threads, 8 query
threads (the paper's rule for that pool), paper profile P_S = 3.3 + 0.6K, N_S = 85 + 6.5K.
For every scenario: the analyzer's grid search picks (L, B); batching and chisel replay the same requests.

    .venv/bin/python -m validation.chisel_grid [--requests 20000] [--cv 0.0] [--json out.json] [--optimality]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

import numpy as np
from kvsim.chisel import MemcachedSetup, SizeMix, grid_search
from kvsim.memcached import MemcachedConfig, replay

INTERARRIVALS = (50, 60, 70, 90, 120, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100)
MICE = (1, 5, 10)
RATIOS = (9, 5)
OVERHEADS = (0.0, 60.0, 120.0, 180.0)
THREADS = 8
KEEP = ("mean_ms", "p50_ms", "p95_ms", "p99_ms", "utilization", "steady_state")


def workload(mice: int, ratio: int, a_us: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sizes = np.where(rng.random(n) < 1.0 / (ratio + 1), 100, mice)
    return sizes, np.cumsum(rng.exponential(a_us, n)) / 1e6


def scenario(
    mice: int, ratio: int, a_us: float, overhead: float, n: int, cv: float, seed: int
) -> dict[str, Any]:
    sizes, arr = workload(mice, ratio, a_us, n, seed)
    dep = MemcachedSetup(query_threads=THREADS, client_overhead_us=overhead)
    levels = grid_search(SizeMix.mice_elephant(mice, ratio, a_us), dep)
    run = dataclasses.replace(dep, service_cv=cv)
    b = replay(sizes, arr, MemcachedConfig(policy="batching", deployment=run, seed=seed))
    c = replay(sizes, arr, MemcachedConfig(policy="chisel", params=levels.params(), deployment=run, seed=seed))
    return {
        "mice": mice, "ratio": ratio, "A_us": a_us, "overhead_us": overhead,
        "L": levels.split_keys, "B": levels.merge, "chunks": levels.chunks,
        "pred_chisel_ms": levels.predicted.mean_us / 1e3, "pred_batching_ms": levels.batching.mean_us / 1e3,
        "batching": {k: getattr(b, k) for k in KEEP},
        "chisel": {k: getattr(c, k) for k in KEEP},
        "gain_mean": 1.0 - c.mean_ms / b.mean_ms,
        "gain_p95": 1.0 - c.p95_ms / b.p95_ms,
        "gain_p50": 1.0 - c.p50_ms / b.p50_ms,
    }


def pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def dist(vals: list[float]) -> str:
    v = np.asarray(vals)
    q = np.percentile(v, [10, 25, 50, 75, 90])
    return (
        f"mean {pct(float(v.mean()))} | p10 {pct(q[0])} p25 {pct(q[1])} median {pct(q[2])} "
        f"p75 {pct(q[3])} p90 {pct(q[4])} | >=50%: {float(np.mean(v >= 0.5)):.0%} "
        f"| <0: {float(np.mean(v < 0)):.0%}"
    )


def rel_err(pred: float, sim: float) -> float:
    return (pred - sim) / sim if np.isfinite(pred) else float("inf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--cv", type=float, default=0.0, help="service-time jitter (coefficient of variation)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=str, default=None)
    ap.add_argument("--optimality", action="store_true", help="also replay a (chunks, B) grid per scenario")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [
        scenario(m, r, a, o, args.requests, args.cv, args.seed + i)
        for i, (m, r, a, o) in enumerate(
            (m, r, a, o) for m in MICE for r in RATIOS for a in INTERARRIVALS for o in OVERHEADS
        )
    ]
    wall = time.perf_counter() - t0
    print(f"{len(rows)} scenarios, {args.requests} requests each, cv {args.cv}, {wall:.1f} s wall")
    print("gain in mean :", dist([r["gain_mean"] for r in rows]))
    print("gain in p95  :", dist([r["gain_p95"] for r in rows]))
    print("gain in p50  :", dist([r["gain_p50"] for r in rows]))
    print(f"chunks > query threads in {sum(r['chunks'] > THREADS for r in rows)} scenarios; "
          f"merge > 1 in {sum(r['B'] > 1 for r in rows)}")
    print("\nby inter-arrival A (µs): mean gain / p95 gain / p50 gain / chunks / B>1 share / batching util")
    for a in INTERARRIVALS:
        sel = [r for r in rows if r["A_us"] == a]
        util = np.mean([r["batching"]["utilization"] for r in sel])
        print(
            f"  A={a:5}: {pct(np.mean([r['gain_mean'] for r in sel]))}"
            f" / {pct(np.mean([r['gain_p95'] for r in sel]))}"
            f" / {pct(np.mean([r['gain_p50'] for r in sel]))} / {np.mean([r['chunks'] for r in sel]):.1f}"
            f" / {np.mean([r['B'] > 1 for r in sel]):.0%} / {util:.2f}"
        )
    print("\nby client overhead (µs): mean gain / p95 gain")
    for o in OVERHEADS:
        sel = [r for r in rows if r["overhead_us"] == o]
        print(f"  o={o:5.0f}: {pct(np.mean([r['gain_mean'] for r in sel]))} / "
              f"{pct(np.mean([r['gain_p95'] for r in sel]))}")
    print("\nby mice size / mix: mean gain / p95 gain")
    for m in MICE:
        for ratio in RATIOS:
            sel = [r for r in rows if r["mice"] == m and r["ratio"] == ratio]
            print(f"  mice {m:2} {ratio}:1: {pct(np.mean([r['gain_mean'] for r in sel]))} / "
                  f"{pct(np.mean([r['gain_p95'] for r in sel]))}")
    print("\nprediction vs simulation (mean latency; relative error of the analyzer), by A:")
    print("  A     | chisel |err| median / max | batching |err| median / max")
    for a in INTERARRIVALS:
        sel = [r for r in rows if r["A_us"] == a]
        ec = [abs(rel_err(r["pred_chisel_ms"], r["chisel"]["mean_ms"])) for r in sel]
        eb = [abs(rel_err(r["pred_batching_ms"], r["batching"]["mean_ms"])) for r in sel]
        print(
            f"  {a:5} | {np.median(ec):6.1%} / {np.max(ec):6.1%} | {np.median(eb):6.1%} / {np.max(eb):6.1%}"
        )
    opt = optimality(args.requests, args.cv, args.seed) if args.optimality else []
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"wall_s": wall, "args": vars(args), "rows": rows, "optimality": opt}, fh, indent=1)


def optimality(n: int, cv: float, seed: int) -> list[dict[str, Any]]:
    """Analyzer's (L, B) vs the best (L, B) found by replaying a grid (chunks x B) in the simulator."""
    chunk_grid = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16)
    out: list[dict[str, Any]] = []
    for i, (m, ratio, a, o) in enumerate(
        (m, r, a, o) for m in MICE for r in RATIOS for a in (50, 70, 120, 300, 1000) for o in (0.0, 180.0)
    ):
        sizes, arr = workload(m, ratio, a, n, seed + 1000 + i)
        dep = MemcachedSetup(query_threads=THREADS, client_overhead_us=o)
        lv = grid_search(SizeMix.mice_elephant(m, ratio, a), dep)
        run = dataclasses.replace(dep, service_cv=cv)
        sims = {
            (c, b): replay(
                sizes, arr, MemcachedConfig(policy="chisel", params={"split_chunks": c, "merge": b}, deployment=run,
                                            seed=seed)
            )
            for c in chunk_grid
            for b in (1, 2, 3, 4)
        }
        best = min(sims, key=lambda k: sims[k].mean_ms)
        best_p95 = min(sims, key=lambda k: sims[k].p95_ms)
        ours = replay(sizes, arr, MemcachedConfig(policy="chisel", params=lv.params(), deployment=run, seed=seed))
        out.append({
            "mice": m, "ratio": ratio, "A_us": a, "overhead_us": o, "analyzer": [lv.chunks, lv.merge],
            "best_mean": list(best), "best_p95": list(best_p95),
            "ratio_mean": ours.mean_ms / sims[best].mean_ms,
            "ratio_p95": ours.p95_ms / sims[best_p95].p95_ms,
        })
    rm = np.array([r["ratio_mean"] for r in out])
    rp = np.array([r["ratio_p95"] for r in out])
    print(f"\noptimality over {len(out)} scenarios (analyzer / best replayed level, chunks 1..16 x B 1..4):")
    print(f"  mean: median {np.median(rm):.3f}, p90 {np.percentile(rm, 90):.3f}, max {rm.max():.3f}")
    print(f"  p95 : median {np.median(rp):.3f}, p90 {np.percentile(rp, 90):.3f}, max {rp.max():.3f}")
    print(f"  best-mean level has chunks > {THREADS}: {sum(r['best_mean'][0] > THREADS for r in out)}; "
          f"best-mean level merges (B>1): {sum(r['best_mean'][1] > 1 for r in out)} "
          f"(at A<=70: {sum(r['best_mean'][1] > 1 for r in out if r['A_us'] <= 70)}, "
          f"at A>=300: {sum(r['best_mean'][1] > 1 for r in out if r['A_us'] >= 300)})")
    return out


if __name__ == "__main__":
    main()
