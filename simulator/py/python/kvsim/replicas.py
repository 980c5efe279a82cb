"""Replay with a replica selector and heterogeneous value sizes (issue 4): the large-key Bloom filter, per-class
latency percentiles (requests touching a large value vs the others) and the parameters actually used.

Model choices: docs/simulator-replicas.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kvsim import _kvsim
from kvsim._kvsim import ParameterError
from kvsim.models import ClosedLoop, ServerModel
from kvsim.replay import Result, Workload, result_from_dict

__all__ = [
    "BloomInfo",
    "SizedResult",
    "class_summary",
    "replay_sized",
    "replica_defaults",
    "replica_names",
]

# `--policy NAME` shorthands: fifo server queues with that replica selection.
SHORTHANDS = ("c3", "ds", "heron")


def replica_names() -> list[str]:
    return list(_kvsim.replica_names())


def replica_defaults(name: str) -> dict[str, float]:
    return dict(_kvsim.replica_defaults(name))


@dataclass(frozen=True)
class BloomInfo:
    """The large-key filter actually built: keys above thr_l_bytes, bits, hashes, measured false positives."""

    thr_l_bytes: float
    large_keys: int
    bits: int
    hashes: int
    fp_target: float
    fp_measured: float

    def to_json(self) -> dict[str, Any]:
        return {
            "thr_l_bytes": self.thr_l_bytes,
            "large_keys": self.large_keys,
            "bits": self.bits,
            "hashes": self.hashes,
            "fp_target": self.fp_target,
            "fp_measured": self.fp_measured,
        }


def class_summary(latency_ms: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_], warmup: float) -> dict[str, Any]:
    """Percentiles (numpy linear) and mean of the requests in `mask` after the warm-up cut (same cut as the
    overall figures: the first ⌊warmup · n⌋ requests by arrival)."""
    n = latency_ms.size
    cut = min(int(np.floor(warmup * n)), max(n - 1, 0))
    sel = latency_ms[cut:][mask[cut:]]
    if sel.size == 0:
        return {"requests": 0}
    p50, p95, p99, p999 = np.percentile(sel, [50, 95, 99, 99.9])
    return {
        "requests": int(sel.size),
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "p999_ms": float(p999),
        "mean_ms": float(sel.mean()),
    }


@dataclass(frozen=True)
class SizedResult:
    """A replay with replica selection: the core `Result` plus what issue 4 adds to `simulate --json`."""

    result: Result
    replica: str
    replica_params: dict[str, float]
    held: dict[str, Any]
    classes: dict[str, dict[str, Any]] | None = None
    bloom: BloomInfo | None = None
    demand: dict[str, Any] = field(default_factory=dict)
    # `--policy c3|ds|heron` shorthand: reported as the policy, with its selector's parameters as `params`.
    policy_label: str | None = None
    # duplicate / speculative: op copies sent (`ops`) and copies answered first (`wins`); zero otherwise.
    copies: dict[str, int] = field(default_factory=dict)
    # Server speeds / slowdowns actually used (None = every server at speed 1).
    servers: dict[str, Any] | None = None
    # Writes: {ops, copies} (+ what made them), None = reads only.
    writes: dict[str, Any] | None = None
    # Closed-loop clients: {threads, think_ms, think_dist, throughput_rps, ops_per_s, makespan_s}; None = open.
    closed: dict[str, Any] | None = None
    # Closed loop: when each request was issued (ms), in request order.
    arrival_ms: npt.NDArray[np.float64] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        out = self.result.to_json()
        if self.policy_label is not None:
            out["policy"] = self.policy_label
            out["queue_policy"] = self.result.policy
            out["params"] = dict(self.replica_params)
        out["replica"] = self.replica
        out["replica_params"] = dict(self.replica_params)
        out["held"] = dict(self.held)
        if self.copies.get("ops"):
            out["copies"] = dict(self.copies)
        if self.demand:
            out["demand"] = dict(self.demand)
        if self.bloom is not None:
            out["bloom"] = self.bloom.to_json()
        if self.classes is not None:
            out["classes"] = {k: dict(v) for k, v in self.classes.items()}
        if self.servers is not None:
            out["servers"] = dict(self.servers)
        if self.writes is not None:
            out["writes"] = dict(self.writes)
        out["client_model"] = "open" if self.closed is None else "closed"
        if self.closed is not None:
            out["closed"] = dict(self.closed)
        return out


def replay_sized(
    workload: Workload,
    policy: str,
    params: Mapping[str, float] | None = None,
    *,
    replica: str = "round-robin",
    replica_params: Mapping[str, float] | None = None,
    sizes: npt.ArrayLike | None = None,
    thr_l_bytes: float | None = None,
    bloom_fp: float = 0.0001,
    warmup: float = 0.1,
    record_ops: bool = False,
    size_aware_cost: bool = False,
    seed: int = 0,
    demand: Mapping[str, Any] | None = None,
    servers: ServerModel | None = None,
    writes: npt.ArrayLike | None = None,
    closed: ClosedLoop | None = None,
) -> SizedResult:
    """Replays `workload` (whose input ops have value `sizes`, in input order) under
    `policy` with replica selector `replica`.

    With sizes, ops above THR_L are large: the client's estimate is the Bloom filter built from the distinct
    (key, size) pairs (one filter per replica-group shard, OR-merged), the servers know the truth, and the
    latencies are also reported per class. `thr_l_bytes` None → heron's parameter if set, else the caller's
    derived default must be given; without sizes there are no classes and nothing is large.

    `servers`: speed factors / slowdowns (the workload's `load` is not rescaled here: build the workload with
    `load × servers.capacity_factor(...)` to offer a fraction of the reduced capacity). `writes`: per input op,
    true = a write (served at every replica, answered by the first). `closed`: closed-loop clients (the
    workload's arrival times are then ignored).
    """
    tok = workload.tokens
    rparams = {str(k): float(v) for k, v in (replica_params or {}).items()}
    large_est = large_true = None
    bloom = None
    thr = thr_l_bytes
    if replica == "heron" and rparams.get("thr_l_bytes", 0.0) > 0.0:
        thr = rparams["thr_l_bytes"]
    sz: npt.NDArray[np.float64] | None = None
    if sizes is not None:
        sz = np.ascontiguousarray(sizes, dtype=np.float64)
        if sz.shape != tok.shape:
            raise ParameterError(f"parameter 'sizes' has {sz.size} values for {tok.size} ops")
        if thr is None:
            raise ParameterError("parameter 'thr_l_bytes' is needed with sizes (no default given)")
        truth = sz > thr
        raw, fp, bits, hashes = _kvsim.large_filter(
            tok, sz, tok, float(thr), fp=bloom_fp, parts=workload.cluster.servers
        )
        est = np.frombuffer(raw, dtype=np.uint8)
        large_est = np.ascontiguousarray(est)
        large_true = np.ascontiguousarray(truth.astype(np.uint8))
        bloom = BloomInfo(
            thr_l_bytes=float(thr),
            large_keys=int(np.unique(tok[truth]).size),
            bits=int(bits),
            hashes=int(hashes),
            fp_target=bloom_fp,
            fp_measured=float(fp),
        )
        if replica == "heron":
            rparams["thr_l_bytes"] = float(thr)
    plist = [(str(k), float(v)) for k, v in (params or {}).items()]
    extra: dict[str, Any] = {}
    if servers is not None and not servers.is_default():
        extra.update(servers.kwargs())
    wflags: npt.NDArray[np.uint8] | None = None
    if writes is not None:
        wflags = np.ascontiguousarray(np.asarray(writes, dtype=np.bool_).astype(np.uint8))
        if wflags.shape != tok.shape:
            raise ParameterError(f"parameter 'writes' has {wflags.size} flags for {tok.size} ops")
        if wflags.any():
            extra["write"] = wflags
    if closed is not None:
        extra.update(closed.kwargs())
    d = _kvsim.replay_ext(
        workload._raw,
        policy,
        plist,
        replica=replica,
        replica_params=list(rparams.items()),
        warmup=warmup,
        record_ops=record_ops,
        size_aware_cost=size_aware_cost,
        large_est=large_est,
        large_true=large_true,
        seed=seed,
        **extra,
    )
    res = result_from_dict(d)
    classes = None
    if sz is not None and large_true is not None and np.unique(sz).size > 1:
        offsets = workload.offsets
        per_req = np.add.reduceat(large_true.astype(np.int64), offsets[:-1]) > 0
        classes = {
            "small": class_summary(res.latency_ms, ~per_req, warmup),
            "large": class_summary(res.latency_ms, per_req, warmup),
        }
    n_cl = workload.cluster.servers
    closed_json = None
    arrival_ms = None
    if closed is not None:
        span_s = float(d["makespan_ns"]) / 1e9
        closed_json = {
            **closed.to_json(),
            "throughput_rps": res.requests / span_s if span_s > 0 else 0.0,
            "ops_per_s": res.ops / span_s if span_s > 0 else 0.0,
            "makespan_s": span_s,
        }
        arrival_ms = np.frombuffer(d["arrival_ns"], dtype=np.uint64).astype(np.float64) / 1e6
    writes_json = None
    if wflags is not None and wflags.any():
        writes_json = {"ops": int(d["writes"]["ops"]), "copies": int(d["writes"]["copies"])}
    return SizedResult(
        result=res,
        servers=None if servers is None or servers.is_default() else servers.to_json(n_cl),
        writes=writes_json,
        closed=closed_json,
        arrival_ms=arrival_ms,
        replica=str(d["replica"]),
        replica_params={str(k): float(v) for k, v in d["replica_params"]},
        held=dict(d["held"]),
        copies={k: int(v) for k, v in d.get("copies", {}).items()},
        classes=classes,
        bloom=bloom,
        demand=dict(demand or {}),
    )
