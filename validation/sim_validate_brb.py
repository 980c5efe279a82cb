"""BRB (HotNets/SIGCOMM'15 poster) §2.2 validation: EqualMax and UnifIncr vs FIFO at every percentile.

Setup: 18 clients, 9 servers × 4 slots, RF 3, 3500 ops/s per slot, 50 µs one-way, soundcloud profile (mean
fan-out 8.6), Poisson arrivals at 70% load, Pareto value sizes.

Value sizes → demand (choices; the paper only says sizes "are generated using a Pareto distribution"): sizes
come from Facebook's ETC generalized Pareto (location 15 B, σ = 214.476, ξ = 0.348238, the tail of the
`facebook` profile's value model), drawn independently for every op of the trace (--sizes per-op, default; "for
the requests") or once per key from a hash of the key (--sizes per-key: a popular key with a huge value then makes
a hot server — with 9 servers this overloads one at 70% load, see validation/RESULTS.md). Per-op mean
demand = base × ((1 − s) + s × size / mean size), with s = --size-share (default 0.5: half of an average op's
time is fixed cost, half is proportional to bytes) and base = 1/3500 s, so the average op still costs 1/3500 s;
the actual demand is exponential around that mean (the core model). BRB's clients forecast costs from value
sizes, so the BRB policies replay with `size_aware_cost=True` (cost of a sub-task = Σ mean demand); the
op-count cost (Rein's) and sizes ignored (s = 0) are reported too.

Run:  .venv/bin/python -m validation.sim_validate_brb [--requests 100000] [--seeds 1,2,3] [--size-share 0.5]
          [--sizes per-op|per-key] [--load 0.7]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from validation.sim_validate_common import Case, ProfileTrace, run_case
from validation.sim_validate_rein import table, to_json

__all__ = ["etc_pareto_sizes", "main", "size_mean_demand"]

GPD_LOC, GPD_SIGMA, GPD_XI = 15.0, 214.476, 0.348238


def etc_pareto_sizes(keys: npt.NDArray[Any], *, per_key: bool, seed: int) -> npt.NDArray[np.float64]:
    """A value size per op: GPD inverse CDF at a uniform number, hashed from the key or drawn per op."""
    import kvsim

    if per_key:
        tok = kvsim.tokens_for_keys(keys).astype(np.uint64)
        u = (tok >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    else:
        u = np.random.default_rng([seed, 0xB2B]).random(len(keys))
    u = np.minimum(u, 1.0 - 1e-12)
    sizes: npt.NDArray[np.float64] = GPD_LOC + GPD_SIGMA / GPD_XI * ((1.0 - u) ** (-GPD_XI) - 1.0)
    return np.minimum(sizes, 1024.0 * 1024.0)


def size_mean_demand(share: float, per_key: bool) -> Any:
    def f(trace: ProfileTrace, cluster: Any) -> npt.NDArray[np.float64] | None:
        if share == 0.0:
            return None
        sizes = etc_pareto_sizes(trace.keys, per_key=per_key, seed=trace.seed)
        base = 1.0 / cluster.service_rate
        out: npt.NDArray[np.float64] = base * ((1.0 - share) + share * sizes / sizes.mean())
        return out

    return f


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--size-share", type=float, default=0.5)
    ap.add_argument("--load", type=float, default=0.70)
    ap.add_argument("--sizes", choices=("per-op", "per-key"), default="per-op")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    policies: list[tuple[str, dict[str, float]]] = [("fifo", {}), ("brb-equalmax", {}), ("brb-unifincr", {})]
    base = Case(
        name="",
        profile="soundcloud",
        servers=9,
        slots=4,
        clients=18,
        replication=3,
        service_rate=3500.0,
        load=args.load,
        policies=policies,
    )
    share = args.size_share
    runs = [
        (
            replace(
                base,
                name=f"BRB setup, Pareto sizes {args.sizes} (share {share}), size-aware cost",
                size_aware_cost=True,
            ),
            share,
        ),
        (replace(base, name=f"BRB setup, Pareto sizes {args.sizes} (share {share}), op-count cost"), share),
        (replace(base, name="BRB setup, sizes ignored (exponential service, op-count cost)"), 0.0),
    ]
    traces: dict[tuple[str, int], ProfileTrace] = {}
    results = []
    t0 = time.perf_counter()
    for case, s in runs:
        t = time.perf_counter()
        res = run_case(case, traces, args.requests, seeds, mean_demand=size_mean_demand(s, args.sizes == "per-key"))
        results.append(res)
        print(table(res, oracle_gap=False))
        print(f"\n({args.requests} requests per seed, {time.perf_counter() - t:.1f} s)\n", flush=True)
    print(f"total {time.perf_counter() - t0:.1f} s")
    if args.json:
        args.json.write_text(json.dumps([to_json(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
