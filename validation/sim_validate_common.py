"""Shared helpers of the simulator validation scripts (validation/sim_validate_*.py): workloads from generator
profiles with hashed or balanced key placement, paired multi-seed replays, mean ± spread tables.

Placement: `hash` = the model's Murmur3 ring (keys land where Cassandra would put them); `balanced` = every
distinct key is put, heaviest first (by the trace's own access counts), on the replica group whose most loaded
server is least loaded (greedy on server load; a group's ops are split over its RF servers by round-robin), so
servers end up with equal op counts up to what one hot key forces. It is done by handing the simulator a ring
token inside the chosen group's range.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "PERCENTILES",
    "Case",
    "CaseResult",
    "ProfileTrace",
    "balanced_tokens",
    "fmt_gain",
    "fmt_ms",
    "group_tokens",
    "load_profile",
    "make_workload",
    "paired_gains",
    "run_case",
    "summary_stats",
]

PERCENTILES = ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "mean_ms")


@dataclass(frozen=True)
class ProfileTrace:
    """A generated trace as CSR: request r has keys[offsets[r]:offsets[r+1]] (strings), value sizes per op."""

    profile: str
    seed: int
    offsets: npt.NDArray[np.int64]
    keys: npt.NDArray[Any]
    value_size: npt.NDArray[np.float64]


def load_profile(profile: str, requests: int, seed: int) -> ProfileTrace:
    """`ingest.generate.generate_table(profile, requests, seed)` → CSR arrays (rows are grouped by request)."""
    from ingest.generate import generate_table

    table = generate_table(profile, requests, seed)
    rid = np.asarray(table.column("request_id").to_numpy(zero_copy_only=False), dtype=np.int64)
    order = np.argsort(rid, kind="stable")
    rid = rid[order]
    counts = np.bincount(rid - rid[0]) if len(rid) else np.zeros(0, dtype=np.int64)
    counts = counts[counts > 0]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = np.asarray(table.column("key").to_numpy(zero_copy_only=False))[order]
    vs_col = table.column("value_size")
    vs = np.asarray(vs_col.to_numpy(zero_copy_only=False), dtype=np.float64)[order]
    vs = np.nan_to_num(vs, nan=float(np.nanmean(vs)) if np.isfinite(vs).any() else 1000.0)
    return ProfileTrace(profile, seed, offsets, keys, vs)


def group_tokens(cluster: Any) -> npt.NDArray[np.int64]:
    """One ring token inside each replica group's range (index = group), found on a fine grid of tokens."""
    groups = cluster.groups
    out = np.zeros(groups, dtype=np.int64)
    found = np.zeros(groups, dtype=bool)
    n = 64 * groups
    while True:
        tok = np.unique(np.linspace(-9.2e18, 9.2e18, n).astype(np.int64))
        g = np.frombuffer(cluster._raw.groups_of(np.ascontiguousarray(tok)), dtype=np.uint32).astype(np.int64)
        out[g] = tok  # any token of the group's range will do
        found[g] = True
        if found.all():
            return out
        n *= 4  # some group owns a sliver narrower than the grid step (vnodes > 1)


def balanced_tokens(cluster: Any, keys: npt.NDArray[Any], exact_keys: int = 20_000) -> npt.NDArray[np.int64]:
    """Per-op tokens of the balanced placement: greedy by server load, heaviest distinct key first.

    A key of replica group g loads each of g's RF servers by count/RF (round-robin replicas), so each key goes to
    the group whose most loaded server is least loaded after the addition. The `exact_keys` heaviest keys are
    placed by an exact scan over all groups; the (light) rest by a lazy priority queue over the groups' maxima.
    """
    uniq, inv, counts = np.unique(keys.astype(str), return_inverse=True, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    rt = np.asarray(cluster.replica_table(), dtype=np.int64)
    rf = rt.shape[1]
    server_load = np.zeros(cluster.servers, dtype=np.float64)
    key_group = np.zeros(len(uniq), dtype=np.int64)
    head, tail = order[:exact_keys], order[exact_keys:]
    for k in head:
        add = counts[k] / rf
        g = int(np.argmin(server_load[rt].max(axis=1)))
        key_group[k] = g
        server_load[rt[g]] += add
    # The light rest: scattered at random (independently of key order, as a hash would) over the groups, with
    # probabilities ∝ how far each group's most loaded server is below the final mean server load. A strict
    # greedy pours runs of consecutive keys into one group, and round-robin replicas split opsets, not ops, so
    # that came out less balanced in practice.
    final_mean = counts.sum() / cluster.servers
    room = np.maximum(final_mean - server_load[rt].max(axis=1), 0.0) + 1e-9
    cdf = np.cumsum(room) / room.sum()
    rng = np.random.default_rng(12345)
    key_group[tail] = np.searchsorted(cdf, rng.random(len(tail)), side="right").clip(0, len(rt) - 1)
    gtok = group_tokens(cluster)
    return np.ascontiguousarray(gtok[key_group[inv.reshape(-1)]])


def make_workload(
    cluster: Any,
    trace: ProfileTrace,
    *,
    placement: str,
    load: float,
    seed: int,
    demand_dist: str = "exponential",
    demand_sigma: float = 1.0,
    mean_demand_s: npt.NDArray[np.float64] | None = None,
) -> Any:
    """A kvsim.Workload of `trace` on `cluster` (Poisson arrivals at `load`)."""
    import kvsim

    if placement == "hash":
        tokens = kvsim.tokens_for_keys(trace.keys)
    elif placement == "balanced":
        tokens = balanced_tokens(cluster, trace.keys)
    else:
        raise ValueError(f"placement must be 'hash' or 'balanced', got {placement!r}")
    extra: dict[str, Any] = {}
    if demand_dist != "exponential":
        extra = {"demand_dist": demand_dist, "demand_sigma": demand_sigma}
    return kvsim.Workload(
        cluster,
        trace.offsets,
        tokens=tokens,
        mean_demand_s=mean_demand_s,
        load=load,
        seed=seed,
        **extra,
    )


@dataclass
class Case:
    """One validation condition: a cluster, a workload recipe and the policies to compare on it."""

    name: str
    profile: str
    placement: str = "hash"
    load: float = 0.75
    servers: int = 128
    slots: int = 8
    clients: int = 128
    replication: int = 3
    service_rate: float = 3750.0
    net_latency_us: float = 50.0
    demand_dist: str = "exponential"
    demand_sigma: float = 1.0
    policies: Sequence[tuple[str, dict[str, float]]] = ()
    size_aware_cost: bool = False


@dataclass
class CaseResult:
    case: Case
    # per policy label → per seed → result dict (p50_ms…, server_load_max, steady_state)
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def policy_label(name: str, params: dict[str, float]) -> str:
    if not params:
        return name
    return name + "(" + ",".join(f"{k}={v:g}" for k, v in params.items()) + ")"


def run_case(
    case: Case,
    traces: dict[tuple[str, int], ProfileTrace],
    requests: int,
    seeds: Iterable[int],
    *,
    mean_demand: Any = None,
) -> CaseResult:
    """Replays every policy of `case` on one workload per seed (common random numbers across policies).

    `mean_demand(trace, cluster) -> array | None` gives per-op mean demands (BRB's value-size model)."""
    import kvsim

    cluster = kvsim.Cluster(
        servers=case.servers,
        slots=case.slots,
        replication=case.replication,
        service_rate=case.service_rate,
        net_latency_us=case.net_latency_us,
        clients=case.clients,
    )
    out = CaseResult(case)
    for seed in seeds:
        key = (case.profile, seed)
        if key not in traces:
            traces[key] = load_profile(case.profile, requests, seed)
        trace = traces[key]
        md = mean_demand(trace, cluster) if mean_demand is not None else None
        wl = make_workload(
            cluster,
            trace,
            placement=case.placement,
            load=case.load,
            seed=seed,
            demand_dist=case.demand_dist,
            demand_sigma=case.demand_sigma,
            mean_demand_s=md,
        )
        for name, params in case.policies:
            cfg = kvsim.ReplayConfig(policy=name, params=params, size_aware_cost=case.size_aware_cost)
            r = kvsim.replay(wl, cfg)
            d = r.to_json()
            out.runs.setdefault(policy_label(name, params), []).append(d)
    return out


def summary_stats(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    m = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return m, sd


def paired_gains(res: CaseResult, label: str, base: str, metric: str) -> list[float]:
    """Per seed: 1 − policy/base (positive = faster than the base)."""
    return [1.0 - a[metric] / b[metric] for a, b in zip(res.runs[label], res.runs[base], strict=True)]


def fmt_ms(values: Sequence[float]) -> str:
    m, sd = summary_stats(values)
    return f"{m:.3f} ± {sd:.3f}"


def fmt_gain(values: Sequence[float]) -> str:
    m, sd = summary_stats(values)
    return f"{100 * m:+.1f}% ± {100 * sd:.1f}"
