"""Typed Python API of the replay simulator: `Cluster`, `Workload` (materialized once per seed, replayed under
many policies — common random numbers) and `Result`. Model choices: docs/simulator.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kvsim import _kvsim
from kvsim._kvsim import KvsimError, ParameterError, WorkloadError

__all__ = [
    "Cluster",
    "KvsimError",
    "ParameterError",
    "Result",
    "Workload",
    "WorkloadError",
    "policy_defaults",
    "policy_names",
    "tokens_for_keys",
]

_ARRAY_DTYPES: dict[str, type[np.generic]] = {
    "arrival_ns": np.uint64,
    "client": np.uint32,
    "req_opsets": np.uint32,
    "opset_group": np.uint32,
    "opset_req": np.uint32,
    "opset_ops": np.uint32,
    "demand_ns": np.uint64,
    "op_input": np.uint32,
    "replicas": np.uint32,
}
_RECORD_DTYPES: dict[str, type[np.generic]] = {
    "request": np.uint32,
    "opset": np.uint32,
    "server": np.uint32,
    "slot": np.uint32,
    "enqueue_ns": np.uint64,
    "start_ns": np.uint64,
    "end_ns": np.uint64,
    "demand_ns": np.uint64,
}


def policy_names() -> list[str]:
    """Policies of the core engine."""
    return list(_kvsim.policy_names())


def policy_defaults(name: str) -> dict[str, float]:
    """Default parameters of a policy (raises ParameterError for an unknown name)."""
    return dict(_kvsim.policy_defaults(name))


def tokens_for_keys(keys: Sequence[str] | npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Murmur3 ring tokens of keys: strings hash their UTF-8 bytes, integers their 8 little-endian bytes."""
    arr = np.asarray(keys)
    if arr.dtype.kind in "iu":
        raw = _kvsim.tokens_from_ids(np.ascontiguousarray(arr, dtype=np.uint64))
        return np.frombuffer(raw, dtype=np.int64)
    uniques, codes = np.unique(arr.astype(str), return_inverse=True)
    tok = np.frombuffer(_kvsim.tokens_from_strings([str(u) for u in uniques]), dtype=np.int64)
    return np.ascontiguousarray(tok[codes.reshape(-1)])


@dataclass(frozen=True)
class Cluster:
    """N servers × slots, RF consecutive replicas on a Murmur3 ring, one-way network latency, M clients."""

    servers: int = 128
    slots: int = 8
    replication: int = 3
    vnodes: int = 1
    service_rate: float = 3750.0
    net_latency_us: float = 50.0
    clients: int = 128
    _raw: _kvsim.Cluster = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (self.net_latency_us >= 0.0 and np.isfinite(self.net_latency_us)):
            raise ParameterError(
                f"parameter 'net_latency_us' = {self.net_latency_us} is out of range: valid ≥ 0"
            )
        raw = _kvsim.Cluster(
            self.servers,
            self.slots,
            self.replication,
            self.vnodes,
            float(self.service_rate),
            round(self.net_latency_us * 1000.0),
            self.clients,
        )
        object.__setattr__(self, "_raw", raw)

    @property
    def groups(self) -> int:
        return int(self._raw.groups)

    def replica_table(self) -> npt.NDArray[np.uint32]:
        """groups × RF servers, primary first."""
        return np.frombuffer(self._raw.replica_table(), dtype=np.uint32).reshape(
            self.groups, self.replication
        )

    def capacity_ops(self) -> float:
        return self.servers * self.slots * self.service_rate


@dataclass(frozen=True)
class Result:
    """One replay: latency percentiles in ms after the warm-up cut, counts, load and speed figures."""

    policy: str
    params: dict[str, float]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    mean_ms: float
    requests: int
    ops: int
    events: int
    utilization: float
    server_load_max: float
    steady_state: bool
    sim_wall_s: float
    events_per_s: float
    measured: int
    half_ratio: float
    bytes_per_op: float
    server_load: npt.NDArray[np.float64] = field(repr=False)
    latency_ms: npt.NDArray[np.float64] = field(repr=False)
    records: dict[str, npt.NDArray[Any]] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The `simulate --json` object."""
        return {
            "policy": self.policy,
            "params": dict(self.params),
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "p99_ms": self.p99_ms,
            "p999_ms": self.p999_ms,
            "mean_ms": self.mean_ms,
            "requests": self.requests,
            "ops": self.ops,
            "events": self.events,
            "utilization": self.utilization,
            "server_load_max": self.server_load_max,
            "steady_state": self.steady_state,
            "sim_wall_s": self.sim_wall_s,
            "events_per_s": self.events_per_s,
            "measured_requests": self.measured,
            "half_ratio": self.half_ratio,
            "bytes_per_op": self.bytes_per_op,
        }

    def records_table(self) -> Any:
        """Per-op records as a pyarrow Table (requires record_ops=True)."""
        import pyarrow as pa

        if self.records is None:
            raise KvsimError("no per-op records: replay with record_ops=True")
        return pa.table({k: pa.array(v) for k, v in self.records.items()})


class Workload:
    """A workload materialized from a seed before any replay: arrivals, opsets and per-op demands.

    `offsets` (requests + 1) delimit each request's ops in `keys` (strings or integer ids) or `tokens`.
    Without `timestamps` arrivals are Poisson at `load` × capacity; with them the trace's own times are used,
    scaled to `load` when given.
    """

    def __init__(
        self,
        cluster: Cluster,
        offsets: npt.ArrayLike,
        *,
        keys: Sequence[str] | npt.NDArray[Any] | None = None,
        tokens: npt.ArrayLike | None = None,
        mean_demand_s: npt.ArrayLike | None = None,
        clients: npt.ArrayLike | None = None,
        timestamps: npt.ArrayLike | None = None,
        load: float | None = 0.75,
        seed: int = 0,
        demand_dist: str = "exponential",
        demand_sigma: float = 1.0,
    ) -> None:
        if (keys is None) == (tokens is None):
            raise WorkloadError("give exactly one of keys= or tokens=")
        tok = tokens_for_keys(keys) if keys is not None else np.asarray(tokens, dtype=np.int64)
        if seed < 0:
            raise ParameterError(f"parameter 'seed' = {seed} is out of range: valid ≥ 0")
        self.cluster = cluster
        self.seed = seed
        self.load = load
        # Input order (issue 4: per-request size classes and the large-key filter need them).
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.tokens = np.ascontiguousarray(tok, dtype=np.int64)
        self._raw = _kvsim.Workload(
            cluster._raw,
            np.ascontiguousarray(offsets, dtype=np.int64),
            np.ascontiguousarray(tok, dtype=np.int64),
            mean_demand=None
            if mean_demand_s is None
            else np.ascontiguousarray(mean_demand_s, dtype=np.float64),
            clients=None if clients is None else np.ascontiguousarray(clients, dtype=np.uint32),
            timestamps=None if timestamps is None else np.ascontiguousarray(timestamps, dtype=np.float64),
            load=load,
            seed=seed,
            demand_dist=demand_dist,
            demand_sigma=float(demand_sigma),
        )

    @property
    def requests(self) -> int:
        return int(self._raw.requests)

    @property
    def opsets(self) -> int:
        return int(self._raw.opsets)

    @property
    def ops(self) -> int:
        return int(self._raw.ops)

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The materialized workload (and the cluster's replica table) as numpy arrays."""
        raw = self._raw.arrays()
        out = {k: np.frombuffer(v, dtype=_ARRAY_DTYPES[k]) for k, v in raw.items()}
        out["replicas"] = out["replicas"].reshape(-1, self.cluster.replication)
        return out

    def replay(
        self,
        policy: str,
        params: Mapping[str, float] | None = None,
        *,
        warmup: float = 0.1,
        record_ops: bool = False,
        size_aware_cost: bool = False,
    ) -> Result:
        """Replays under `policy` (GIL released). Bad names/values raise ParameterError (a ValueError)."""
        plist = [(str(k), float(v)) for k, v in (params or {}).items()]
        d = self._raw.replay(
            policy, plist, warmup=warmup, record_ops=record_ops, size_aware_cost=size_aware_cost
        )
        return result_from_dict(d)


def result_from_dict(d: dict[str, Any]) -> Result:
    """A `Result` from the dict of the binding's replay functions."""
    records = None
    if "records" in d:
        records = {k: np.frombuffer(v, dtype=_RECORD_DTYPES[k]) for k, v in d["records"].items()}
    wall = float(d["sim_wall_s"])
    return Result(
        policy=str(d["policy"]),
        params={str(k): float(v) for k, v in d["params"]},
        p50_ms=float(d["p50_ms"]),
        p95_ms=float(d["p95_ms"]),
        p99_ms=float(d["p99_ms"]),
        p999_ms=float(d["p999_ms"]),
        mean_ms=float(d["mean_ms"]),
        requests=int(d["requests"]),
        ops=int(d["ops"]),
        events=int(d["events"]),
        utilization=float(d["utilization"]),
        server_load_max=float(d["server_load_max"]),
        steady_state=bool(d["steady_state"]),
        sim_wall_s=wall,
        events_per_s=float(d["events"]) / wall if wall > 0 else 0.0,
        measured=int(d["measured"]),
        half_ratio=float(d["half_ratio"]),
        bytes_per_op=float(d["bytes_per_op"]),
        server_load=np.frombuffer(d["server_load"], dtype=np.float64),
        latency_ms=np.frombuffer(d["latency_ns"], dtype=np.uint64).astype(np.float64) / 1e6,
        records=records,
    )
