"""Glue between tailtune's data and the kvsim replay: dataset / trace file / generator profile → materialized
`kvsim.Workload` → replay. One workload per (source, seed, load) serves every policy (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tailtune.base.errors import BadInputError, TailtuneError

if TYPE_CHECKING:
    import kvsim
    import pyarrow as pa

    from tailtune.base.settings import Settings

__all__ = [
    "MEMCACHED_POLICIES",
    "MemcachedSpec",
    "SimulationSpec",
    "load_table",
    "parse_params",
    "run_memcached_simulation",
    "run_simulation",
    "workload_from_table",
]

_REQUIRED = ("request_id", "key")


@dataclass(frozen=True)
class SimulationSpec:
    """Everything `tailtune simulate` needs besides the data source."""

    policy: str
    params: dict[str, float]
    servers: int = 128
    slots: int = 8
    replication: int = 3
    vnodes: int = 1
    service_rate: float = 3750.0
    net_latency_us: float = 50.0
    clients: int = 128
    load: float = 0.75
    seed: int = 0
    warmup: float = 0.1
    use_timestamps: bool = False
    record_ops: bool = False


def parse_params(items: list[str], source: str = "--param") -> dict[str, float]:
    """`k=v` strings → {k: float(v)}; malformed items are a BadInputError naming the item."""
    out: dict[str, float] = {}
    for i, item in enumerate(items, start=1):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BadInputError.single(
                source, f"expected NAME=VALUE, got {item!r}", line=i, field=name or item
            )
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise BadInputError.single(
                source, f"value {value!r} is not a number", line=i, field=name.strip()
            ) from None
    return out


def load_table(
    *,
    dataset: str | None = None,
    trace: Path | None = None,
    profile: str | None = None,
    requests: int | None = None,
    seed: int = 0,
    settings: Settings | None = None,
) -> pa.Table:
    """The canonical long-format table of one source (exactly one of dataset / trace / profile)."""
    import pyarrow as pa

    chosen = [x for x in (dataset, trace, profile) if x is not None]
    if len(chosen) != 1:
        raise BadInputError.single("simulate", "give exactly one of --dataset, --trace, --profile")
    if dataset is not None:
        from ingest.store import DatasetStore
        from tailtune.base.settings import get_settings

        return DatasetStore(settings or get_settings()).get(dataset).read_table()
    if trace is not None:
        if not trace.exists():
            raise BadInputError.single(str(trace), "file not found")
        if trace.suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                return pq.read_table(trace)
            except (OSError, pa.ArrowException) as exc:
                raise BadInputError.single(str(trace), f"not a readable Parquet file: {exc}") from None
        import pyarrow.csv as pcsv

        try:
            return pcsv.read_csv(trace)
        except (OSError, pa.ArrowException) as exc:
            raise BadInputError.single(str(trace), f"not a readable CSV file: {exc}") from None
    if requests is None or requests < 1:
        raise BadInputError.single("--requests", "a profile needs --requests N (N ≥ 1)", field="requests")
    from ingest import generate

    try:
        table: pa.Table = generate.generate_table(str(profile), requests, seed)
    except AttributeError:
        raise TailtuneError("this build has no generator (ingest.generate.generate_table)") from None
    return table


def request_layout(
    table: pa.Table, spec: SimulationSpec, *, source: str = "trace"
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[Any], npt.NDArray[np.float64] | None]:
    """Groups rows into requests (ordered by their first timestamp, then id): (offsets, row order, keys in that
    order, request timestamps or None)."""
    for col in _REQUIRED:
        if col not in table.column_names:
            raise BadInputError.single(source, "required column is missing", line=1, field=col)
    if table.num_rows == 0:
        raise BadInputError.single(source, "the trace has no rows")
    rid = table.column("request_id").to_numpy(zero_copy_only=False)
    keys_col = table.column("key")
    if keys_col.null_count:
        first = int(np.flatnonzero(keys_col.is_null().to_numpy(zero_copy_only=False))[0])
        raise BadInputError.single(source, "key is null", line=first + 2, field="key")
    has_ts = "ts" in table.column_names
    ts = table.column("ts").to_numpy(zero_copy_only=False).astype(np.float64) if has_ts else None
    uniq, inv = np.unique(rid, return_inverse=True)
    inv = inv.reshape(-1)
    first_ts: npt.NDArray[np.float64]
    if ts is not None:
        first_ts = np.full(len(uniq), np.inf)
        np.minimum.at(first_ts, inv, ts)
    else:
        first_ts = np.zeros(len(uniq))
    req_order = np.lexsort((np.arange(len(uniq)), first_ts))
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[req_order] = np.arange(len(uniq))
    row_order = np.argsort(rank[inv], kind="stable")
    counts = np.bincount(rank[inv], minlength=len(uniq))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = np.asarray(keys_col.to_numpy(zero_copy_only=False))[row_order]
    timestamps = first_ts[req_order] if (spec.use_timestamps and ts is not None) else None
    if spec.use_timestamps and ts is None:
        raise BadInputError.single(source, "--use-timestamps needs a ts column", field="ts")
    return offsets, row_order, keys, timestamps


def workload_from_table(
    table: pa.Table, cluster: kvsim.Cluster, spec: SimulationSpec, *, source: str = "trace"
) -> kvsim.Workload:
    """Groups rows into requests (ordered by their first timestamp, then id) and materializes a workload."""
    import kvsim

    offsets, _, keys, timestamps = request_layout(table, spec, source=source)
    try:
        return kvsim.Workload(
            cluster,
            offsets,
            keys=keys,
            timestamps=timestamps,
            load=spec.load,
            seed=spec.seed,
        )
    except kvsim.ParameterError as exc:
        raise BadInputError.single("simulate", str(exc)) from None
    except kvsim.WorkloadError as exc:
        raise BadInputError.single(source, str(exc)) from None


def make_cluster(spec: SimulationSpec) -> kvsim.Cluster:
    import kvsim

    try:
        return kvsim.Cluster(
            servers=spec.servers,
            slots=spec.slots,
            replication=spec.replication,
            vnodes=spec.vnodes,
            service_rate=spec.service_rate,
            net_latency_us=spec.net_latency_us,
            clients=spec.clients,
        )
    except (kvsim.ParameterError, OverflowError, TypeError) as exc:
        raise BadInputError.single("simulate", str(exc)) from None


def run_simulation(table: pa.Table, spec: SimulationSpec, *, source: str = "trace") -> kvsim.Result:
    """Materializes the table's workload and replays it under `spec.policy`."""
    import kvsim

    cluster = make_cluster(spec)
    workload = workload_from_table(table, cluster, spec, source=source)
    try:
        return workload.replay(spec.policy, spec.params, warmup=spec.warmup, record_ops=spec.record_ops)
    except kvsim.KvsimError as exc:
        raise BadInputError.single("simulate", str(exc)) from None


def result_json(result: kvsim.Result) -> dict[str, Any]:
    """The documented `simulate --json` object."""
    return result.to_json()


MEMCACHED_POLICIES = ("batching", "chisel")


@dataclass(frozen=True)
class MemcachedSpec:
    """A memcached pool replay (issue 5): client-side batching vs Chisel split/merge."""

    policy: str
    params: dict[str, float]
    servers: int = 2
    worker_threads: int = 4
    query_threads: int | None = None
    client_overhead_us: float = 0.0
    setup_us: float = 0.0
    inter_arrival_us: float | None = None  # None: the trace's own arrival times
    service_cv: float = 0.0
    seed: int = 0


def run_memcached_simulation(table: pa.Table, spec: MemcachedSpec, *, source: str = "trace") -> dict[str, Any]:
    """Replays the table's requests through a memcached deployment; returns the `simulate --json` object.

    Without `params`, chisel runs at its analyzer's levels (reported in `params`). With `inter_arrival_us`, the
    arrivals are redrawn as Poisson with that mean from the seed (the paper's scenario grid); otherwise the
    requests keep the trace's timestamps.
    """
    from kvsim import chisel

    for col in ("request_id", "ts"):
        if col not in table.column_names:
            raise BadInputError.single(source, "required column is missing", line=1, field=col)
    if table.num_rows == 0:
        raise BadInputError.single(source, "the trace has no rows")
    sizes, arrivals = chisel.requests_from_long(
        table.column("request_id").to_numpy(zero_copy_only=False),
        table.column("ts").to_numpy(zero_copy_only=False),
    )
    arrivals = arrivals - arrivals[0]
    if spec.inter_arrival_us is not None:
        if spec.inter_arrival_us <= 0:
            raise BadInputError.single("simulate", "must be > 0", field="inter-arrival-us")
        rng = np.random.default_rng(spec.seed)
        gaps = rng.exponential(spec.inter_arrival_us * 1e-6, size=sizes.size)
        arrivals = np.cumsum(gaps) - gaps[0]
    params: dict[str, int] = {}
    for name, value in spec.params.items():
        if value != int(value):
            raise BadInputError.single("--param", f"must be an integer, got {value}", field=name)
        params[name] = int(value)
    try:
        return chisel.simulate_memcached_summary(
            sizes,
            arrivals,
            spec.policy,
            params,
            servers=spec.servers,
            worker_threads=spec.worker_threads,
            query_threads=spec.query_threads,
            client_overhead_us=spec.client_overhead_us,
            setup_us=spec.setup_us,
            service_cv=spec.service_cv,
            seed=spec.seed,
        )
    except ValueError as exc:
        raise BadInputError.single("simulate", str(exc)) from None
