"""Glue for issue 4's replay: value sizes → per-op mean demand (t0 + size / bandwidth, unknown sizes → the
dataset's median), replica selection (`--replica`, and the `--policy c3|ds|heron` shorthands = fifo queues
with that selector), THR_L and the large-key filter, per-class results. Model choices: docs/simulator-replicas.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tailtune.base.errors import BadInputError

if TYPE_CHECKING:
    import kvsim
    import pyarrow as pa

    from tailtune.simulation.cassandra import SimulationSpec

__all__ = [
    "REPLICA_SHORTHANDS",
    "SIZED_POLICIES",
    "ReplicaSpec",
    "needs_sized_replay",
    "resolve_policy",
    "run_sized_simulation",
]

# `--policy NAME` that mean fifo server queues with replica selection NAME.
REPLICA_SHORTHANDS = ("c3", "ds", "heron")
# Queue policies that use the large-key filter and replica selection, with their default selector (TailX §3.1:
# dynamic snitching).
SIZED_POLICIES = {"tailx": "ds"}


@dataclass(frozen=True)
class ReplicaSpec:
    """Issue 4's options of `tailtune simulate`."""

    replica: str | None = None
    replica_params: dict[str, float] = field(default_factory=dict)
    use_sizes: bool = True
    demand_dist: str = "exponential"
    demand_sigma: float = 1.0
    t0_us: float | None = None
    bandwidth_mbps: float | None = None
    thr_l_bytes: float | None = None
    # Server heterogeneity and variability.
    server_speeds: tuple[float, ...] | None = None
    slow_servers: int | None = None
    slow_factor: float = 3.0
    slowdown_interval_ms: float | None = None
    slowdown_fraction: float = 0.2
    slowdown_factor: float = 3.0
    slowdown_duration_ms: float | None = None
    # Read/write mix: Bernoulli per op, or the dataset's `op` column.
    write_fraction: float | None = None
    writes_from_op: bool = False
    # Client model: "open" (Poisson, the default) or "closed" (threads with think time).
    client_model: str = "open"
    threads: int = 64
    think_ms: float = 0.0
    think_dist: str = "exponential"
    # Rein / SBF / SDS / BRB / oracle: opset cost = Σ estimated op demand (sizes) instead of the op count.
    size_aware_cost: bool = False

    def extensions_on(self) -> bool:
        """Any of the server / write / client-model extensions is asked for."""
        return (
            self.server_speeds is not None
            or self.slow_servers is not None
            or self.slowdown_interval_ms is not None
            or self.write_fraction is not None
            or self.writes_from_op
            or self.client_model != "open"
        )


def server_model(rspec: ReplicaSpec, servers: int) -> kvsim.ServerModel | None:
    """The speed / slowdown model of the options (None = every server at speed 1)."""
    import kvsim

    if rspec.server_speeds is not None and rspec.slow_servers is not None:
        raise BadInputError.single(
            "--slow-servers", "give either --server-speeds or --slow-servers, not both", field="slow_servers"
        )
    slowdown = None
    if rspec.slowdown_interval_ms is not None:
        slowdown = kvsim.Slowdown(
            interval_ms=rspec.slowdown_interval_ms,
            fraction=rspec.slowdown_fraction,
            factor=rspec.slowdown_factor,
            duration_ms=rspec.slowdown_duration_ms,
        )
    try:
        if rspec.slow_servers is not None:
            return kvsim.ServerModel.slow_servers(servers, rspec.slow_servers, rspec.slow_factor, slowdown)
        if rspec.server_speeds is None and slowdown is None:
            return None
        model = kvsim.ServerModel(speeds=rspec.server_speeds, slowdown=slowdown)
        model.capacity_factor(servers)  # validates
        return model
    except kvsim.KvsimError as exc:
        raise BadInputError.single("simulate", str(exc)) from None


def closed_loop(rspec: ReplicaSpec) -> kvsim.ClosedLoop | None:
    import kvsim

    if rspec.client_model == "open":
        return None
    if rspec.client_model != "closed":
        raise BadInputError.single(
            "--client-model", f"{rspec.client_model!r} is not one of open, closed", field="client_model"
        )
    if rspec.threads < 1:
        raise BadInputError.single("--threads", f"{rspec.threads} threads: need ≥ 1", field="threads")
    if not (rspec.think_ms >= 0.0):
        raise BadInputError.single("--think-ms", f"{rspec.think_ms}: need ≥ 0 ms", field="think_ms")
    if rspec.think_dist not in kvsim.models.THINK_DISTS:
        raise BadInputError.single(
            "--think-dist", f"{rspec.think_dist!r} is not one of {', '.join(kvsim.models.THINK_DISTS)}",
            field="think_dist",
        )
    return kvsim.ClosedLoop(threads=rspec.threads, think_ms=rspec.think_ms, think_dist=rspec.think_dist)


def write_mask(
    table: pa.Table, rspec: ReplicaSpec, row_order: npt.NDArray[np.int64], seed: int, source: str
) -> tuple[npt.NDArray[np.bool_] | None, dict[str, Any]]:
    """Per-op write flags (request-layout order) and how they were made."""
    import kvsim

    n = int(row_order.size)
    if rspec.writes_from_op:
        if rspec.write_fraction is not None:
            raise BadInputError.single(
                "--write-fraction", "give either --write-fraction or --writes-from-op, not both",
                field="write_fraction",
            )
        if "op" not in table.column_names:
            raise BadInputError.single(source, "--writes-from-op needs an op column", line=1, field="op")
        ops = np.asarray(table.column("op").to_numpy(zero_copy_only=False), dtype=object)[row_order]
        ops = np.where(ops == None, "", ops).astype(str)  # noqa: E711 (element-wise None test)
        return kvsim.write_flags(n, ops=ops), {"source": "op column"}
    if rspec.write_fraction is None:
        return None, {}
    if not (0.0 <= rspec.write_fraction <= 1.0):
        raise BadInputError.single(
            "--write-fraction", f"{rspec.write_fraction}: need a fraction in [0, 1]", field="write_fraction"
        )
    flags = kvsim.write_flags(n, write_fraction=rspec.write_fraction, seed=seed)
    return flags, {"source": "write_fraction", "fraction": rspec.write_fraction}


def resolve_policy(
    policy: str, params: dict[str, float], rspec: ReplicaSpec
) -> tuple[str, dict[str, float], str, dict[str, float]]:
    """(queue policy, its params, replica selector, its params). A shorthand's `--param`s go to the selector."""
    if policy in REPLICA_SHORTHANDS:
        if rspec.replica is not None and rspec.replica != policy:
            raise BadInputError.single(
                "--replica", f"--policy {policy} already selects replicas with {policy}", field="replica"
            )
        return "fifo", {}, policy, {**params, **rspec.replica_params}
    return policy, params, rspec.replica or SIZED_POLICIES.get(policy, "round-robin"), dict(rspec.replica_params)


def _sizes_in_rows(table: pa.Table, source: str) -> npt.NDArray[np.float64] | None:
    if "value_size" not in table.column_names:
        return None
    col = table.column("value_size")
    import pyarrow as pa

    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_null(col.type)):
        raise BadInputError.single(source, f"must be a number, column type is {col.type}", line=1, field="value_size")
    arr: npt.NDArray[np.float64] = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
    neg = np.flatnonzero(arr < 0)
    if neg.size:
        raise BadInputError.single(
            source, f"negative size {arr[neg[0]]:.0f}", line=int(neg[0]) + 2, field="value_size"
        )
    return arr


def needs_sized_replay(table: pa.Table, policy: str, rspec: ReplicaSpec) -> bool:
    """The core replay suffices unless a selector is asked for or the sizes are used and differ."""
    if policy in REPLICA_SHORTHANDS or policy in SIZED_POLICIES or rspec.replica is not None:
        return True
    if rspec.extensions_on() or rspec.size_aware_cost:
        return True
    if not rspec.use_sizes or "value_size" not in table.column_names:
        return False
    col = table.column("value_size")
    import pyarrow.compute as pc

    return int(pc.count_distinct(col).as_py()) > 1


def run_sized_simulation(
    table: pa.Table, spec: SimulationSpec, rspec: ReplicaSpec, *, source: str = "trace"
) -> kvsim.replicas.SizedResult:
    """Materializes the table's workload with size-aware demands and replays it with replica selection."""
    import kvsim

    from tailtune.simulation.cassandra import make_cluster, request_layout

    policy, params, replica, rparams = resolve_policy(spec.policy, spec.params, rspec)
    cluster = make_cluster(spec)
    offsets, row_order, keys, timestamps = request_layout(table, spec, source=source)
    rows = _sizes_in_rows(table, source) if rspec.use_sizes else None
    smodel = server_model(rspec, spec.servers)
    closed = closed_loop(rspec)
    writes, writes_info = write_mask(table, rspec, row_order, spec.seed, source)
    try:
        model = kvsim.DemandModel.default(cluster.service_rate)
        if rspec.t0_us is not None or rspec.bandwidth_mbps is not None:
            model = kvsim.DemandModel(
                t0_s=model.t0_s if rspec.t0_us is None else rspec.t0_us * 1e-6,
                bandwidth_bps=model.bandwidth_bps if rspec.bandwidth_mbps is None else rspec.bandwidth_mbps * 1e6,
            )
        demand: dict[str, Any] = {"dist": rspec.demand_dist}
        if rspec.demand_dist == "lognormal":
            demand["sigma"] = rspec.demand_sigma
        sizes = None
        mean_demand = None
        if rows is not None and np.isfinite(rows).any():
            info = kvsim.fill_unknown_sizes(rows[row_order], keys)
            sizes = info.sizes
            mean_demand = model.mean_s(sizes)
            demand.update(
                model="size",
                t0_us=model.t0_s * 1e6,
                bandwidth_bps=model.bandwidth_bps,
                median_bytes=info.median_bytes,
                unknown_sizes=info.unknown,
            )
        else:
            demand.update(model="uniform", mean_us=1e6 / cluster.service_rate)
        if rspec.size_aware_cost and mean_demand is None:
            raise BadInputError.single(
                "--size-aware-cost",
                "needs value sizes: the trace has no known value_size (or --no-sizes was given); drop the flag",
                field="size_aware_cost",
            )
        thr = rspec.thr_l_bytes
        if thr is None and replica == "heron" and rparams.get("thr_l_bytes", 0.0) > 0.0:
            thr = rparams["thr_l_bytes"]
        if thr is None and policy in SIZED_POLICIES and params.get("thr_l_bytes", 0.0) > 0.0:
            thr = params["thr_l_bytes"]
        if thr is None and sizes is not None:
            thr = kvsim.default_thr_l(model, float(demand["median_bytes"]))
        if policy in SIZED_POLICIES and thr is not None:
            params = {**params, "thr_l_bytes": float(thr)}
        workload = kvsim.Workload(
            cluster,
            offsets,
            keys=keys,
            mean_demand_s=mean_demand,
            timestamps=timestamps,
            # Offered load is relative to the servers' time-averaged capacity (speeds and slowdowns included).
            load=spec.load * (1.0 if smodel is None else smodel.capacity_factor(spec.servers)),
            seed=spec.seed,
            demand_dist=rspec.demand_dist,
            demand_sigma=rspec.demand_sigma,
        )
        res = kvsim.replay_sized(
            workload,
            policy,
            params,
            replica=replica,
            replica_params=rparams,
            sizes=sizes,
            thr_l_bytes=thr,
            warmup=spec.warmup,
            record_ops=spec.record_ops,
            seed=spec.seed,
            demand=demand,
            servers=smodel,
            writes=writes,
            closed=closed,
            size_aware_cost=rspec.size_aware_cost,
        )
        if res.writes is not None:
            res = dataclasses.replace(res, writes={**writes_info, **res.writes})
        elif writes is not None:
            res = dataclasses.replace(res, writes={**writes_info, "ops": 0, "copies": 0})
        if spec.policy in REPLICA_SHORTHANDS:
            res = dataclasses.replace(res, policy_label=spec.policy)
        return res
    except kvsim.WorkloadError as exc:
        raise BadInputError.single(source, str(exc)) from None
    except kvsim.KvsimError as exc:
        raise BadInputError.single("simulate", str(exc)) from None
