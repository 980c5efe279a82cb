"""Cassandra replays: a deployment (cluster, load, warm-up, demand model, server speeds, writes, client model),
a trace prepared once (`PreparedTrace`: request layout, ring tokens, value sizes), the workload one seed
materializes, and the replay of one policy on it. `tailtune simulate`, the tuner's evaluator and the benchmarks
all replay through `replay`, so the same deployment, policy, parameters and seed give the same figures.

Value sizes: when the trace's known value sizes differ (`sizes_vary`) and `use_sizes` is on, every op's mean
service demand is t0 + size / bandwidth (unknown sizes → the median) for every policy, and ops above THR_L are
"large" for Héron and TailX; otherwise every op's mean demand is 1 / service_rate. Model choices:
docs/simulator.md, docs/simulator-replicas.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from tailtune.base.errors import BadInputError
from tailtune.simulation.layout import RequestLayout, request_layout, sizes_vary, value_sizes
from tailtune.simulation.policies import ResolvedPolicy

if TYPE_CHECKING:
    import kvsim
    import kvsim.types
    import pyarrow as pa

__all__ = ["CassandraDeployment", "PreparedTrace", "materialize", "prepare", "replay"]


@dataclass(frozen=True)
class CassandraDeployment:
    """The simulated cluster and how it is driven (everything but the trace, the policy and the seed).

    Defaults: Rein's 128 servers × 8 slots, RF 3, 3750 ops/s per slot, 50 µs one-way network, 75% load, 10%
    warm-up, Poisson arrivals, exponential demands, every server at speed 1, reads only.
    """

    servers: int = 128
    slots: int = 8
    replication: int = 3
    vnodes: int = 1
    service_rate: float = 3750.0
    net_latency_us: float = 50.0
    clients: int = 128
    load: float = 0.75
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

    def as_dict(self) -> dict[str, Any]:
        """Every field (JSON-able): what a recommendation records about the deployment it was tuned for (the
        stall fields only when stalls are on, so records made before they existed read the same)."""
        out = dataclasses.asdict(self)
        if self.stall_rate is None:
            del out["stall_rate"], out["stall_ms"]
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
            if isinstance(v, bool):
                out.append(flag if v else {"use_sizes": "--no-sizes"}.get(f.name, f"--no-{flag[2:]}"))
            elif f.name == "server_speeds":
                out += [flag, ",".join(repr(float(x)) for x in v)]
            else:
                out += [flag, repr(v) if isinstance(v, float) else str(v)]
        return out

    def cluster(self) -> kvsim.Cluster:
        import kvsim

        try:
            return kvsim.Cluster(
                servers=self.servers,
                slots=self.slots,
                replication=self.replication,
                vnodes=self.vnodes,
                service_rate=self.service_rate,
                net_latency_us=self.net_latency_us,
                clients=self.clients,
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
            if self.slow_servers is not None:
                m = kvsim.ServerModel.slow_servers(self.servers, self.slow_servers, self.slow_factor, slowdown)
                return m if stalls is None else dataclasses.replace(m, stalls=stalls)
            if self.server_speeds is None and slowdown is None and stalls is None:
                return None
            model = kvsim.ServerModel(speeds=self.server_speeds, slowdown=slowdown, stalls=stalls)
            model.capacity_factor(self.servers)  # validates
            return model
        except kvsim.KvsimError as exc:
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


@dataclass
class PreparedTrace:
    """The seed-independent part of a workload: request layout, ring tokens, per-op sizes and demands."""

    source: str
    layout: RequestLayout
    tokens: npt.NDArray[np.int64]
    #: per op (layout order), unknown sizes filled; None = sizes not used (absent, all equal, or use_sizes off)
    sizes: npt.NDArray[np.float64] | None
    mean_demand_s: npt.NDArray[np.float64] | None
    demand: dict[str, Any]
    default_thr_l: float | None
    #: the `op` column in layout order (lower-case strings), when the deployment takes writes from it
    ops: npt.NDArray[Any] | None = None
    _workloads: dict[tuple[int, int], kvsim.Workload] = field(default_factory=dict, repr=False)

    @property
    def requests(self) -> int:
        return self.layout.requests

    def prefix(self, fraction: float) -> int:
        """Requests replayed for `fraction` in (0, 1]: ⌈fraction × requests⌉, at least 1."""
        n = self.requests
        return n if fraction >= 1.0 else max(1, math.ceil(fraction * n))


def prepare(table: pa.Table, deployment: CassandraDeployment, *, source: str = "trace") -> PreparedTrace:
    """Groups the table into requests, hashes the keys to ring tokens and derives the demand model (once)."""
    import kvsim

    layout = request_layout(table, source=source)
    if deployment.use_timestamps and layout.timestamps is None:
        raise BadInputError.single(source, "--use-timestamps needs a ts column", field="ts")
    service_rate = float(deployment.service_rate)
    sizes = mean_demand = None
    thr = None
    demand: dict[str, Any] = {"dist": deployment.demand_dist}
    if deployment.demand_dist == "lognormal":
        demand["sigma"] = deployment.demand_sigma
    rows = value_sizes(table, source) if deployment.use_sizes else None
    if rows is not None and sizes_vary(table) and np.isfinite(rows).any():
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
        info = kvsim.fill_unknown_sizes(rows[layout.row_order], layout.keys)
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
    ops = None
    if deployment.writes_from_op:
        if deployment.write_fraction is not None:
            raise BadInputError.single(
                "--write-fraction", "give either --write-fraction or --writes-from-op, not both", field="write_fraction"
            )
        if "op" not in table.column_names:
            raise BadInputError.single(source, "--writes-from-op needs an op column", line=1, field="op")
        raw = np.asarray(table.column("op").to_numpy(zero_copy_only=False), dtype=object)[layout.row_order]
        ops = np.where(raw == None, "", raw).astype(str)  # noqa: E711 (element-wise None test)
    return PreparedTrace(
        source=source,
        layout=layout,
        tokens=kvsim.tokens_for_keys(layout.keys),
        sizes=sizes,
        mean_demand_s=mean_demand,
        demand=demand,
        default_thr_l=thr,
        ops=ops,
    )


def materialize(
    trace: PreparedTrace, deployment: CassandraDeployment, seed: int, *, fraction: float = 1.0
) -> kvsim.Workload:
    """The workload of `seed` (arrivals, demands) over the first `fraction` of the requests; cached per trace."""
    import kvsim

    n = trace.prefix(fraction)
    cached = trace._workloads.get((seed, n))
    if cached is not None:
        return cached
    offsets = trace.layout.offsets[: n + 1]
    n_ops = int(offsets[-1])
    smodel = deployment.server_model()
    ts = trace.layout.timestamps if deployment.use_timestamps else None
    try:
        wl = kvsim.Workload(
            deployment.cluster(),
            offsets,
            tokens=trace.tokens[:n_ops],
            mean_demand_s=trace.mean_demand_s[:n_ops] if trace.mean_demand_s is not None else None,
            timestamps=ts[:n] if ts is not None else None,
            # Offered load is relative to the servers' time-averaged capacity (speeds and slowdowns included).
            load=deployment.load * (1.0 if smodel is None else smodel.capacity_factor(deployment.servers)),
            seed=int(seed),
            demand_dist=deployment.demand_dist,
            demand_sigma=deployment.demand_sigma,
        )
    except kvsim.ParameterError as exc:
        raise BadInputError.single("deployment", str(exc)) from None
    except kvsim.WorkloadError as exc:
        raise BadInputError.single(trace.source, str(exc)) from None
    trace._workloads[(seed, n)] = wl
    return wl


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
) -> kvsim.Result:
    """Replays the workload of `seed` under `policy`. `classes`: report per-class percentiles (small / large
    requests) when sizes vary; off, the large-value flags are built only for the policies that read them."""
    import kvsim

    if policy.size_aware_cost and trace.mean_demand_s is None:
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
    )
    try:
        res = kvsim.replay(wl, config)
    except kvsim.WorkloadError as exc:
        raise BadInputError.single(trace.source, str(exc)) from None
    except kvsim.KvsimError as exc:
        raise BadInputError.single(where, str(exc), field=_named_param(str(exc))) from None
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
