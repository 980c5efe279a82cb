"""The memcached deployment kind: replay of requests (keys per request, arrival times) through a Chisel-style
client and a pool of memcached servers, with a typed config and result. The analyzer (layered queueing model
and grid search) is in `kvsim.chisel`. Model choices: docs/chisel.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from kvsim._kvsim import ParameterError, replay_memcached_raw
from kvsim.catalogue import memcached_policy_specs
from kvsim.chisel import (
    DEFAULT_ELEPHANT_THRESHOLD,
    MemcachedSetup,
    SizeMix,
    grid_search,
)
from kvsim.types import JsonValue

__all__ = [
    "MEMCACHED_POLICIES",
    "MemcachedConfig",
    "MemcachedResult",
    "Shards",
    "replay",
    "servers_of",
    "shards_from_keys",
]

_SPECS = {s.name: s for s in memcached_policy_specs()}
#: The memcached policies, from the core's catalogue.
MEMCACHED_POLICIES: tuple[str, ...] = tuple(_SPECS)


@dataclass(frozen=True)
class Shards:
    """The per-server batches of each request of a sharded pool (flattened): request `i`'s batches are
    `server[offsets[i]:offsets[i + 1]]` with `keys[...]` keys each, in the order the client submits them."""

    offsets: npt.NDArray[np.uint32]
    server: npt.NDArray[np.uint32]
    keys: npt.NDArray[np.uint32]

    def sizes(self) -> npt.NDArray[np.int64]:
        """Keys per request."""
        total = np.concatenate([[0], np.cumsum(self.keys, dtype=np.int64)])
        off = self.offsets.astype(np.int64)
        out: npt.NDArray[np.int64] = total[off[1:]] - total[off[:-1]]
        return out


def shards_from_keys(key_offsets: npt.ArrayLike, key_server: npt.ArrayLike) -> Shards:
    """Group each request's keys by server: request `i` owns keys `key_offsets[i]:key_offsets[i + 1]`, key `j` lives
    on server `key_server[j]`. A request's batches come in the order of their first key (as the client's)."""
    off = np.asarray(key_offsets, dtype=np.int64)
    srv = np.asarray(key_server, dtype=np.int64)
    offsets = [0]
    server: list[int] = []
    keys: list[int] = []
    for i in range(off.size - 1):
        counts: dict[int, int] = {}
        for s in srv[off[i] : off[i + 1]].tolist():
            counts[s] = counts.get(s, 0) + 1
        server.extend(counts)
        keys.extend(counts.values())
        offsets.append(len(keys))
    return Shards(np.asarray(offsets, dtype=np.uint32), np.asarray(server, dtype=np.uint32),
                  np.asarray(keys, dtype=np.uint32))


@dataclass(frozen=True)
class MemcachedConfig:
    """A memcached replay: the policy (`batching`, or `chisel` with `split_keys` or `split_chunks`, `merge` and
    `elephant_threshold`; missing chisel levels come from the analyzer for the workload), the deployment, the
    seed of the service jitter and of the requests' first servers, and optionally those first servers.

    With `shards` the pool is sharded (each key on one server; `server_of` unused): each request is sent as its
    per-server batches, and the deployment's `query_threads` are shared out as one lane per server."""

    policy: str = "chisel"
    params: Mapping[str, int] = field(default_factory=dict)
    deployment: MemcachedSetup = field(default_factory=MemcachedSetup)
    seed: int = 0
    server_of: npt.NDArray[np.uint32] | None = field(default=None, repr=False)
    shards: Shards | None = field(default=None, repr=False)


@dataclass(frozen=True)
class MemcachedResult:
    """A memcached replay: latency percentiles (ms), the chisel levels used (`params`), query threads, the
    replay's counters and each request's latency in arrival order."""

    policy: str
    params: dict[str, int]
    query_threads: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    mean_ms: float
    requests: int
    queries: int
    query_keys: int
    merged_queries: int
    split_requests: int
    chunks: int
    events: int
    utilization: float
    server_load_max: float
    steady_state: bool
    client_wait_us: float
    server_wait_us: float
    sim_wall_s: float
    latencies_ms: npt.NDArray[np.float64] = field(repr=False)
    #: Time client work waited for a CPU of its process (µs, summed) and those CPUs' busy fraction (0 when
    #: the deployment's `client_cpus` is 0, unbounded).
    client_cpu_wait_us: float = 0.0
    client_cpu_load: float = 0.0

    @property
    def events_per_s(self) -> float:
        return self.events / self.sim_wall_s if self.sim_wall_s > 0 else 0.0

    def to_json(self) -> dict[str, JsonValue]:
        """The `simulate --json` object (`ops` counts the queries sent to memcached)."""
        return {
            "policy": self.policy,
            "params": dict(self.params),
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "p99_ms": self.p99_ms,
            "p999_ms": self.p999_ms,
            "mean_ms": self.mean_ms,
            "requests": self.requests,
            "ops": self.queries,
            "events": self.events,
            "utilization": self.utilization,
            "server_load_max": self.server_load_max,
            "steady_state": self.steady_state,
            "sim_wall_s": self.sim_wall_s,
            "events_per_s": self.events_per_s,
        }


def servers_of(n: int, servers: int, seed: int) -> npt.NDArray[np.uint32]:
    """The first server of each request, materialized from the seed (uniform over the pool)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6D656D63]))
    return rng.integers(0, servers, size=n, dtype=np.uint32)


def _check_params(policy: str, params: Mapping[str, object]) -> dict[str, int]:
    if policy not in MEMCACHED_POLICIES:
        known = ", ".join(MEMCACHED_POLICIES)
        raise ParameterError(f"policy: unknown memcached policy {policy!r} (one of {known})")
    allowed = tuple(p.name for p in _SPECS[policy].params)
    out: dict[str, int] = {}
    for name, value in params.items():
        if name not in allowed:
            raise ParameterError(f"params: field '{name}': not a param of {policy} (allowed {list(allowed)})")
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 1:
            raise ParameterError(f"params: field '{name}': must be an integer >= 1, got {value!r}")
        out[name] = int(value)
    if "split_keys" in out and "split_chunks" in out:
        raise ParameterError("params: field 'split_chunks': give split_keys or split_chunks, not both")
    return out


def replay(sizes: npt.ArrayLike, arrivals: npt.ArrayLike, config: MemcachedConfig | None = None) -> MemcachedResult:
    """Replays requests (`sizes`: keys per request, `arrivals`: arrival times in seconds, non-decreasing)
    through the memcached deployment of `config` (default `MemcachedConfig()`)."""
    cfg = MemcachedConfig() if config is None else config
    k = np.asarray(sizes, dtype=np.int64)
    t = np.asarray(arrivals, dtype=np.float64)
    if k.ndim != 1 or t.shape != k.shape:
        raise ValueError(f"sizes and arrivals must be 1-d of one length, got {k.shape} and {t.shape}")
    if k.size and int(k.min()) < 1:
        raise ValueError(f"sizes: request {int(np.argmin(k))} has {int(k.min())} keys (needs >= 1)")
    dep = cfg.deployment
    dep.validate()
    given = _check_params(cfg.policy, cfg.params)
    mix = SizeMix.from_requests(k, t) if k.size else SizeMix((1,), (1.0,), math.inf)
    threads = dep.threads_for(mix)
    used: dict[str, int] = {}
    if cfg.policy == "chisel":
        thr = given.get("elephant_threshold", DEFAULT_ELEPHANT_THRESHOLD)
        if not ({"split_keys", "split_chunks"} & given.keys() and "merge" in given):
            levels = grid_search(mix, replace(dep, query_threads=threads), elephant_threshold=thr)
            used = {"split_keys": levels.split_keys, "merge": levels.merge}
        used.update(given)
        used["elephant_threshold"] = thr
        if "split_chunks" in used:
            used.pop("split_keys", None)
    srv = servers_of(k.size, dep.servers, cfg.seed) if cfg.server_of is None else np.asarray(cfg.server_of)
    sh = cfg.shards
    if sh is not None and (sh.offsets.size != k.size + 1 or not np.array_equal(sh.sizes(), k)):
        raise ValueError("shards: the per-server batches do not add up to the requests' sizes")
    raw = replay_memcached_raw(
        (t * 1e6).tolist(),
        k.astype(np.uint32).tolist(),
        srv.astype(np.uint32).tolist(),
        policy=cfg.policy,
        servers=dep.servers,
        worker_threads=dep.worker_threads,
        query_threads=threads,
        client_overhead_us=float(dep.client_overhead_us),
        setup_us=float(dep.setup_us),
        profile=dep.profile.as_tuple(),
        service_cv=float(dep.service_cv),
        seed=int(cfg.seed),
        split_keys=used.get("split_keys"),
        split_chunks=used.get("split_chunks"),
        merge=used.get("merge", 1),
        elephant_threshold=used.get("elephant_threshold", DEFAULT_ELEPHANT_THRESHOLD),
        shards=None if sh is None else (sh.offsets.tolist(), sh.server.tolist(), sh.keys.tolist()),
        client_cpus=int(dep.client_cpus),
        client_processes=int(dep.client_processes),
        client_key_us=float(dep.client_key_us),
    )
    return MemcachedResult(
        policy=cfg.policy,
        params=used,
        query_threads=int(raw["query_threads"]),
        p50_ms=raw["p50_us"] / 1e3,
        p95_ms=raw["p95_us"] / 1e3,
        p99_ms=raw["p99_us"] / 1e3,
        p999_ms=raw["p999_us"] / 1e3,
        mean_ms=raw["mean_us"] / 1e3,
        requests=int(raw["requests"]),
        queries=int(raw["queries"]),
        query_keys=int(raw["query_keys"]),
        merged_queries=int(raw["merged_queries"]),
        split_requests=int(raw["split_requests"]),
        chunks=int(raw["chunks"]),
        events=int(raw["events"]),
        utilization=float(raw["utilization"]),
        server_load_max=float(raw["server_load_max"]),
        steady_state=bool(raw["steady_state"]),
        client_wait_us=float(raw["client_wait_us"]),
        server_wait_us=float(raw["server_wait_us"]),
        sim_wall_s=float(raw["sim_wall_s"]),
        latencies_ms=np.asarray(raw["latencies_us"], dtype=np.float64) / 1e3,
        client_cpu_wait_us=float(raw["client_cpu_wait_us"]),
        client_cpu_load=float(raw["client_cpu_load"]),
    )
