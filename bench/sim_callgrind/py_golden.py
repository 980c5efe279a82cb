"""Golden outputs of the Python layer of kvsim: `to_json()` of replays through `kvsim.replay(workload, config)`
(core configs; configs naming a replica selector or a model extension, keyed `sized/*`), the memcached replays
through `kvsim.memcached.replay` (the result's fields, and its `to_json()` keyed `*-summary`), plus the policy and
selector catalogues. Wall-time figures are left out; latency arrays and per-op records are hashed.

Usage: python bench/sim_callgrind/py_golden.py > out.json   (compare two builds with `diff`)
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
from collections.abc import Callable
from typing import Any

import kvsim
import numpy as np
from kvsim import memcached
from kvsim.chisel import MemcachedSetup
from kvsim.memcached import MemcachedConfig, MemcachedResult
from kvsim.types import DemandInfo

WALL = {"sim_wall_s", "events_per_s"}


def _h(a: Any) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in WALL}


def _res(r: kvsim.Result) -> dict[str, Any]:
    """to_json of a Result plus hashes of its arrays."""
    out = _clean(r.to_json())
    out["_latency"] = _h(r.latency_ms)
    out["_server_load"] = _h(r.server_load)
    if r.records is not None:
        out["_records"] = {k: _h(v) for k, v in sorted(r.records.items())}
    arr = r.arrival_ms
    if arr is not None:
        out["_arrival"] = _h(arr)
    return out


def workload(*, sizes: bool, load: float = 0.6, seed: int = 3, n: int = 1500) -> tuple[kvsim.Workload, Any]:
    rng = np.random.default_rng(7)
    k = np.ceil(np.exp(2.2 + 1.0 * rng.standard_normal(n))).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(k)])
    keys = rng.integers(0, 200_000, size=int(offsets[-1]))
    cluster = kvsim.Cluster(servers=32, slots=4, clients=16)
    size_arr = None
    mean = None
    if sizes:
        size_arr = np.where(keys % 10 == 0, 512 * 1024.0, 1024.0)
        mean = kvsim.DemandModel.default(cluster.service_rate).mean_s(size_arr)
    wl = kvsim.Workload(cluster, offsets, keys=keys, mean_demand_s=mean, load=load, seed=seed)
    return wl, size_arr


def _rp(w: kvsim.Workload, policy: str, params: dict[str, float] | None = None, **kw: Any) -> dict[str, Any]:
    return _res(kvsim.replay(w, kvsim.ReplayConfig(policy=policy, params=params or {}, **kw)))


def cases() -> dict[str, Callable[[], Any]]:
    wl, _ = workload(sizes=False)
    swl, sizes = workload(sizes=True)
    model = kvsim.DemandModel.default(swl.cluster.service_rate)
    thr = kvsim.default_thr_l(model, 1024.0)
    demand: DemandInfo = {"dist": "exponential", "model": "size", "median_bytes": 1024.0}
    slow = kvsim.ServerModel.slow_servers(32, 4, 3.0, kvsim.Slowdown(interval_ms=20.0, fraction=0.1, factor=4.0))
    writes = kvsim.write_flags(swl.ops, write_fraction=0.1, seed=1)
    rr = "round-robin"
    out: dict[str, Callable[[], Any]] = {}
    for p in kvsim.policy_names():
        if p in ("duplicate", "speculative", "tailx"):
            continue
        out[f"core/{p}"] = functools.partial(_rp, wl, p)
    out["core/rein-params"] = lambda: _rp(wl, "rein", {"k": 6, "range_factor": 2.0, "rate_step": 0.5})
    out["core/rein-sbf-boost"] = lambda: _rp(wl, "rein-sbf", {"boost_after_ms": 2.0})
    out["core/rein-sds-records"] = lambda: _rp(wl, "rein-sds", record_ops=True, warmup=0.0)
    out["core/rein-size-aware"] = lambda: _rp(swl, "rein", size_aware_cost=True)
    out["core/warmup-0.5"] = lambda: _rp(wl, "brb-unifincr", warmup=0.5)
    # "sized/*": a replica selector named (round-robin when none), so the result carries the replica-selection
    # figures.
    out["sized/round-robin"] = lambda: _rp(wl, "fifo", replica=rr)
    out["sized/rein-rr"] = lambda: _rp(wl, "rein", {"k": 3}, replica=rr)
    for sel in ("random", "least-outstanding", "ds", "c3", "heron"):
        out[f"sized/fifo-{sel}-sizes"] = functools.partial(
            lambda s: _rp(swl, "fifo", replica=s, sizes=sizes, thr_l_bytes=thr, seed=2, demand=demand), sel
        )
    out["sized/rein-ds-params"] = lambda: _rp(
        swl, "rein", {"k": 5}, replica="ds", replica_params={"update_ms": 10.0}, sizes=sizes, thr_l_bytes=thr,
        size_aware_cost=True,
    )  # fmt: skip
    out["sized/heron-thr-param"] = lambda: _rp(
        swl, "rein", replica="heron", replica_params={"thr_l_bytes": 20000.0, "busy_capacity": 4}, sizes=sizes
    )
    out["sized/heron-no-sizes"] = lambda: _rp(wl, "fifo", replica="heron")
    out["sized/tailx"] = lambda: _rp(swl, "tailx", {"thr_l_bytes": thr}, replica="ds", sizes=sizes, thr_l_bytes=thr)
    out["sized/duplicate"] = lambda: _rp(wl, "duplicate", replica=rr)
    out["sized/speculative"] = lambda: _rp(wl, "speculative", {"percentile": 80}, replica="c3")
    out["sized/servers"] = lambda: _rp(swl, "rein", replica="ds", sizes=sizes, thr_l_bytes=thr, servers=slow)
    out["sized/writes"] = lambda: _rp(swl, "fifo", replica="c3", writes=writes)
    out["sized/writes-none"] = lambda: _rp(swl, "fifo", replica=rr, writes=np.zeros(swl.ops, dtype=bool))
    out["sized/closed"] = lambda: _rp(
        swl, "rein", replica=rr, closed=kvsim.ClosedLoop(threads=24, think_ms=0.2), record_ops=True
    )
    out["sized/closed-fixed-everything"] = lambda: _rp(
        swl, "speculative", replica="heron", sizes=sizes, thr_l_bytes=thr, servers=slow, writes=writes,
        closed=kvsim.ClosedLoop(threads=16, think_ms=0.0, think_dist="fixed"),
    )  # fmt: skip
    out["sized/label"] = lambda: _res(
        dataclasses.replace(
            kvsim.replay(wl, kvsim.ReplayConfig(replica="c3", replica_params={"b": 2.0})),
            policy_label="c3",
        )
    )
    rng = np.random.default_rng(5)
    msizes = np.where(rng.random(600) < 0.1, rng.integers(100, 300, 600), rng.integers(1, 10, 600))
    marr = np.cumsum(rng.exponential(40e-6, 600))
    for pol, params in (("batching", None), ("chisel", None), ("chisel", {"split_keys": 25, "merge": 2}),
                        ("chisel", {"split_chunks": 4, "merge": 3, "elephant_threshold": 20})):
        key = f"memcached/{pol}-{json.dumps(params, sort_keys=True)}"
        dep = MemcachedSetup(setup_us=10.0, service_cv=0.3)
        out[key] = functools.partial(
            lambda po, pa, d: _mc(
                memcached.replay(msizes, marr, MemcachedConfig(policy=po, params=pa or {}, deployment=d, seed=4))
            ),
            pol,
            params,
            dep,
        )
        three = MemcachedSetup(servers=3)
        out[key + "-summary"] = functools.partial(
            lambda po, pa, d: _clean(
                dict(memcached.replay(msizes, marr, MemcachedConfig(policy=po, params=pa or {}, deployment=d,
                                                                    seed=2)).to_json())
            ),
            pol,
            params,
            three,
        )
    out["catalogue/policies"] = lambda: {p: kvsim.policy_defaults(p) for p in kvsim.policy_names()}
    out["catalogue/replicas"] = lambda: {r: kvsim.replica_defaults(r) for r in kvsim.replica_names()}
    return out


def _mc(r: MemcachedResult) -> dict[str, Any]:
    """The result's fields (not its properties) in declaration order, the latencies hashed."""
    out = _clean({f.name: getattr(r, f.name) for f in dataclasses.fields(r)})
    out["latencies_ms"] = _h(out["latencies_ms"])
    return out


def main() -> None:
    res = {}
    for name, fn in cases().items():
        try:
            res[name] = fn()
        except Exception as exc:  # a golden records the failure too
            res[name] = {"error": f"{type(exc).__name__}: {exc}"}
    json.dump(res, sys.stdout, indent=1, default=float)  # key order kept: it is part of the output
    print()


if __name__ == "__main__":
    main()
