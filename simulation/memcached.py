"""memcached replays: a pool (servers × worker threads, the client's query threads and overheads), a trace
reduced once to (keys per request, arrival time), and the replay of `batching` or `chisel` on one seed.

The seed draws the request → server mapping and the service-time noise inside kvsim; with `inter_arrival_us`
the arrivals are redrawn as Poisson from the seed's `MEMCACHED_ARRIVALS` stream (simulation.seeds),
otherwise the requests keep the trace's own arrival times. Model choices: docs/chisel.md.

`pool`: `replica` (every server holds every key; a request goes to a seeded server, the paper's model) or
`sharded` (each key lives on the server that `tailtune_client.hashing` — pymemcache's `HashClient` rendezvous
hash — picks among `server_addresses`; a request is sent as its per-server batches, as the shipped client does).
The sharded pool needs the trace's keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from base.errors import BadInputError
from simulation.policies import ParamValue
from simulation.seeds import MEMCACHED_ARRIVALS, rng

if TYPE_CHECKING:
    import kvsim
    import pyarrow as pa

__all__ = [
    "MEMCACHED_POLICIES",
    "MEMCACHED_POOLS",
    "MemcachedDeployment",
    "MemcachedTrace",
    "prepare",
    "replay",
]

MEMCACHED_POLICIES = ("batching", "chisel")
MEMCACHED_POOLS = ("replica", "sharded")


def _setup_default(name: str) -> Any:
    """`kvsim.chisel.MemcachedSetup`'s default of its field `name`: the simulator's, stated once."""
    from kvsim.chisel import MemcachedSetup

    return MemcachedSetup.__dataclass_fields__[name].default


@dataclass(frozen=True)
class MemcachedDeployment:
    """A memcached pool (default: the simulator's, `kvsim.chisel.MemcachedSetup`: the Chisel paper's 2 servers × 4
    worker threads)."""

    servers: int = _setup_default("servers")
    worker_threads: int = _setup_default("worker_threads")
    query_threads: int | None = _setup_default("query_threads")
    client_overhead_us: float = _setup_default("client_overhead_us")
    setup_us: float = _setup_default("setup_us")
    service_cv: float = _setup_default("service_cv")
    inter_arrival_us: float | None = None  # None: the trace's own arrival times
    pool: str = "replica"  # or "sharded"
    # sharded pool: the servers' "host:port" names the client hashes, comma-separated (None: 127.0.0.1:11211, …)
    server_addresses: str | None = None
    # the client host (docs/chisel.md § Client host): CPUs per client process serving its query threads' client
    # work first come, first served (1: a CPython process, as the shipped client; 0, the default: unbounded, every
    # query thread in parallel, since the number of application processes is not known); the processes the
    # requests are dealt to round-robin (query threads shared out over them); the client's CPU work per key of a
    # response (µs)
    client_cpus: int = _setup_default("client_cpus")
    client_processes: int = _setup_default("client_processes")
    client_key_us: float = _setup_default("client_key_us")

    def addresses(self) -> tuple[str, ...]:
        """The servers' names as the client hashes them (`host:port`), one per server."""
        if self.server_addresses is None:
            return tuple(f"127.0.0.1:{11211 + i}" for i in range(self.servers))
        from tailtune_client.hashing import server_name

        names = tuple(server_name(a.strip()) for a in self.server_addresses.split(",") if a.strip())
        if len(names) != self.servers or len(set(names)) != len(names):
            raise BadInputError.single(
                "deployment", f"needs {self.servers} distinct host:port names, got {list(names)}",
                field="server_addresses",
            )
        return names

    def as_dict(self) -> dict[str, Any]:
        """Every field (JSON-able), the client host's only when it differs from the default (records made before
        it existed read the same)."""
        out = dataclasses.asdict(self)
        for name in _CLIENT_HOST:
            if out[name] == _CLIENT_HOST_DEFAULTS[name]:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MemcachedDeployment:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise BadInputError.single("deployment", f"unknown option(s) {unknown}", field=unknown[0])
        return cls(**d)

    def cli_args(self) -> list[str]:
        """`tailtune simulate` options that set every field differing from the defaults."""
        out: list[str] = []
        default = MemcachedDeployment()
        for f in fields(self):
            v = getattr(self, f.name)
            if v != getattr(default, f.name):
                out += ["--" + f.name.replace("_", "-"), repr(v) if isinstance(v, float) else str(v)]
        return out


_CLIENT_HOST = ("client_cpus", "client_processes", "client_key_us")
_CLIENT_HOST_DEFAULTS = {f.name: f.default for f in fields(MemcachedDeployment) if f.name in _CLIENT_HOST}


@dataclass(frozen=True)
class MemcachedTrace:
    """Keys per request and arrival times (s, from 0) in arrival order; with the trace's `key` column, the keys
    themselves: request `i`'s are `keys[key_offsets[i]:key_offsets[i + 1]]` (in the trace's row order)."""

    source: str
    sizes: npt.NDArray[np.int64]
    arrivals: npt.NDArray[np.float64]
    keys: npt.NDArray[np.object_] | None = None
    key_offsets: npt.NDArray[np.int64] | None = None

    def request_keys(self, i: int) -> list[str]:
        if self.keys is None or self.key_offsets is None:
            raise ValueError(f"{self.source}: the trace has no keys")
        return [str(k) for k in self.keys[self.key_offsets[i] : self.key_offsets[i + 1]]]

    def prefix(self, fraction: float) -> int:
        import math

        n = int(self.sizes.size)
        return n if fraction >= 1.0 else max(1, math.ceil(fraction * n))


def prepare(table: pa.Table, *, source: str = "trace") -> MemcachedTrace:
    from kvsim import chisel

    for col in ("request_id", "ts"):
        if col not in table.column_names:
            raise BadInputError.single(source, "required column is missing", line=1, field=col)
    if table.num_rows == 0:
        raise BadInputError.single(source, "the trace has no rows")
    rid = np.asarray(table.column("request_id").to_numpy(zero_copy_only=False), dtype=np.int64)
    ts = np.asarray(table.column("ts").to_numpy(zero_copy_only=False), dtype=np.float64)
    sizes, arrivals = chisel.requests_from_long(rid, ts)
    keys = offsets = None
    if "key" in table.column_names:
        # the same request order as requests_from_long: earliest ts, ties by id; rows keep their order within
        ids, inverse = np.unique(rid, return_inverse=True)
        first = np.full(ids.size, np.inf)
        np.minimum.at(first, inverse, ts)
        rank = np.empty(ids.size, dtype=np.int64)
        rank[np.lexsort((ids, first))] = np.arange(ids.size)
        rows = np.argsort(rank[inverse], kind="stable")
        keys = np.asarray(table.column("key").to_pylist(), dtype=object)[rows]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return MemcachedTrace(source, sizes, arrivals - arrivals[0], keys, offsets)


def shards_for(
    trace: MemcachedTrace, deployment: MemcachedDeployment, n: int, where: str = "simulate"
) -> kvsim.memcached.Shards:
    """The per-server batches of the first `n` requests on the sharded pool, keys placed by the client's hash."""
    from kvsim.memcached import shards_from_keys
    from tailtune_client.hashing import server_index

    if trace.keys is None or trace.key_offsets is None:
        raise BadInputError.single(where, f"{trace.source}: the sharded pool needs the trace's keys (column 'key')",
                                   field="pool")
    names = deployment.addresses()
    offsets = trace.key_offsets[: n + 1]
    servers = [server_index(str(k), names) for k in trace.keys[: int(offsets[-1])]]
    return shards_from_keys(offsets, np.asarray(servers, dtype=np.int64))


def arrivals_for(trace: MemcachedTrace, deployment: MemcachedDeployment, seed: int) -> npt.NDArray[np.float64]:
    """The arrival times replayed on `seed`: the trace's own, or Poisson with mean gap `inter_arrival_us`."""
    ia = deployment.inter_arrival_us
    if ia is None:
        return trace.arrivals
    if not ia > 0:
        raise BadInputError.single("simulate", "must be > 0", field="inter-arrival-us")
    gaps = rng(seed, MEMCACHED_ARRIVALS).exponential(float(ia) * 1e-6, size=trace.arrivals.size)
    out: npt.NDArray[np.float64] = np.cumsum(gaps) - gaps[0]
    return out


def integer_params(params: Mapping[str, ParamValue], where: str = "--param") -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in params.items():
        if isinstance(value, str) or float(value) != int(float(value)):
            raise BadInputError.single(where, f"must be an integer, got {value!r}", field=name)
        out[name] = int(float(value))
    return out


def replay(
    trace: MemcachedTrace,
    deployment: MemcachedDeployment,
    policy: str,
    params: Mapping[str, ParamValue],
    seed: int,
    *,
    fraction: float = 1.0,
    where: str = "simulate",
) -> kvsim.MemcachedResult:
    """One replay: percentiles (ms), the levels used (`params`), counters and `latencies_ms` per request.

    Without `params`, chisel runs at its analyzer's levels (reported in `params`)."""
    import kvsim
    from kvsim import chisel

    if policy not in MEMCACHED_POLICIES:
        raise BadInputError.single(where, f"unknown memcached policy {policy!r} (one of {MEMCACHED_POLICIES})",
                                   field="policy")
    ints = integer_params(params)
    n = trace.prefix(fraction)
    if deployment.pool not in MEMCACHED_POOLS:
        raise BadInputError.single(where, f"unknown memcached pool {deployment.pool!r} (one of {MEMCACHED_POOLS})",
                                   field="pool")
    shards = shards_for(trace, deployment, n, where) if deployment.pool == "sharded" else None
    try:
        pool = chisel.MemcachedSetup(
            servers=deployment.servers,
            worker_threads=deployment.worker_threads,
            query_threads=deployment.query_threads,
            client_overhead_us=float(deployment.client_overhead_us),
            setup_us=float(deployment.setup_us),
            service_cv=float(deployment.service_cv),
            client_cpus=int(deployment.client_cpus),
            client_processes=int(deployment.client_processes),
            client_key_us=float(deployment.client_key_us),
        )
        return kvsim.memcached.replay(
            trace.sizes[:n],
            arrivals_for(trace, deployment, seed)[:n],
            kvsim.MemcachedConfig(policy=policy, params=ints, deployment=pool, seed=int(seed), shards=shards),
        )
    except ValueError as exc:
        raise BadInputError.single(where, str(exc)) from None
