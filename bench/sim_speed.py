"""Simulator speed: events/s per policy on the fork-join model of the core simulator, ratio to the Python reference.

Model: 128 servers × 8 slots, RF 3, 3750 ops/s per slot, 50 µs, lognormal(2.5, 1.25) multiget sizes
(rounded up, ≥ 1), uniform keys over 1 M ids, Poisson arrivals at 75% load.
Run: PYTHONPATH=. .venv/bin/python bench/sim_speed.py

`--replica c3,ds,heron` (the goal: size-aware policies and replica selection ≥ 6 M events/s) also replays
each selector under `--replica-policies` on the same model twice: with one value size (`uniform`, what the replica
selection speed table measured) and with a size mix (`mix`: keys with id mod round(1/`--large-share`) = 0 hold 512 KiB
values, the rest 1 KiB; default demand model, Bloom-filter size estimates, Rein's size-aware opset cost). A
selector may carry parameters: `heron:busy_capacity=8` (`name[:param=value[/param=value]]`). `round-robin` in
the list measures the size-aware demand path alone (sizes, no selector feedback). Events
include held opsets' retries. Héron's literal busy rule (capacity 1) is unstable with the 10% mix (a backlog of
~258k held opsets at 100k requests; retries visit only the groups of servers that turned available, ~0.8 s);
`heron:busy_capacity=8` is the stable variant.
Run: PYTHONPATH=. .venv/bin/python bench/sim_speed.py --core-policies none --replica round-robin,c3,ds,heron
  --values uniform   (and: --replica round-robin,c3,ds,heron:busy_capacity=8 --values mix)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping

import kvsim
import numpy as np
import numpy.typing as npt

from tests.simulator.reference import reference_latencies


def make(cluster: kvsim.Cluster, n: int, seed: int) -> kvsim.Workload:
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, np.ceil(rng.lognormal(2.5, 1.25, n))).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = rng.integers(0, 1_000_000, int(offsets[-1])).astype(np.uint64)
    return kvsim.Workload(cluster, offsets, keys=keys, load=0.75, seed=seed)


RATE = 3750.0


def make_mix(
    cluster: kvsim.Cluster, n: int, seed: int, large_share: float
) -> tuple[kvsim.Workload, npt.NDArray[np.float64]]:
    """The `make` model with 512 KiB values on the keys with id mod round(1 / large_share) == 0 (1 KiB else)."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, np.ceil(rng.lognormal(2.5, 1.25, n))).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keys = rng.integers(0, 1_000_000, int(offsets[-1])).astype(np.uint64)
    every = max(1, round(1.0 / large_share))
    values = np.where(keys % every == 0, 524288.0, 1024.0)
    model = kvsim.DemandModel.default(RATE)
    wl = kvsim.Workload(cluster, offsets, keys=keys, mean_demand_s=model.mean_s(values), load=0.75, seed=seed)
    return wl, values


def replay(
    wl: kvsim.Workload,
    policy: str,
    *,
    params: Mapping[str, float] | None = None,
    replica: str | None = None,
    replica_params: Mapping[str, float] | None = None,
    sizes: npt.NDArray[np.float64] | None = None,
    thr_l_bytes: float | None = None,
) -> tuple[kvsim.Result, int, bool]:
    """(result, held opsets, unstable) through `kvsim.replay` (so sim_speed_ab.sh compares revisions that have it)."""
    cfg = kvsim.ReplayConfig(
        policy=policy,
        params=dict(params or {}),
        replica=replica,
        replica_params=dict(replica_params or {}),
        sizes=sizes,
        thr_l_bytes=thr_l_bytes,
        size_aware_cost=sizes is not None,
    )
    r = kvsim.replay(wl, cfg)
    held = r.held
    return r, 0 if held is None else held["opsets"], False if held is None else held["unstable"]


def parse_selector(spec: str) -> tuple[str, dict[str, float]]:
    """`name[:param=value[/param=value]]` → (name, params)."""
    name, _, rest = spec.partition(":")
    params: dict[str, float] = {}
    for item in filter(None, rest.split("/")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--replica: parameter '{item}' of '{spec}' must be name=value")
        params[key] = float(value)
    return name, params


def replica_speed(args: argparse.Namespace, cluster: kvsim.Cluster) -> None:
    n = args.requests
    uniform = make(cluster, n, 1)
    mix, values = make_mix(cluster, n, 1, args.large_share)
    thr = kvsim.default_thr_l(kvsim.DemandModel.default(RATE), 1024.0)
    print(
        f"\nreplica selection: uniform = one value size; mix = {args.large_share:.0%} of keys 512 KiB "
        f"(THR_L {thr:.0f} B), size-aware cost; best of {args.repeat}"
    )
    print("selector                  policy   values   wall_s   events   M ev/s  p99_ms  steady  held  unstable")
    for spec in args.replica.split(","):
        name, params = parse_selector(spec)
        for policy in args.replica_policies.split(","):
            for label in args.values.split(","):
                best: tuple[kvsim.Result, int, bool] | None = None
                for _ in range(args.repeat):
                    if label == "uniform":
                        r = replay(uniform, policy, replica=name, replica_params=params)
                    else:
                        r = replay(mix, policy, replica=name, replica_params=params, sizes=values, thr_l_bytes=thr)
                    if best is None or r[0].sim_wall_s < best[0].sim_wall_s:
                        best = r
                assert best is not None
                res, held, unstable = best
                print(
                    f"{spec:25s} {policy:8s} {label:7s} {res.sim_wall_s:7.3f} {res.events:9d} "
                    f"{res.events_per_s / 1e6:7.2f} {res.p99_ms:8.2f}  {res.steady_state!s:6s} "
                    f"{held:5d}  {unstable}"
                )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--python-requests", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--core-policies",
        default="all",
        help="'all' (default): every policy on the core replay and the Python reference; 'none': skip",
    )
    ap.add_argument(
        "--replica", default="", help="comma list of replica selectors (name[:param=value[/param=value]]) to measure"
    )
    ap.add_argument("--replica-policies", default="fifo,rein", help="policies for --replica (comma list)")
    ap.add_argument("--large-share", type=float, default=0.1, help="share of 512 KiB keys of the 'mix' runs")
    ap.add_argument("--values", default="uniform,mix", help="value-size setups for --replica: uniform, mix or both")
    ap.add_argument(
        "--params",
        default="",
        help="comma list of policy:param=value[/param=value] measured on the core replay, the policy's own and "
        "the coordinator section's kvsim params (e.g. rein,rein:spec_kind=3/spec_fixed_ms=50)",
    )
    args = ap.parse_args()
    if args.core_policies not in ("all", "none"):
        raise SystemExit("--core-policies must be 'all' or 'none'")
    if not set(args.values.split(",")) <= {"uniform", "mix"}:
        raise SystemExit("--values must be a comma list of 'uniform' and 'mix'")
    if not 0.0 < args.large_share <= 1.0:
        raise SystemExit("--large-share must be in (0, 1]")
    cluster = kvsim.Cluster()
    if args.core_policies == "all":
        core_speed(args, cluster)
    if args.replica:
        replica_speed(args, cluster)
    if args.params:
        params_speed(args, cluster)


def params_speed(args: argparse.Namespace, cluster: kvsim.Cluster) -> None:
    """Each `--params` case on one workload (round-robin replicas, named so that the extra reads are reported),
    the cases interleaved (best of `--repeat`)."""
    wl = make(cluster, args.requests, 1)
    specs = [(spec, *parse_selector(spec)) for spec in args.params.split(",")]
    best: dict[str, kvsim.Result] = {}
    for _ in range(args.repeat):
        for spec, policy, params in specs:
            r = replay(wl, policy, params=params, replica="round-robin")[0]
            if spec not in best or r.sim_wall_s < best[spec].sim_wall_s:
                best[spec] = r
    print(f"\n{args.requests} requests, best of {args.repeat} (cases interleaved)")
    print("case                                      wall_s     events   M ev/s  extra_reads  p99_ms")
    for spec, _, _ in specs:
        r = best[spec]
        extra = r.copies["ops"] if r.copies is not None else 0
        print(f"{spec:40s} {r.sim_wall_s:7.3f} {r.events:10d} {r.events_per_s / 1e6:8.2f} {extra:12d} {r.p99_ms:7.2f}")


def core_speed(args: argparse.Namespace, cluster: kvsim.Cluster) -> None:
    t = time.perf_counter()
    wl = make(cluster, args.requests, 1)
    mat = time.perf_counter() - t
    print(f"materialize {args.requests} requests ({wl.ops} ops, {wl.opsets} opsets): {mat:.3f} s")
    print("policy        wall_s  events     M ev/s  M ops/s  bytes/op  p99_ms  steady")
    for policy in kvsim.policy_names():
        best = None
        for _ in range(args.repeat):
            r = replay(wl, policy)[0]
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
        rust = min((replay(small, policy)[0] for _ in range(args.repeat)), key=lambda r: r.sim_wall_s)
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
