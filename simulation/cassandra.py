"""Cassandra replays: a deployment (cluster, load, warm-up, demand model, server speeds, writes, client model),
a trace prepared once (`PreparedTrace`: request offsets, ring tokens, value sizes), the workload one seed
materializes, and the replay of one policy on it. `tailtune simulate`, the tuner's evaluator and the benchmarks
all replay through `replay`, so the same deployment, policy, parameters and seed give the same figures.

Memory: a prepared trace keeps per op only its ring token (and, when sizes vary, its size and mean demand); the
workload layout (opsets, clients) is built once per cluster and shared by every seed, which adds only its draws
(arrivals, demands); a prefix workload is a view of the whole one with its own arrivals. With a
`simulation.shared.WorkloadStore` (`share`, `load_shared`) the trace, the layout and each seed's draws
live in memory-mapped files that every process on the host reads instead of holding its own copy.

Value sizes: when the trace's known value sizes differ (`sizes_vary`) and `use_sizes` is on, every op's mean
service demand is t0 + size / bandwidth (unknown sizes → the median) for every policy, and ops above THR_L are
"large" for Héron and TailX; otherwise every op's mean demand is 1 / service_rate. Model choices:
docs/simulator.md, docs/simulator-replicas.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from base.errors import BadInputError
from base.memory import release_freed_memory
from simulation.layout import key_codes, key_tokens, request_layout, sizes_known, sizes_vary, value_sizes
from simulation.policies import ResolvedPolicy
from simulation.shared import WorkloadStore, release_pages

if TYPE_CHECKING:
    import kvsim
    import kvsim.types
    import pyarrow as pa

__all__ = [
    "CassandraDeployment", "PreparedTrace", "client_key", "client_rtt", "load_shared", "materialize",
    "offered_load", "prepare", "replay", "ring_size", "share",
]


def _cluster_default(name: str) -> Any:
    """`kvsim.Cluster`'s default of its field `name`: the simulator's, stated once (`kvsim.cluster_defaults()`)."""
    from kvsim.replay import Cluster

    return Cluster.__dataclass_fields__[name].default


@dataclass(frozen=True)
class CassandraDeployment:
    """The simulated cluster and how it is driven (everything but the trace, the policy and the seed).

    Defaults: the simulator's cluster (`kvsim.Cluster`'s, which are the core's: Rein's cluster), 75% load, 10%
    warm-up, Poisson arrivals, exponential demands, every server at speed 1, reads only, evenly spaced tokens.

    `ring`: the real ring (nodes' tokens, datacenters and racks, the keyspace's strategy, the local datacenter; the
    JSON shape of `kvsim.ring`): replicas are placed as Cassandra places them and read in the local datacenter,
    whose nodes are the servers — `servers` must be their number and `replication` the local datacenter's RF
    (`ring_size`); `vnodes` does not apply.

    `client_rtt_ms`: the client ↔ coordinator round trip as a measured distribution — quantiles, ms, at equally
    spaced probabilities from 0 to 1 (calibration stores p0..p100 of its trivial round trips): each request's
    latency is the engine's less the two constant client hops (2 × `net_latency_us`) plus one draw of it
    (`kvsim.Cluster.client_rtt_us`); None: the two constant hops.

    `client_key_us`: the client's and the coordinator's cost per partition of a request beyond the first, µs (the
    driver decoding its rows, the coordinator handling and merging it; calibration measures it, § Calibration of
    docs/model.md): each request's latency grows by (keys − 1) × it (`kvsim.Cluster.client_key_us`); 0: none. A
    one-key read is the baseline: its cost is in the service time.

    `request_demand_us`: the node's work a request costs once, beyond its partition reads (the coordinator's
    parsing, dispatch and response: calibration's `cpu_per_request`), µs of a slot's time, added to the mean
    service demand of the request's first partition read (docs/model.md § Capacity): a k-partition request then
    occupies the servers k / `service_rate` + it, where a per-key charge would be k × (1 / `service_rate` + it).
    0: none, every op's mean demand its own.
    """

    servers: int = _cluster_default("servers")
    slots: int = _cluster_default("slots")
    replication: int = _cluster_default("replication")
    vnodes: int = _cluster_default("vnodes")
    service_rate: float = _cluster_default("service_rate")
    net_latency_us: float = _cluster_default("net_latency_us")
    clients: int = _cluster_default("clients")
    #: Offered load, a fraction of the servers' capacity; None: the trace's own arrival times as they are (with
    #: `use_timestamps`), the load being what the trace offers (`offered_load`).
    load: float | None = 0.75
    warmup: float = 0.1
    use_timestamps: bool = False
    use_sizes: bool = True
    demand_dist: str = "exponential"
    demand_sigma: float = 1.0
    t0_us: float | None = None
    bandwidth_mbps: float | None = None
    thr_l_bytes: float | None = None
    server_speeds: tuple[float, ...] | None = None
    slow_servers: int | None = None
    slow_factor: float = 3.0
    slowdown_interval_ms: float | None = None
    slowdown_fraction: float = 0.2
    slowdown_factor: float = 3.0
    slowdown_duration_ms: float | None = None
    write_fraction: float | None = None
    writes_from_op: bool = False
    client_model: str = "open"
    threads: int = 64
    think_ms: float = 0.0
    think_dist: str = "exponential"
    #: Transient stop-the-world stalls (GC pauses): per second per server (None = none), and their length, ms.
    stall_rate: float | None = None
    stall_ms: float = 50.0
    #: Stalls on an explicit schedule instead of at random: (server index, start ms, end ms) each, on the replay's
    #: clock (0 = the first request's arrival with the trace's own timestamps); None = none. Not with `stall_rate`.
    stall_schedule: tuple[tuple[int, float, float], ...] | None = None
    #: The real ring (`kvsim.ring`'s JSON shape); None: evenly spaced tokens (or `vnodes` per server).
    ring: dict[str, Any] | None = None
    #: The client ↔ coordinator round trip's quantiles, ms, at equally spaced probabilities 0..1 (p0, ..., p100);
    #: None: two constant hops of `net_latency_us`.
    client_rtt_ms: tuple[float, ...] | None = None
    #: The client's and the coordinator's cost per partition of a request beyond the first, µs; 0: none.
    client_key_us: float = 0.0
    #: The node's work a request costs once beyond its partition reads, µs of a slot's time on the server of its
    #: first partition read; 0: none.
    request_demand_us: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """Every field (JSON-able): what a recommendation records about the deployment it was tuned for (the
        stall fields only when stalls are on, the ring only when there is one, so records made before they existed
        read the same; likewise the per-partition cost and the per-request demand only when there is one)."""
        out = dataclasses.asdict(self)
        if not self.client_key_us:
            del out["client_key_us"]
        if not self.request_demand_us:
            del out["request_demand_us"]
        if self.stall_rate is None:
            del out["stall_rate"], out["stall_ms"]
        if self.stall_schedule is None:
            del out["stall_schedule"]
        else:
            out["stall_schedule"] = [list(x) for x in self.stall_schedule]
        if self.ring is None:
            del out["ring"]
        if self.client_rtt_ms is None:
            del out["client_rtt_ms"]
        else:
            out["client_rtt_ms"] = list(self.client_rtt_ms)
        if self.server_speeds is not None:
            out["server_speeds"] = list(self.server_speeds)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CassandraDeployment:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise BadInputError.single("deployment", f"unknown option(s) {unknown}", field=unknown[0])
        kw = dict(d)
        if kw.get("server_speeds") is not None:
            kw["server_speeds"] = tuple(float(x) for x in kw["server_speeds"])
        if kw.get("client_rtt_ms") is not None:
            kw["client_rtt_ms"] = client_rtt(kw["client_rtt_ms"], "deployment")
        if kw.get("stall_schedule") is not None:
            try:
                kw["stall_schedule"] = tuple((int(x[0]), float(x[1]), float(x[2])) for x in kw["stall_schedule"])
            except (TypeError, ValueError, IndexError):
                raise BadInputError.single(
                    "deployment", "stall_schedule: a list of [server, start_ms, end_ms]", field="stall_schedule"
                ) from None
        return cls(**kw)

    def cli_args(self) -> list[str]:
        """`tailtune simulate` options that set every field differing from the defaults."""
        out: list[str] = []
        default = CassandraDeployment()
        for f in fields(self):
            v, d = getattr(self, f.name), getattr(default, f.name)
            if v == d:
                continue
            flag = "--" + f.name.replace("_", "-")
            if f.name == "load" and v is None:
                out.append("--trace-rate")
            elif isinstance(v, bool):
                out.append(flag if v else {"use_sizes": "--no-sizes"}.get(f.name, f"--no-{flag[2:]}"))
            elif f.name in ("server_speeds", "client_rtt_ms"):
                out += [flag, ",".join(repr(float(x)) for x in v)]
            elif f.name == "ring":  # the JSON itself (`--ring` takes a file or the JSON)
                out += [flag, json.dumps(v, separators=(",", ":"), sort_keys=True)]
            elif f.name == "stall_schedule":  # the CSV itself (`--stall-schedule` takes a file or the CSV)
                from simulation.stall_schedule import render

                out += [flag, render(v)]
            else:
                out += [flag, repr(v) if isinstance(v, float) else str(v)]
        return out

    def cluster(self) -> kvsim.Cluster:
        import kvsim

        ring = None
        if self.ring is not None:
            ring = _ring(self.ring)
            servers, rf = ring.servers, ring.local_replication
            if self.servers != servers:
                raise BadInputError.single(
                    "deployment", f"servers {self.servers}, but the ring has {servers} nodes in its local "
                    f"datacenter {ring.local_dc!r} (the servers a replay simulates): set servers to {servers}",
                    field="servers",
                )
            if self.replication != rf:
                raise BadInputError.single(
                    "deployment", f"replication {self.replication}, but the ring's keyspace has RF {rf} in its "
                    f"local datacenter {ring.local_dc!r}: set replication to {rf}", field="replication",
                )
        rtt = None if self.client_rtt_ms is None else client_rtt(self.client_rtt_ms, "deployment")
        key = client_key(self.client_key_us, "deployment", "client_key_us")
        try:
            return kvsim.Cluster(
                servers=self.servers,
                slots=self.slots,
                replication=self.replication,
                vnodes=self.vnodes,
                service_rate=self.service_rate,
                net_latency_us=self.net_latency_us,
                clients=self.clients,
                ring=ring,
                client_rtt_us=None if rtt is None else tuple(x * 1000.0 for x in rtt),
                client_key_us=key,
            )
        except (kvsim.ParameterError, OverflowError, TypeError) as exc:
            raise BadInputError.single("deployment", str(exc)) from None

    def server_model(self) -> kvsim.ServerModel | None:
        """Speeds and slowdowns (None = every server at speed 1, always available)."""
        import kvsim

        if self.server_speeds is not None and self.slow_servers is not None:
            raise BadInputError.single(
                "--slow-servers", "give either --server-speeds or --slow-servers, not both", field="slow_servers"
            )
        slowdown = None
        if self.slowdown_interval_ms is not None:
            slowdown = kvsim.Slowdown(
                interval_ms=self.slowdown_interval_ms,
                fraction=self.slowdown_fraction,
                factor=self.slowdown_factor,
                duration_ms=self.slowdown_duration_ms,
            )
        try:
            stalls = None if self.stall_rate is None else (float(self.stall_rate), float(self.stall_ms))
            if stalls is not None and not (stalls[0] >= 0.0 and stalls[1] >= 0.0):
                raise BadInputError.single(
                    "--stall-rate", f"stalls {self.stall_rate}/s of {self.stall_ms} ms: need ≥ 0", field="stall_rate"
                )
            if stalls is not None and self.stall_schedule is not None:
                raise BadInputError.single(
                    "--stall-schedule", "give either --stall-rate (random stalls) or --stall-schedule, not both",
                    field="stall_schedule",
                )
            schedule = self.stall_schedule
            if self.slow_servers is not None:
                m = kvsim.ServerModel.slow_servers(self.servers, self.slow_servers, self.slow_factor, slowdown)
                model = dataclasses.replace(m, stalls=stalls, stall_schedule=schedule)
            elif self.server_speeds is None and slowdown is None and stalls is None and schedule is None:
                return None
            else:
                model = kvsim.ServerModel(speeds=self.server_speeds, slowdown=slowdown, stalls=stalls,
                                          stall_schedule=schedule)
            model.capacity_factor(self.servers)  # validates
            return model
        except kvsim.KvsimError as exc:
            bad = re.fullmatch(r"parameter '([^']+)' = (.*) is out of range: valid (.*)", str(exc), re.DOTALL)
            if bad is not None and bad.group(1).startswith("stall_schedule"):
                raise BadInputError.single(
                    "deployment", f"{bad.group(2)}: need {bad.group(3)}", field=bad.group(1)
                ) from None
            raise BadInputError.single("deployment", str(exc)) from None

    def closed_loop(self) -> kvsim.ClosedLoop | None:
        import kvsim

        if self.client_model == "open":
            return None
        if self.client_model != "closed":
            raise BadInputError.single(
                "--client-model", f"{self.client_model!r} is not one of open, closed", field="client_model"
            )
        if self.threads < 1:
            raise BadInputError.single("--threads", f"{self.threads} threads: need ≥ 1", field="threads")
        if not (self.think_ms >= 0.0):
            raise BadInputError.single("--think-ms", f"{self.think_ms}: need ≥ 0 ms", field="think_ms")
        if self.think_dist not in kvsim.models.THINK_DISTS:
            raise BadInputError.single(
                "--think-dist",
                f"{self.think_dist!r} is not one of {', '.join(kvsim.models.THINK_DISTS)}",
                field="think_dist",
            )
        return kvsim.ClosedLoop(threads=self.threads, think_ms=self.think_ms, think_dist=self.think_dist)


def client_key(value: object, where: str, name: str) -> float:
    """A per-partition client cost (`CassandraDeployment.client_key_us`) checked: a number of µs in [0, 1e6];
    BadInputError naming `client_key_us` (`name` in the message, `where` as the place) otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value)
                                                                             and 0.0 <= value <= 1e6):
        raise BadInputError.single(where, f"{name} is {value!r}: need a number of µs in [0, 1e6]",
                                   field="client_key_us")
    return float(value)


def _request_demand(value: object) -> float:
    """A per-request demand (`CassandraDeployment.request_demand_us`) checked: a number of µs in [0, 1e6];
    BadInputError naming `request_demand_us` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value)
                                                                             and 0.0 <= value <= 1e6):
        raise BadInputError.single("deployment", f"request_demand_us is {value!r}: need a number of µs in [0, 1e6]",
                                   field="request_demand_us")
    return float(value)


def client_rtt(values: object, where: str) -> tuple[float, ...]:
    """Round-trip quantiles (`CassandraDeployment.client_rtt_ms`) checked: at least 2 numbers in [0, 1e6] ms,
    non-decreasing. BadInputError naming `client_rtt_ms` (in `where`) otherwise."""

    def bad(problem: str) -> BadInputError:
        return BadInputError.single(where, problem, field="client_rtt_ms")

    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise bad("a list of round-trip quantiles in ms (p0, ..., p100)")
    try:
        q = tuple(float(x) for x in values)
    except (TypeError, ValueError):
        raise bad("a list of round-trip quantiles in ms (p0, ..., p100)") from None
    if len(q) < 2:
        raise bad(f"{len(q)} value(s): need at least 2 quantiles (p0 and p100)")
    for i, x in enumerate(q):
        if not (math.isfinite(x) and 0.0 <= x <= 1e6):
            raise bad(f"value {i} is {x}: need a number of ms in [0, 1e6]")
    for i in range(1, len(q)):
        if q[i] < q[i - 1]:
            raise bad(f"value {i} ({q[i]:g}) is below value {i - 1} ({q[i - 1]:g}): quantiles do not decrease")
    return q


def _ring(doc: Mapping[str, Any], where: str = "deployment") -> kvsim.Ring:
    import re

    import kvsim

    try:
        return kvsim.Ring.from_dict(doc)
    except kvsim.RingError as exc:
        m = re.match(r"bad ring: '([^']+)': (.*)", str(exc), re.DOTALL)
        field_, problem = (m.group(1), m.group(2)) if m else ("ring", str(exc))
        raise BadInputError.single(where, f"bad ring: {problem}", field=field_) from None


def ring_size(doc: Mapping[str, Any], *, where: str = "deployment") -> tuple[int, int]:
    """(servers, replication) of a deployment on the ring `doc`: the nodes of its local datacenter and the RF
    there. BadInputError (naming the field, in `where`) when the ring is invalid."""
    ring = _ring(doc, where)
    return ring.servers, ring.local_replication


@dataclass
class PreparedTrace:
    """The seed-independent part of a workload: request offsets, arrival timestamps, ring tokens, per-op sizes and
    demands (the keys themselves are not kept: the tokens are what a replay reads)."""

    source: str
    #: requests + 1 offsets of each request's ops (requests ordered by first timestamp, then request id)
    offsets: npt.NDArray[np.int64]
    #: per request, the first row's `ts`; None without a ts column
    timestamps: npt.NDArray[np.float64] | None
    tokens: npt.NDArray[np.int64]
    #: per op (layout order), unknown sizes filled; None = sizes not used (absent, all equal, or use_sizes off)
    sizes: npt.NDArray[np.float64] | None
    mean_demand_s: npt.NDArray[np.float64] | None
    demand: dict[str, Any]
    default_thr_l: float | None
    #: the `op` column in layout order (lower-case strings), when the deployment takes writes from it
    ops: npt.NDArray[Any] | None = None
    #: where the layout and the seeds' draws are shared with the host's other processes (None: this process only)
    store: WorkloadStore | None = field(default=None, repr=False)
    _layouts: dict[kvsim.Cluster, kvsim.WorkloadLayout] = field(default_factory=dict, repr=False)
    _workloads: dict[tuple[int, int], kvsim.Workload] = field(default_factory=dict, repr=False)
    #: each seed's draws as mapped from the store (released from RSS after each replay of the seed)
    _draws: dict[int, dict[str, npt.NDArray[Any]]] = field(default_factory=dict, repr=False)

    @property
    def requests(self) -> int:
        return int(self.offsets.size - 1)

    def prefix(self, fraction: float) -> int:
        """Requests replayed for `fraction` in (0, 1]: ⌈fraction × requests⌉, at least 1."""
        n = self.requests
        return n if fraction >= 1.0 else max(1, math.ceil(fraction * n))


def prepare(table: pa.Table, deployment: CassandraDeployment, *, source: str = "trace") -> PreparedTrace:
    """Groups the table into requests, hashes the keys to ring tokens and derives the demand model (once).

    Memory: only the columns the deployment reads are kept, and each is let go once read, so a table the caller
    does not keep (`prepare(source.load(), ...)`) is freed column by column while the trace is built."""
    import kvsim

    table = table.select([c for c in _COLUMNS if c in table.column_names and _reads(c, deployment)])
    layout = request_layout(table, source=source, with_keys=False)
    if deployment.use_timestamps and layout.timestamps is None:
        raise BadInputError.single(source, "--use-timestamps needs a ts column", field="ts")
    table = table.drop_columns([c for c in ("request_id", "ts") if c in table.column_names])
    tokens = np.ascontiguousarray(layout.take(key_tokens(table)))
    service_rate = float(deployment.service_rate)
    sizes = mean_demand = None
    thr = None
    demand: dict[str, Any] = {"dist": deployment.demand_dist}
    if deployment.demand_dist == "lognormal":
        demand["sigma"] = deployment.demand_sigma
    # the sizes as floats (a per-op copy) only when they differ: `sizes_known` checks them in place
    vary = deployment.use_sizes and sizes_known(table, source) and sizes_vary(table)
    rows = value_sizes(table, source) if vary else None
    if rows is not None and np.isfinite(rows).any():
        model = kvsim.DemandModel.default(service_rate)
        if deployment.t0_us is not None or deployment.bandwidth_mbps is not None:
            try:
                model = kvsim.DemandModel(
                    t0_s=model.t0_s if deployment.t0_us is None else deployment.t0_us * 1e-6,
                    bandwidth_bps=model.bandwidth_bps
                    if deployment.bandwidth_mbps is None
                    else deployment.bandwidth_mbps * 1e6,
                )
            except kvsim.KvsimError as exc:
                raise BadInputError.single("deployment", str(exc)) from None
        keys = layout.take(key_codes(table))
        info = kvsim.fill_unknown_sizes(layout.take(rows), keys)
        del keys
        sizes = np.ascontiguousarray(info.sizes, dtype=np.float64)
        mean_demand = model.mean_s(sizes)
        thr = float(kvsim.default_thr_l(model, float(info.median_bytes)))
        demand.update(
            model="size",
            t0_us=model.t0_s * 1e6,
            bandwidth_bps=model.bandwidth_bps,
            median_bytes=info.median_bytes,
            unknown_sizes=info.unknown,
        )
    else:
        demand.update(model="uniform", mean_us=1e6 / service_rate)
    del rows
    request_us = _request_demand(deployment.request_demand_us)
    if request_us > 0:  # the request's own work on the server of its first partition read (class doc)
        if mean_demand is None:
            mean_demand = np.full(int(layout.offsets[-1]), 1.0 / service_rate)
        mean_demand = np.ascontiguousarray(mean_demand, dtype=np.float64)
        mean_demand[layout.offsets[:-1]] += request_us * 1e-6
        demand["request_us"] = request_us
    table = table.drop_columns([c for c in ("key", "value_size") if c in table.column_names])
    ops = None
    if deployment.writes_from_op:
        if deployment.write_fraction is not None:
            raise BadInputError.single(
                "--write-fraction", "give either --write-fraction or --writes-from-op, not both", field="write_fraction"
            )
        if "op" not in table.column_names:
            raise BadInputError.single(source, "--writes-from-op needs an op column", line=1, field="op")
        raw = layout.take(np.asarray(table.column("op").to_numpy(zero_copy_only=False), dtype=object))
        ops = np.where(raw == None, "", raw).astype(str)  # noqa: E711 (element-wise None test)
    del table
    release_freed_memory()  # the table's pages: the allocators would keep them in this process's RSS
    return PreparedTrace(
        source=source,
        offsets=layout.offsets,
        timestamps=layout.timestamps,
        tokens=tokens,
        sizes=sizes,
        mean_demand_s=mean_demand,
        demand=demand,
        default_thr_l=thr,
        ops=ops,
    )


#: The table's columns `prepare` reads (`op` only with `writes_from_op`, `value_size` only with `use_sizes`).
_COLUMNS = ("request_id", "ts", "key", "value_size", "op")


def _reads(column: str, deployment: CassandraDeployment) -> bool:
    if column == "op":
        return deployment.writes_from_op
    if column == "value_size":
        return deployment.use_sizes
    return True


_TRACE_ARRAYS = ("offsets", "timestamps", "tokens", "sizes", "mean_demand_s", "ops")


def share(trace: PreparedTrace, store: WorkloadStore) -> PreparedTrace:
    """`trace` with its arrays in `store` (written unless there already), read back memory-mapped."""
    arrays = {k: v for k in _TRACE_ARRAYS if (v := getattr(trace, k)) is not None}
    if trace.ops is not None:
        arrays["ops"] = np.asarray(trace.ops, dtype=str)
    store.save("trace", arrays, {"source": trace.source, "demand": trace.demand,
                                 "default_thr_l": trace.default_thr_l})
    shared = load_shared(store)
    if shared is None:
        raise OSError(f"workload store {store.directory}: the trace could not be read back")
    return shared


def load_shared(store: WorkloadStore) -> PreparedTrace | None:
    """The prepared trace in `store` (arrays memory-mapped), or None when the store has none."""
    meta, arrays = store.meta("trace"), store.arrays("trace")
    if meta is None or arrays is None:
        return None
    return PreparedTrace(
        source=str(meta["source"]),
        offsets=arrays["offsets"],
        timestamps=arrays.get("timestamps"),
        tokens=arrays["tokens"],
        sizes=arrays.get("sizes"),
        mean_demand_s=arrays.get("mean_demand_s"),
        demand=dict(meta["demand"]),
        default_thr_l=meta["default_thr_l"],
        ops=arrays.get("ops"),
        store=store,
    )


def _layout(trace: PreparedTrace, cluster: kvsim.Cluster) -> kvsim.WorkloadLayout:
    """The workload layout of `trace` on `cluster` (built once; in the store when the trace has one)."""
    import kvsim

    cached = trace._layouts.get(cluster)
    if cached is not None:
        return cached
    group = _group("layout", cluster)
    arrays = trace.store.arrays(group) if trace.store is not None else None
    if arrays is None:
        built = kvsim.WorkloadLayout(cluster, trace.offsets, tokens=trace.tokens, mean_demand_s=trace.mean_demand_s)
        if trace.store is None:
            trace._layouts[cluster] = built
            return built
        arrays = trace.store.save(group, built.arrays())
        del built
        release_freed_memory()  # the build's private copy: glibc's heap would keep it in this process's RSS
    layout = kvsim.WorkloadLayout.from_arrays(cluster, trace.offsets, trace.tokens, arrays)
    trace._layouts[cluster] = layout
    return layout


def _group(kind: str, cluster: kvsim.Cluster, *extra: object) -> str:
    """A store group's name: the kind, a digest of the cluster (and of `extra`)."""
    from simulation.shared import store_key

    c: dict[str, Any] = {f: getattr(cluster, f) for f in ("servers", "slots", "replication", "vnodes",
                                                          "service_rate", "net_latency_us", "clients")}
    if cluster.ring is not None:
        c["ring"] = cluster.ring.as_dict()
    return f"{kind}-{store_key({'cluster': c, 'extra': [str(e) for e in extra]})}"


def materialize(
    trace: PreparedTrace, deployment: CassandraDeployment, seed: int, *, fraction: float = 1.0
) -> kvsim.Workload:
    """The workload of `seed` (arrivals, demands) over the first `fraction` of the requests; cached per trace
    (the whole workload once per seed, a prefix as a view of it with its own arrivals)."""
    import kvsim

    n = trace.prefix(fraction)
    cached = trace._workloads.get((seed, n))
    if cached is not None:
        return cached
    smodel = deployment.server_model()
    ts = trace.timestamps if deployment.use_timestamps else None
    # Offered load is relative to the servers' time-averaged capacity (speeds, slowdowns and stalls included; a
    # stall schedule's stalled fraction over its own span, 0 to its last end: the span of arrivals a load sets is
    # not known before the load is).
    if deployment.load is None and ts is None:
        raise BadInputError.single(
            "deployment", "a replay at the trace's own rate (no load) needs use_timestamps and a ts column",
            field="load",
        )
    load = (None if deployment.load is None
            else deployment.load * (1.0 if smodel is None else smodel.capacity_factor(deployment.servers)))
    try:
        full = trace._workloads.get((seed, trace.requests))
        if full is None:
            full = _draw(trace, deployment, int(seed), load, ts)
            trace._workloads[(seed, trace.requests)] = full
        wl = full if n == trace.requests else full.prefix(n, mean_demand_s=trace.mean_demand_s, timestamps=ts)
    except kvsim.ParameterError as exc:
        raise BadInputError.single("deployment", str(exc)) from None
    except kvsim.WorkloadError as exc:
        raise BadInputError.single(trace.source, str(exc)) from None
    trace._workloads[(seed, n)] = wl
    return wl


def offered_load(trace: PreparedTrace, deployment: CassandraDeployment) -> float | None:
    """The load the trace's own arrival times offer the deployment: its request rate × the mean demand of a
    request (its ops' mean demands summed) over the servers' capacity (servers × slots, speeds and slowdowns
    included) — the same measure `load` sets (docs/simulator.md § Workload). None without timestamps, or when
    they span no time."""
    ts = trace.timestamps
    n = trace.requests
    if ts is None or n < 2 or not ts[-1] > ts[0]:
        return None
    rate = (n - 1) / float(ts[-1] - ts[0])
    ops = int(trace.offsets[-1])
    per_op = (float(np.mean(trace.mean_demand_s)) if trace.mean_demand_s is not None and trace.mean_demand_s.size
              else 1.0 / float(deployment.service_rate))
    smodel = deployment.server_model()
    # A stall schedule's stalled fraction over the trace's span (its times start at 0 on the replay's clock).
    span_ms = (0.0, float(ts[-1] - ts[0]) * 1e3)
    capacity = deployment.servers * deployment.slots * (1.0 if smodel is None
                                                        else smodel.capacity_factor(deployment.servers, span_ms))
    return rate * (ops / n) * per_op / capacity


def _draw(
    trace: PreparedTrace,
    deployment: CassandraDeployment,
    seed: int,
    load: float | None,
    ts: npt.NDArray[np.float64] | None,
) -> kvsim.Workload:
    """The whole workload of `seed`: its draws over the trace's layout (from the store when it has them)."""
    import kvsim

    cluster = deployment.cluster()
    layout = _layout(trace, cluster)
    group = _group(f"seed-{seed}", cluster, load, deployment.use_timestamps, deployment.demand_dist,
                   deployment.demand_sigma)
    arrays = trace.store.arrays(group) if trace.store is not None else None
    if arrays is None:
        wl = kvsim.Workload.draw(
            layout,
            mean_demand_s=trace.mean_demand_s,
            timestamps=ts,
            load=load,
            seed=seed,
            demand_dist=deployment.demand_dist,
            demand_sigma=deployment.demand_sigma,
        )
        if trace.store is None:
            return wl
        arrays = trace.store.save(group, wl.draws())
        del wl
        release_freed_memory()
    trace._draws[seed] = arrays
    return kvsim.Workload.from_arrays(layout, arrays["arrival_ns"], arrays["demand_ns"], seed=seed, load=load)


def _writes(
    trace: PreparedTrace, deployment: CassandraDeployment, n_ops: int, seed: int
) -> tuple[npt.NDArray[np.bool_] | None, dict[str, Any]]:
    import kvsim

    if trace.ops is not None:
        return kvsim.write_flags(n_ops, ops=trace.ops[:n_ops]), {"source": "op column"}
    if deployment.write_fraction is None:
        return None, {}
    if not (0.0 <= deployment.write_fraction <= 1.0):
        raise BadInputError.single(
            "--write-fraction", f"{deployment.write_fraction}: need a fraction in [0, 1]", field="write_fraction"
        )
    flags = kvsim.write_flags(n_ops, write_fraction=deployment.write_fraction, seed=seed)
    return flags, {"source": "write_fraction", "fraction": deployment.write_fraction}


def replay(
    trace: PreparedTrace,
    deployment: CassandraDeployment,
    policy: ResolvedPolicy,
    seed: int,
    *,
    fraction: float = 1.0,
    record_ops: bool = False,
    classes: bool = True,
    where: str = "simulate",
    stop: tuple[float, float] | None = None,
) -> kvsim.Result:
    """Replays the workload of `seed` under `policy`. `classes`: report per-class percentiles (small / large
    requests) when sizes vary; off, the large-value flags are built only for the policies that read them.
    `stop`: (quantile, bound ms): stop as soon as that quantile is certainly above the bound
    (`kvsim.ReplayConfig.stop`)."""
    import kvsim

    if policy.size_aware_cost and trace.sizes is None:
        raise BadInputError.single(
            "--size-aware-cost",
            "needs value sizes that differ: the trace has none (or --no-sizes was given); drop it",
            field="size_aware_cost",
        )
    wl = materialize(trace, deployment, seed, fraction=fraction)
    n_ops = int(wl.tokens.size)
    smodel = deployment.server_model()
    closed = deployment.closed_loop()
    writes, writes_info = _writes(trace, deployment, n_ops, seed)
    thr = deployment.thr_l_bytes if deployment.thr_l_bytes is not None else policy.thr_l_bytes
    if thr is None:
        thr = trace.default_thr_l
    qparams = dict(policy.queue_params)
    if policy.queue == "tailx" and thr is not None:
        qparams["thr_l_bytes"] = float(thr)
    use_sizes = trace.sizes is not None and (classes or policy.uses_large_flags)
    config = kvsim.ReplayConfig(
        policy=policy.queue,
        params=qparams,
        replica=policy.replica,
        replica_params=policy.replica_params,
        sizes=trace.sizes[:n_ops] if use_sizes and trace.sizes is not None else None,
        thr_l_bytes=thr if use_sizes else None,
        servers=smodel,
        writes=writes if writes is not None and writes.any() else None,
        closed=closed,
        warmup=deployment.warmup,
        record_ops=record_ops,
        size_aware_cost=policy.size_aware_cost,
        seed=int(seed),
        demand=cast("kvsim.types.DemandInfo", trace.demand),
        stop=stop,
    )
    try:
        res = kvsim.replay(wl, config)
    except kvsim.WorkloadError as exc:
        raise BadInputError.single(trace.source, str(exc)) from None
    except kvsim.KvsimError as exc:
        raise BadInputError.single(where, str(exc), field=_named_param(str(exc))) from None
    finally:
        # the seed's draws leave this process's RSS until its next replay (one seed resident at a time)
        release_pages(trace._draws.get(int(seed), {}).values())
    if writes is not None:
        counts = res.writes or {"ops": 0, "copies": 0}
        res = dataclasses.replace(res, writes=cast("kvsim.types.WritesInfo", {**writes_info, **counts}))
    if policy.policy != policy.queue:
        res = dataclasses.replace(res, policy_label=policy.policy)
    return res


def _named_param(message: str) -> str | None:
    import re

    m = re.search(r"parameter '([^']+)'", message)
    return m.group(1) if m else None
