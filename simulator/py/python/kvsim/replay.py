"""Typed Python API of the replay simulator: `Cluster`, `WorkloadLayout` (the seed-independent part of a workload,
built once per trace and cluster), `Workload` (a layout and one seed's draws, materialized once per seed and
replayed under many configs — common random numbers), `ReplayConfig`, and the one entry point
`replay(workload, config) -> Result`. Model choices: docs/simulator.md and docs/simulator-replicas.md.

Layouts and draws can be built over read-only arrays (`from_arrays`: memory-mapped files) without a copy, so
processes that map the same files hold one copy of the workload between them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from kvsim import _kvsim
from kvsim._kvsim import KvsimError, ParameterError, WorkloadError
from kvsim.models import ClosedLoop, ServerModel
from kvsim.ring import Ring
from kvsim.types import (
    BloomJson,
    ClassSummary,
    ClosedInfo,
    CopiesInfo,
    DemandInfo,
    HeldInfo,
    JsonValue,
    OpRecords,
    ServersInfo,
    TimeoutsInfo,
    WritesInfo,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from kvsim._kvsim import RawResult

__all__ = [
    "BloomInfo",
    "Cluster",
    "KvsimError",
    "ParameterError",
    "ReplayConfig",
    "Result",
    "Workload",
    "WorkloadError",
    "WorkloadLayout",
    "class_summary",
    "replay",
    "tokens_for_keys",
    "tokens_for_utf8",
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

#: dtype of each array of a `WorkloadLayout`.
LAYOUT_DTYPES: dict[str, type[np.generic]] = {
    "client": np.uint32,
    "req_opsets": np.uint32,
    "opset_group": np.uint32,
    "opset_req": np.uint32,
    "opset_ops": np.uint32,
    "op_input": np.uint32,
    "mean_demand": np.float32,
}


def tokens_for_keys(keys: Sequence[str] | npt.NDArray[np.generic]) -> npt.NDArray[np.int64]:
    """Murmur3 ring tokens of keys: strings are Cassandra's Murmur3Partitioner tokens of their UTF-8 bytes (what
    `token(k)` gives for a text partition key), integers hash their 8 little-endian bytes."""
    arr = np.asarray(keys)
    if arr.dtype.kind in "iu":
        raw = _kvsim.tokens_from_ids(np.ascontiguousarray(arr, dtype=np.uint64))
        return np.frombuffer(raw, dtype=np.int64)
    # str objects are compared as they are: a fixed-width copy (`astype(str)`) would drop trailing NULs ("a\0"
    # hashed as "a") and cost 4 bytes per character of the longest key for every key
    objs = arr if arr.dtype.kind == "O" else arr.astype(str)
    uniques, codes = np.unique(objs, return_inverse=True)
    tok = np.frombuffer(_kvsim.tokens_from_strings([str(u) for u in uniques]), dtype=np.int64)
    return np.ascontiguousarray(tok[codes.reshape(-1)])


def tokens_for_utf8(offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    """Murmur3 ring tokens of string keys given as UTF-8 bytes and int64 offsets (key i is
    `data[offsets[i]:offsets[i + 1]]`, an Arrow large_string column's buffers): `tokens_for_keys` of the same
    strings, without making a Python string per key."""
    raw = _kvsim.tokens_from_utf8(
        np.ascontiguousarray(offsets, dtype=np.int64), np.ascontiguousarray(data, dtype=np.uint8)
    )
    return np.frombuffer(raw, dtype=np.int64)


def _rtt_quantiles(values: object) -> tuple[float, ...]:
    """`Cluster.client_rtt_us` checked: at least 2 finite quantiles in [0, 1e9] µs, non-decreasing (a
    ParameterError naming the field otherwise)."""

    def bad(value: object, valid: str) -> ParameterError:
        return ParameterError(f"parameter 'client_rtt_us' = {value} is out of range: valid {valid}")

    try:
        q = tuple(float(x) for x in cast("Sequence[float]", values))
    except (TypeError, ValueError):
        raise bad(values, "a list of quantiles, µs") from None
    if len(q) < 2:
        raise bad(f"{len(q)} quantiles", "at least 2 quantiles (p0 and p100)")
    for i, x in enumerate(q):
        if not (np.isfinite(x) and 0.0 <= x <= 1e9):
            raise bad(f"[{i}] = {x}", "quantiles in [0, 1e9] µs")
    for i in range(1, len(q)):
        if q[i] < q[i - 1]:
            raise bad(f"[{i}] = {q[i]} < [{i - 1}] = {q[i - 1]}", "non-decreasing quantiles")
    return q


#: The cluster's defaults: the core's (`ClusterConfig::default()`, Rein's cluster), the one statement of them.
_DEFAULT = _kvsim.cluster_defaults()
_DEFAULT_NET_US = _DEFAULT.net_latency_ns / 1000.0


@dataclass(frozen=True)
class Cluster:
    """N servers × slots, RF consecutive replicas on a Murmur3 ring, one-way network latency, M clients; the
    defaults are the core's (`kvsim.cluster_defaults()`: Rein's 128 servers × 8 slots, RF 3, 3750 ops/s per slot,
    50 µs, 128 clients).

    With `ring` (`kvsim.Ring`), the ring is the real one: the servers are its local datacenter's nodes (`servers`
    must be their number, `replication` the local datacenter's RF: `Cluster.of_ring` fills both), the replica
    groups its token ranges, each read from the range's local replicas as Cassandra places them.

    With `client_rtt_us` (quantiles, µs, at the equally spaced probabilities 0, 1/(n−1), …, 1; n ≥ 2,
    non-decreasing), the client ↔ coordinator round trip is a measured distribution instead of two constant hops:
    each request's reported latency is the engine's less 2 × `net_latency_us`, plus one draw of the round trip (one
    per request, in request order, from its own stream of the seed: every policy meets the same draws). The
    coordinator never sees it (speculative-retry samples, read timeout, replica selectors keep the engine's times);
    a closed-loop thread issues its next request once the reported one is complete. docs/simulator.md § Network.

    With `client_key_us` > 0 (µs, in [0, 1e6]), each request's reported latency grows by (keys − 1) ×
    `client_key_us`, keys being its ops: the driver's and the coordinator's work on each partition beyond the
    first (a one-key read is the baseline the service time already includes). Outside the coordinator as the round
    trip is. docs/simulator.md § Network."""

    servers: int = _DEFAULT.servers
    slots: int = _DEFAULT.slots
    replication: int = _DEFAULT.replication
    vnodes: int = _DEFAULT.vnodes
    service_rate: float = _DEFAULT.service_rate
    net_latency_us: float = _DEFAULT_NET_US
    clients: int = _DEFAULT.clients
    ring: Ring | None = None
    client_rtt_us: tuple[float, ...] | None = None
    client_key_us: float = 0.0
    _raw: _kvsim.Cluster = field(init=False, repr=False, compare=False)

    @classmethod
    def of_ring(
        cls, ring: Ring, *, slots: int = _DEFAULT.slots, service_rate: float = _DEFAULT.service_rate,
        net_latency_us: float = _DEFAULT_NET_US, clients: int = _DEFAULT.clients,
        client_rtt_us: tuple[float, ...] | None = None, client_key_us: float = 0.0,
    ) -> Cluster:
        """A cluster on `ring`, its servers and replication the ring's."""
        return cls(servers=ring.servers, slots=slots, replication=ring.local_replication, service_rate=service_rate,
                   net_latency_us=net_latency_us, clients=clients, ring=ring, client_rtt_us=client_rtt_us,
                   client_key_us=client_key_us)

    def __post_init__(self) -> None:
        if not (self.net_latency_us >= 0.0 and np.isfinite(self.net_latency_us)):
            raise ParameterError(
                f"parameter 'net_latency_us' = {self.net_latency_us} is out of range: valid ≥ 0"
            )
        key = self.client_key_us
        if not (isinstance(key, int | float) and not isinstance(key, bool) and math.isfinite(key)
                and 0.0 <= key <= 1e6):
            raise ParameterError(f"parameter 'client_key_us' = {key} is out of range: valid 0 ≤ µs ≤ 1e6")
        rtt_ns = None
        if self.client_rtt_us is not None:
            rtt = _rtt_quantiles(self.client_rtt_us)
            object.__setattr__(self, "client_rtt_us", rtt)
            rtt_ns = [round(x * 1000.0) for x in rtt]
        raw = _kvsim.Cluster(
            self.servers,
            self.slots,
            self.replication,
            self.vnodes,
            float(self.service_rate),
            round(self.net_latency_us * 1000.0),
            self.clients,
            ring=None if self.ring is None else self.ring._raw,
            client_rtt_ns=rtt_ns,
            client_key_ns=round(key * 1000.0),
        )
        object.__setattr__(self, "_raw", raw)

    @property
    def groups(self) -> int:
        return int(self._raw.groups)

    def groups_of(self, tokens: npt.ArrayLike) -> npt.NDArray[np.uint32]:
        """The replica group of each key token (int64): the first ring token ≥ it, wrapping."""
        return np.frombuffer(self._raw.groups_of(np.ascontiguousarray(tokens, dtype=np.int64)), dtype=np.uint32)

    def replica_table(self) -> npt.NDArray[np.uint32]:
        """groups × RF servers, primary first."""
        return np.frombuffer(self._raw.replica_table(), dtype=np.uint32).reshape(
            self.groups, self.replication
        )

    def capacity_ops(self) -> float:
        return self.servers * self.slots * self.service_rate


def _f64(a: npt.ArrayLike | None) -> npt.NDArray[np.float64] | None:
    if a is None:
        return None
    arr = np.asarray(a)
    return arr if arr.dtype == np.float64 and arr.flags.c_contiguous else np.ascontiguousarray(arr, np.float64)


def _tokens(
    keys: Sequence[str] | npt.NDArray[np.generic] | None, tokens: npt.ArrayLike | None
) -> npt.NDArray[np.int64]:
    """The ring tokens of a workload given by exactly one of `keys` or `tokens` (C-contiguous int64)."""
    if (keys is None) == (tokens is None):
        raise WorkloadError("give exactly one of keys= or tokens=")
    tok = tokens_for_keys(keys) if keys is not None else np.asarray(tokens, dtype=np.int64)
    return np.ascontiguousarray(tok, dtype=np.int64)


class _Counts:
    """The counts `WorkloadLayout` and `Workload` share, read from the native object (`_raw`)."""

    _raw: _kvsim.WorkloadLayout | _kvsim.Workload

    @property
    def requests(self) -> int:
        """Requests (multigets)."""
        return int(self._raw.requests)

    @property
    def opsets(self) -> int:
        """Opsets: a request's ops grouped by replica group."""
        return int(self._raw.opsets)

    @property
    def ops(self) -> int:
        """Ops: one per key of a request (the tokens given)."""
        return int(self._raw.ops)


class WorkloadLayout(_Counts):
    """The seed-independent part of a workload on one cluster: requests → opsets (ops grouped by replica group) →
    ops, the client of each request, each op's mean demand. Built once per trace and cluster; every seed's
    `Workload.draw` shares it.

    `offsets` (requests + 1) delimit each request's ops in `keys` (strings or integer ids) or `tokens`.
    """

    cluster: Cluster
    offsets: npt.NDArray[np.int64]
    tokens: npt.NDArray[np.int64]
    _raw: _kvsim.WorkloadLayout

    def __init__(
        self,
        cluster: Cluster,
        offsets: npt.ArrayLike,
        *,
        keys: Sequence[str] | npt.NDArray[np.generic] | None = None,
        tokens: npt.ArrayLike | None = None,
        mean_demand_s: npt.ArrayLike | None = None,
        clients: npt.ArrayLike | None = None,
    ) -> None:
        self.cluster = cluster
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.tokens = _tokens(keys, tokens)
        self._raw = _kvsim.WorkloadLayout(
            cluster._raw,
            self.offsets,
            self.tokens,
            mean_demand=_f64(mean_demand_s),
            clients=None if clients is None else np.ascontiguousarray(clients, dtype=np.uint32),
        )

    @classmethod
    def from_arrays(
        cls,
        cluster: Cluster,
        offsets: npt.NDArray[np.int64],
        tokens: npt.NDArray[np.int64],
        arrays: Mapping[str, npt.NDArray[np.generic]],
    ) -> WorkloadLayout:
        """A layout over the read-only arrays `arrays()` returned (e.g. memory-mapped files): borrowed, not
        copied. `offsets` and `tokens` as given to the constructor (kept as they are)."""
        self = cls.__new__(cls)
        self.cluster = cluster
        self.offsets = offsets
        self.tokens = tokens
        self._raw = _kvsim.WorkloadLayout.from_arrays(cluster._raw, dict(arrays))
        return self

    @property
    def nbytes(self) -> int:
        """Bytes of the layout's arrays as stored (`offsets` and `tokens` not included)."""
        return int(self._raw.nbytes)

    def arrays(self) -> dict[str, npt.NDArray[np.generic]]:
        """The layout's arrays (dtypes in `LAYOUT_DTYPES`; `mean_demand` is empty without per-op means)."""
        raw = cast(Mapping[str, bytes], self._raw.arrays())
        return {k: np.frombuffer(v, dtype=LAYOUT_DTYPES[k]) for k, v in raw.items()}


class Workload(_Counts):
    """A workload materialized from a seed before any replay: arrivals, opsets and per-op demands.

    `offsets` (requests + 1) delimit each request's ops in `keys` (strings or integer ids) or `tokens`.
    Without `timestamps` arrivals are Poisson at `load` × capacity; with them the trace's own times are used,
    scaled to `load` when given.
    """

    _raw: _kvsim.Workload

    def __init__(
        self,
        cluster: Cluster,
        offsets: npt.ArrayLike,
        *,
        keys: Sequence[str] | npt.NDArray[np.generic] | None = None,
        tokens: npt.ArrayLike | None = None,
        mean_demand_s: npt.ArrayLike | None = None,
        clients: npt.ArrayLike | None = None,
        timestamps: npt.ArrayLike | None = None,
        load: float | None = 0.75,
        seed: int = 0,
        demand_dist: str = "exponential",
        demand_sigma: float = 1.0,
    ) -> None:
        tok = _tokens(keys, tokens)
        if seed < 0:
            raise ParameterError(f"parameter 'seed' = {seed} is out of range: valid ≥ 0")
        self.cluster = cluster
        self.seed = seed
        self.load = load
        self._layout: WorkloadLayout | None = None
        # Input order: per-op size classes, writes and the large-key filter are given in it.
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.tokens = tok
        self._raw = _kvsim.Workload(
            cluster._raw,
            self.offsets,
            self.tokens,
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

    def arrays(self) -> dict[str, npt.NDArray[np.uint32] | npt.NDArray[np.uint64]]:
        """The materialized workload (and the cluster's replica table) as numpy arrays."""
        raw = cast(Mapping[str, bytes], self._raw.arrays())
        out: dict[str, npt.NDArray[np.uint32] | npt.NDArray[np.uint64]] = {
            k: np.frombuffer(v, dtype=_ARRAY_DTYPES[k]) for k, v in raw.items()
        }
        out["replicas"] = out["replicas"].reshape(-1, self.cluster.replication)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the layout's and the draws' arrays as stored."""
        return int(self._raw.nbytes)

    @classmethod
    def _of(cls, raw: _kvsim.Workload, layout: WorkloadLayout, n: int, seed: int, load: float | None) -> Workload:
        self = cls.__new__(cls)
        self.cluster = layout.cluster
        self.seed = seed
        self.load = load
        # by the offsets' size, not `layout.requests`: a workload made by the constructor has no native layout, and
        # `prefix` passes a stand-in that holds only its cluster, offsets and tokens
        self.offsets = layout.offsets if n + 1 == layout.offsets.size else layout.offsets[: n + 1]
        ops = int(self.offsets[-1])
        self.tokens = layout.tokens if ops == layout.tokens.size else layout.tokens[:ops]
        self._raw = raw
        self._layout = layout
        return self

    @classmethod
    def draw(
        cls,
        layout: WorkloadLayout,
        *,
        mean_demand_s: npt.ArrayLike | None = None,
        timestamps: npt.ArrayLike | None = None,
        load: float | None = 0.75,
        seed: int = 0,
        demand_dist: str = "exponential",
        demand_sigma: float = 1.0,
    ) -> Workload:
        """`seed`'s draws (arrivals, demands) over `layout`: the workload the constructor makes from the same
        inputs, with the layout's arrays shared instead of copied."""
        if seed < 0:
            raise ParameterError(f"parameter 'seed' = {seed} is out of range: valid ≥ 0")
        raw = _kvsim.Workload.draw(
            layout._raw,
            mean_demand=_f64(mean_demand_s),
            timestamps=_f64(timestamps),
            load=load,
            seed=seed,
            demand_dist=demand_dist,
            demand_sigma=float(demand_sigma),
        )
        return cls._of(raw, layout, layout.requests, seed, load)

    @classmethod
    def from_arrays(
        cls,
        layout: WorkloadLayout,
        arrival_ns: npt.NDArray[np.uint64],
        demand_ns: npt.NDArray[np.uint64],
        *,
        seed: int = 0,
        load: float | None = 0.75,
    ) -> Workload:
        """A workload over `layout` and draws saved from `draws()` (read-only arrays, e.g. memory-mapped files:
        borrowed, not copied)."""
        raw = _kvsim.Workload.from_arrays(layout._raw, arrival_ns, demand_ns)
        return cls._of(raw, layout, layout.requests, seed, load)

    def draws(self) -> dict[str, npt.NDArray[np.uint64]]:
        """What the seed drew: `arrival_ns` per request, `demand_ns` per op (layout order)."""
        a = self.arrays()
        return {"arrival_ns": cast(npt.NDArray[np.uint64], a["arrival_ns"]),
                "demand_ns": cast(npt.NDArray[np.uint64], a["demand_ns"])}

    def prefix(
        self,
        n: int,
        *,
        mean_demand_s: npt.ArrayLike | None = None,
        timestamps: npt.ArrayLike | None = None,
    ) -> Workload:
        """The workload of the first `n` requests — what the constructor makes from the first `n` requests with
        this workload's seed and load — sharing this one's arrays; the arrivals are made again (the rate that
        offers the load depends on the mean demand of the requests replayed). `mean_demand_s` and `timestamps`
        as this workload was made with."""
        raw = self._raw.prefix(
            int(n), mean_demand=_f64(mean_demand_s), timestamps=_f64(timestamps), load=self.load, seed=self.seed
        )
        layout = self._layout
        if layout is None:
            layout = WorkloadLayout.__new__(WorkloadLayout)
            layout.cluster, layout.offsets, layout.tokens = self.cluster, self.offsets, self.tokens
        return Workload._of(raw, layout, int(n), self.seed, self.load)


@dataclass(frozen=True)
class ReplayConfig:
    """Everything a replay takes besides the workload. The default is the core model: `fifo`, round-robin
    replicas, one value size, every server at speed 1, reads only, open-loop arrivals.

    - `policy`, `params`: the scheduling policy and its parameters (`kvsim.policy_specs()` lists them); `params`
      may also name the coordinator section's (`kvsim.coordinator_defaults(policy)`: speculative retry, driver,
      multiget shape; a name the policy has is the policy's).
    - `replica`, `replica_params`: the replica selector. None (the default) = round-robin with the core figures
      only; naming one — even "round-robin" — or setting `sizes`, `servers`, `writes`, `closed` or `demand` adds
      the replica-selection figures to the `Result` (`replica`, `held`, `copies`, `classes`, ... and their
      `to_json()` keys).
    - `sizes`: value size per input op (bytes, the order of the workload's keys). Ops above THR_L are large: the
      client's estimate is the large-key Bloom filter built from the distinct (key, size) pairs (one filter per
      replica-group shard, OR-merged, false-positive target `bloom_fp`), the servers know the truth, and the
      latencies are also reported per class. `thr_l_bytes` None → heron's `thr_l_bytes` parameter if set; with
      sizes, one of them is needed.
    - `servers`: speed factors / slowdowns (the workload's `load` is not rescaled here: build the workload with
      `load × servers.capacity_factor(...)` to offer a fraction of the reduced capacity).
    - `writes`: per input op, true = a write (served at every replica, answered by the first).
    - `closed`: closed-loop clients (the workload's arrival times are then ignored).
    - `warmup`: fraction of the first requests left out of the percentiles; `record_ops`: keep per-op records;
      `size_aware_cost`: opset cost = Σ mean demand instead of the op count (Rein's policies).
    - `seed`: the replay's own random streams (replica selectors, slowdown schedule, think times).
    - `demand`: how the workload's demands were made, reported as given (the replay does not read it).
    - `stop`: (quantile, bound ms): stop the replay as soon as that quantile of the measured latencies is
      certainly above the bound (`Result.stopped`); None replays to the end.
    - `latency_history`: the coordinators' read-latency history for the coordinator section's decaying
      histogram — sample counts per bucket of Cassandra's microsecond histogram (127 of them, bucket i
      holding latencies up to the i-th of EstimatedHistogram's offsets 1, 2, 3, … × 1.2 µs; 128 with the
      overflow bucket), which every coordinator's histogram holds at time 0 (e.g. the difference of a
      node's raw `CoordinatorReadLatency` bucket counts over the minute before). None: the histograms start
      empty, as a table just opened.
    """

    policy: str = "fifo"
    params: Mapping[str, float] = field(default_factory=dict)
    replica: str | None = None
    replica_params: Mapping[str, float] = field(default_factory=dict)
    sizes: npt.NDArray[np.float64] | None = field(default=None, repr=False)
    thr_l_bytes: float | None = None
    bloom_fp: float = 0.0001
    servers: ServerModel | None = None
    writes: npt.NDArray[np.bool_] | None = field(default=None, repr=False)
    closed: ClosedLoop | None = None
    warmup: float = 0.1
    record_ops: bool = False
    size_aware_cost: bool = False
    seed: int = 0
    demand: DemandInfo | None = None
    stop: tuple[float, float] | None = None
    latency_history: tuple[int, ...] | None = None

    @property
    def extended(self) -> bool:
        """The result reports the replica-selection figures (see the class documentation)."""
        return (
            self.replica is not None
            or self.sizes is not None
            or self.servers is not None
            or self.writes is not None
            or self.closed is not None
            or self.demand is not None
        )


@dataclass(frozen=True)
class BloomInfo:
    """The large-key filter actually built: keys above thr_l_bytes, bits, hashes, measured false positives."""

    thr_l_bytes: float
    large_keys: int
    bits: int
    hashes: int
    fp_target: float
    fp_measured: float

    def to_json(self) -> BloomJson:
        return {
            "thr_l_bytes": self.thr_l_bytes,
            "large_keys": self.large_keys,
            "bits": self.bits,
            "hashes": self.hashes,
            "fp_target": self.fp_target,
            "fp_measured": self.fp_measured,
        }


def class_summary(latency_ms: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_], warmup: float) -> ClassSummary:
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


def _json(d: Mapping[str, object]) -> dict[str, JsonValue]:
    """A TypedDict of JSON values as a JSON object (a copy)."""
    return cast(dict[str, JsonValue], dict(d))


@dataclass(frozen=True)
class Result:
    """One replay: latency percentiles in ms after the warm-up cut, counts, load and speed figures; with a
    replica selector or the model extensions (`ReplayConfig.extended`) also what replica selection did.

    The replica-selection fields are None on a plain replay: `replica` (the selector), `replica_params` (its
    parameters in use), `held` (opsets held at the clients), `copies` (duplicate / speculative copies),
    `classes` (latency per size class: requests touching a large value or not), `bloom` (the large-key filter
    built), `demand` (as given in the config), `servers` (speeds / slowdowns used), `writes`, `closed`
    (closed-loop throughput), `arrival_ms` (closed loop: when each request was issued). `policy_label`: the name
    to report instead of `policy` (a selector shorthand such as `--policy c3`; the report then names the queue
    policy `queue_policy` and the selector's parameters `params`).
    """

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
    records: OpRecords | None = field(default=None, repr=False)
    replica: str | None = None
    replica_params: dict[str, float] | None = None
    held: HeldInfo | None = None
    copies: CopiesInfo | None = None
    classes: dict[str, ClassSummary] | None = None
    bloom: BloomInfo | None = None
    demand: DemandInfo | None = None
    servers: ServersInfo | None = None
    writes: WritesInfo | None = None
    timeouts: TimeoutsInfo | None = None
    closed: ClosedInfo | None = None
    arrival_ms: npt.NDArray[np.float64] | None = field(default=None, repr=False)
    policy_label: str | None = None
    #: `ReplayConfig.stop` ended the replay: the quantile is above the bound; the percentiles and `measured` are
    #: those of the measured requests completed by then, `latency_ms` is 0 for the others
    stopped: bool = False

    def to_json(self) -> dict[str, JsonValue]:
        """The `simulate --json` object.

        Core keys (every replay): policy, params, p50_ms, p95_ms, p99_ms, p999_ms, mean_ms, requests, ops,
        events, utilization, server_load_max, steady_state, sim_wall_s, events_per_s, measured_requests,
        half_ratio, bytes_per_op. With replica selection (`replica` set) also: queue_policy (with a
        `policy_label`), replica, replica_params, held, copies (when any was sent), demand (when given), bloom
        (with sizes), classes (with sizes that differ), servers, writes (when any op is a write), timeouts (when
        read timeouts are modelled: Cassandra's coordinator), client_model ("open" / "closed") and closed (closed
        loop).
        """
        out: dict[str, JsonValue] = {
            "policy": self.policy,
            "params": _json(self.params),
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
        if self.stopped:
            out["stopped"] = True
        if self.replica is None:
            return out
        rparams = _json(self.replica_params or {})
        if self.policy_label is not None:
            out["policy"] = self.policy_label
            out["queue_policy"] = self.policy
            out["params"] = dict(rparams)
        out["replica"] = self.replica
        out["replica_params"] = rparams
        out["held"] = _json(self.held or {})
        if self.copies is not None and self.copies["ops"]:
            out["copies"] = _json(self.copies)
        if self.demand:
            out["demand"] = _json(self.demand)
        if self.bloom is not None:
            out["bloom"] = _json(self.bloom.to_json())
        if self.classes is not None:
            out["classes"] = {k: _json(v) for k, v in self.classes.items()}
        if self.servers is not None:
            out["servers"] = _json(self.servers)
        if self.writes is not None:
            out["writes"] = _json(self.writes)
        if self.timeouts is not None:
            out["timeouts"] = _json(self.timeouts)
        out["client_model"] = "open" if self.closed is None else "closed"
        if self.closed is not None:
            out["closed"] = _json(self.closed)
        return out

    def records_table(self) -> pa.Table:
        """Per-op records as a pyarrow Table (requires record_ops=True)."""
        import pyarrow as pa

        if self.records is None:
            raise KvsimError("no per-op records: replay with record_ops=True")
        return pa.table({k: pa.array(v) for k, v in self.records.items()})


@dataclass(frozen=True)
class _NativeConfig:
    """What the binding's `replay` reads (see `_kvsim.NativeConfig`)."""

    policy: str
    params: list[tuple[str, float]]
    replica: str
    replica_params: list[tuple[str, float]]
    large_est: npt.NDArray[np.uint8] | None
    large_true: npt.NDArray[np.uint8] | None
    server_speeds: npt.NDArray[np.float64] | None
    slowdown: tuple[int, float, float, int] | None
    stalls: tuple[float, int] | None
    stall_schedule: list[tuple[int, int, int]] | None
    writes: npt.NDArray[np.uint8] | None
    closed: tuple[int, int, str] | None
    warmup: float
    record_ops: bool
    size_aware_cost: bool
    seed: int
    stop: tuple[float, int] | None
    latency_history: list[int] | None


def _ns(ms: float) -> int:
    """A bound in ms as whole ns, rounded down: latencies are whole ns, and one above ⌊bound⌋ ns is above the
    bound."""
    if not ms >= 0.0 or ms == float("inf"):
        raise ParameterError(f"parameter 'stop' needs a finite bound >= 0 ms, got {ms}")
    return int(ms * 1e6)


def _counts(history: tuple[int, ...]) -> list[int]:
    """`latency_history` as the binding takes it: whole counts >= 0 (the core checks the length)."""
    out = [int(n) for n in history]
    if any(n < 0 or n != v for n, v in zip(out, history, strict=True)):
        raise ParameterError("parameter 'latency_history' takes whole counts >= 0")
    return out


def _pairs(m: Mapping[str, float]) -> list[tuple[str, float]]:
    return [(str(k), float(v)) for k, v in m.items()]


def _records(raw: RawResult) -> OpRecords | None:
    rec = raw.get("records")
    if rec is None:
        return None

    def u32(b: bytes) -> npt.NDArray[np.uint32]:
        return np.frombuffer(b, dtype=np.uint32)

    def u64(b: bytes) -> npt.NDArray[np.uint64]:
        return np.frombuffer(b, dtype=np.uint64)

    return {
        "request": u32(rec["request"]),
        "opset": u32(rec["opset"]),
        "server": u32(rec["server"]),
        "slot": u32(rec["slot"]),
        "enqueue_ns": u64(rec["enqueue_ns"]),
        "start_ns": u64(rec["start_ns"]),
        "end_ns": u64(rec["end_ns"]),
        "demand_ns": u64(rec["demand_ns"]),
    }


def replay(workload: Workload, config: ReplayConfig | None = None) -> Result:
    """Replays `workload` as `config` says (default: `ReplayConfig()`), GIL released.

    Deterministic: the same workload and config give the same result (except the wall-time figures). Bad names
    or values raise ParameterError, inconsistent inputs WorkloadError (both KvsimError, a ValueError).
    """
    cfg = ReplayConfig() if config is None else config
    tok = workload.tokens
    replica = "round-robin" if cfg.replica is None else cfg.replica
    rparams = {str(k): float(v) for k, v in cfg.replica_params.items()}
    thr = cfg.thr_l_bytes
    if replica == "heron" and rparams.get("thr_l_bytes", 0.0) > 0.0:
        thr = rparams["thr_l_bytes"]
    large_est = large_true = None
    bloom = None
    sz: npt.NDArray[np.float64] | None = None
    if cfg.sizes is not None:
        sz = np.ascontiguousarray(cfg.sizes, dtype=np.float64)
        if sz.shape != tok.shape:
            raise ParameterError(f"parameter 'sizes' has {sz.size} values for {tok.size} ops")
        if thr is None:
            raise ParameterError("parameter 'thr_l_bytes' is needed with sizes (no default given)")
        truth = sz > thr
        raw_est, fp, bits, hashes = _kvsim.large_filter(
            tok, sz, tok, float(thr), fp=cfg.bloom_fp, parts=workload.cluster.servers
        )
        large_est = np.ascontiguousarray(np.frombuffer(raw_est, dtype=np.uint8))
        large_true = np.ascontiguousarray(truth.astype(np.uint8))
        bloom = BloomInfo(
            thr_l_bytes=float(thr),
            large_keys=int(np.unique(tok[truth]).size),
            bits=int(bits),
            hashes=int(hashes),
            fp_target=cfg.bloom_fp,
            fp_measured=float(fp),
        )
        if replica == "heron":
            rparams["thr_l_bytes"] = float(thr)
    servers = None if cfg.servers is None or cfg.servers.is_default() else cfg.servers
    wflags: npt.NDArray[np.uint8] | None = None
    if cfg.writes is not None:
        wflags = np.ascontiguousarray(np.asarray(cfg.writes, dtype=np.bool_).astype(np.uint8))
        if wflags.shape != tok.shape:
            raise ParameterError(f"parameter 'writes' has {wflags.size} flags for {tok.size} ops")
    any_write = wflags is not None and bool(wflags.any())
    native = _NativeConfig(
        policy=cfg.policy,
        params=_pairs(cfg.params),
        replica=replica,
        replica_params=list(rparams.items()),
        large_est=large_est,
        large_true=large_true,
        server_speeds=None if servers is None else servers.speeds_array(),
        slowdown=None if servers is None or servers.slowdown is None else servers.slowdown.native(),
        stalls=None if servers is None else servers.stalls_native(),
        stall_schedule=None if servers is None else servers.stall_schedule_native(),
        writes=wflags if any_write else None,
        closed=None if cfg.closed is None else cfg.closed.native(),
        warmup=cfg.warmup,
        record_ops=cfg.record_ops,
        size_aware_cost=cfg.size_aware_cost,
        seed=cfg.seed,
        stop=None if cfg.stop is None else (float(cfg.stop[0]), _ns(cfg.stop[1])),
        latency_history=None if cfg.latency_history is None else _counts(cfg.latency_history),
    )
    raw = _kvsim.replay(workload._raw, native)
    wall = float(raw["sim_wall_s"])
    latency_ms = np.frombuffer(raw["latency_ns"], dtype=np.uint64).astype(np.float64) / 1e6
    res = Result(
        policy=str(raw["policy"]),
        params={str(k): float(v) for k, v in raw["params"]},
        p50_ms=float(raw["p50_ms"]),
        p95_ms=float(raw["p95_ms"]),
        p99_ms=float(raw["p99_ms"]),
        p999_ms=float(raw["p999_ms"]),
        mean_ms=float(raw["mean_ms"]),
        requests=int(raw["requests"]),
        ops=int(raw["ops"]),
        events=int(raw["events"]),
        utilization=float(raw["utilization"]),
        server_load_max=float(raw["server_load_max"]),
        steady_state=bool(raw["steady_state"]),
        sim_wall_s=wall,
        events_per_s=float(raw["events"]) / wall if wall > 0 else 0.0,
        measured=int(raw["measured"]),
        half_ratio=float(raw["half_ratio"]),
        bytes_per_op=float(raw["bytes_per_op"]),
        server_load=np.frombuffer(raw["server_load"], dtype=np.float64),
        latency_ms=latency_ms,
        records=_records(raw),
        stopped=bool(raw["stopped"]),
    )
    if not cfg.extended:
        return res
    classes = None
    if sz is not None and large_true is not None and np.unique(sz).size > 1:
        per_req = np.add.reduceat(large_true.astype(np.int64), workload.offsets[:-1]) > 0
        classes = {
            "small": class_summary(latency_ms, ~per_req, cfg.warmup),
            "large": class_summary(latency_ms, per_req, cfg.warmup),
        }
    closed: ClosedInfo | None = None
    arrival_ms = None
    if cfg.closed is not None:
        span_s = float(raw["makespan_ns"]) / 1e9
        closed = {
            "threads": cfg.closed.threads,
            "think_ms": cfg.closed.think_ms,
            "think_dist": cfg.closed.think_dist,
            "throughput_rps": res.requests / span_s if span_s > 0 else 0.0,
            "ops_per_s": res.ops / span_s if span_s > 0 else 0.0,
            "makespan_s": span_s,
        }
        arrival_ms = np.frombuffer(raw["arrival_ns"], dtype=np.uint64).astype(np.float64) / 1e6
    writes: WritesInfo | None = None
    if any_write:
        writes = {"ops": int(raw["writes"]["ops"]), "copies": int(raw["writes"]["copies"])}
    t = raw["timeouts"]
    timeouts: TimeoutsInfo | None = None
    if t["on"]:
        timeouts = {"requests": int(t["requests"]), "dropped_reads": int(t["dropped_reads"])}
    h = raw["held"]
    held: HeldInfo = {
        "opsets": int(h["opsets"]),
        "max": int(h["max"]),
        "mean_ms": float(h["mean_ms"]),
        "at_half": int(h["at_half"]),
        "at_end": int(h["at_end"]),
        "unstable": bool(h["unstable"]),
    }
    return dataclasses.replace(
        res,
        replica=str(raw["replica"]),
        replica_params={str(k): float(v) for k, v in raw["replica_params"]},
        held=held,
        copies={"ops": int(raw["copies"]["ops"]), "wins": int(raw["copies"]["wins"])},
        classes=classes,
        bloom=bloom,
        demand=None if cfg.demand is None else cast(DemandInfo, dict(cfg.demand)),
        servers=None if servers is None else servers.to_json(
            workload.cluster.servers, capacity_factor=float(raw["capacity_factor"])
        ),
        writes=writes,
        timeouts=timeouts,
        closed=closed,
        arrival_ms=arrival_ms,
    )
