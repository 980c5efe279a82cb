"""Chisel for memcached: the layered queueing analyzer and its grid search.

The analyzer (Birke et al., ICAC'19, §IV) predicts the mean request latency of a Chisel client for chunk
size L and merge level B: first the server/network layer (M/G/W per server, Allen-Cunneen), then the client
layer (one G/G/1 per query thread, Kingman), whose service time is the whole round trip of a query (layered).
Elephant requests are a fork-join over their chunks (harmonic numbers over the busy threads); merged mice pay
the merge delay (later members wait for the head's query, unmerged ones queue behind it on its thread).
`grid_search` evaluates every (L, B) and keeps the lowest predicted mean. Model choices: docs/chisel.md.

The replay itself is `kvsim.memcached.replay(sizes, arrivals, MemcachedConfig(...)) -> MemcachedResult`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = [
    "PAPER_PROFILE",
    "ChiselLevels",
    "MemcachedSetup",
    "Prediction",
    "ServiceProfile",
    "SizeMix",
    "grid_search",
    "merge_bound",
    "predict_mean_latency",
    "query_threads_rule",
    "requests_from_long",
]

DEFAULT_ELEPHANT_THRESHOLD = 50
DEFAULT_MAX_MERGE = 8
_FIXED_POINT_ITERATIONS = 60


@dataclass(frozen=True, slots=True)
class ServiceProfile:
    """Per-query server processing P_S = a + b·K and network N_S = c + d·K, in µs, for K keys."""

    a: float
    b: float
    c: float
    d: float

    def processing_us(self, keys: float) -> float:
        return self.a + self.b * keys

    def network_us(self, keys: float) -> float:
        return self.c + self.d * keys

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.a, self.b, self.c, self.d)


PAPER_PROFILE = ServiceProfile(a=3.3, b=0.6, c=85.0, d=6.5)


def query_threads_rule(servers: int, worker_threads: int, client_us: float, server_us: float) -> int:
    """The paper's rule (§III-A): as many query threads as memcached worker threads in the pool, more when a
    query's client phase is longer than its server time (in that ratio). Same rule as the Rust core."""
    base = max(1, servers) * max(1, worker_threads)
    if server_us > 0.0 and client_us > server_us:
        return math.ceil(base * client_us / server_us)
    return base


@dataclass(frozen=True, slots=True)
class MemcachedSetup:
    """Client (query threads, overhead, setup) and server pool (servers × worker threads, service profile).

    The client host (replay only; the analyzer assumes parallel query threads): `client_cpus` CPUs per client
    process serve its query threads' client work first come, first served (0 = unbounded: every thread works in
    parallel, the paper's client; 1 = a CPython process); requests are dealt round-robin to `client_processes`
    processes, each with `query_threads / client_processes` threads; `client_key_us` is the client's CPU work per
    key of a response (parsing), paid after the response is back."""

    servers: int = 2
    worker_threads: int = 4
    query_threads: int | None = None
    client_overhead_us: float = 0.0
    setup_us: float = 0.0
    profile: ServiceProfile = PAPER_PROFILE
    service_cv: float = 0.0
    client_cpus: int = 0
    client_processes: int = 1
    client_key_us: float = 0.0

    @property
    def client_phase_us(self) -> float:
        return self.client_overhead_us + self.setup_us

    def threads_for(self, mix: SizeMix) -> int:
        """Query threads: the given count, else the paper's rule for this workload's mean request."""
        if self.query_threads is not None:
            return self.query_threads
        k = mix.mean_keys
        server_us = self.profile.processing_us(k) + self.profile.network_us(k)
        return query_threads_rule(self.servers, self.worker_threads, self.client_phase_us, server_us)

    def validate(self) -> None:
        for name in ("servers", "worker_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"deployment: field '{name}' must be >= 1")
        if self.query_threads is not None and self.query_threads < 1:
            raise ValueError("deployment: field 'query_threads' must be >= 1")
        if self.client_processes < 1:
            raise ValueError("deployment: field 'client_processes' must be >= 1")
        if self.client_cpus < 0:
            raise ValueError("deployment: field 'client_cpus' must be >= 0 (0: unbounded)")
        for name in ("client_overhead_us", "setup_us", "service_cv", "client_key_us"):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v < 0.0:
                raise ValueError(f"deployment: field '{name}' must be finite and >= 0, got {v}")
        for name, v in zip("abcd", self.profile.as_tuple(), strict=True):
            if not math.isfinite(v) or v < 0.0:
                raise ValueError(f"deployment: profile field '{name}' must be finite and >= 0, got {v}")


@dataclass(frozen=True, slots=True)
class SizeMix:
    """Request sizes (keys), their probabilities, and the mean inter-arrival time in µs (Poisson arrivals)."""

    sizes: tuple[int, ...]
    probs: tuple[float, ...]
    interarrival_us: float

    @classmethod
    def mice_elephant(
        cls, mice_keys: int, ratio: int, interarrival_us: float, elephant_keys: int = 100
    ) -> SizeMix:
        """`ratio` mice for every elephant (the paper's 9:1 and 5:1 mixes)."""
        p_e = 1.0 / (ratio + 1)
        return cls((mice_keys, elephant_keys), (1.0 - p_e, p_e), interarrival_us)

    @classmethod
    def from_requests(cls, sizes: npt.ArrayLike, arrivals_s: npt.ArrayLike) -> SizeMix:
        """The empirical mix of a request sequence (sizes in keys, arrival times in seconds)."""
        k = np.asarray(sizes, dtype=np.int64)
        t = np.asarray(arrivals_s, dtype=np.float64)
        if k.size == 0:
            raise ValueError("sizes: at least one request is needed")
        values, counts = np.unique(k, return_counts=True)
        span_us = float(t[-1] - t[0]) * 1e6 if t.size > 1 else 0.0
        ia = span_us / (t.size - 1) if t.size > 1 and span_us > 0 else math.inf
        probs = counts / counts.sum()
        return cls(tuple(int(v) for v in values), tuple(float(p) for p in probs), ia)

    @property
    def mean_keys(self) -> float:
        return sum(k * p for k, p in zip(self.sizes, self.probs, strict=True))


@dataclass(frozen=True, slots=True)
class Prediction:
    """The analyzer's prediction for one (L, B)."""

    mean_us: float
    mice_us: float
    elephant_us: float
    client_wait_us: float
    server_wait_us: float
    client_utilization: float
    server_utilization: float
    mean_merged: float
    max_chunks: int
    stable: bool


@dataclass(frozen=True, slots=True)
class ChiselLevels:
    """Chosen levels: chunk size L (`split_keys`), merge level B, and what the analyzer predicted for them."""

    split_keys: int
    merge: int
    elephant_threshold: int
    chunks: int
    query_threads: int
    predicted: Prediction
    batching: Prediction
    evaluated: int = field(default=0)

    def params(self) -> dict[str, int]:
        return {
            "split_keys": self.split_keys,
            "merge": self.merge,
            "elephant_threshold": self.elephant_threshold,
        }


def _erlang_c(servers: int, offered: float) -> float:
    """Probability of waiting in M/M/c with `offered` = λ/μ Erlangs (< servers)."""
    if offered <= 0.0:
        return 0.0
    term, total = 1.0, 1.0
    for i in range(1, servers):
        term *= offered / i
        total += term
    last = term * offered / servers
    rho = offered / servers
    tail = last / (1.0 - rho)
    return tail / (total + tail)


def _erlang_cdf(shape: int, rate: float, x: float) -> float:
    """P(Gamma(shape, rate) <= x) for an integer shape >= 1."""
    if x <= 0.0:
        return 0.0
    y = rate * x
    term, acc = 1.0, 1.0
    for i in range(1, shape):
        term *= y / i
        acc += term
    return max(0.0, 1.0 - math.exp(-y) * acc)


def _fork_join_wait(branches: int, rho: float, mean_wait: float) -> float:
    """E[max] of `branches` i.i.d. waits with P(W > x) = rho·exp(-x/θ), θ = mean_wait/rho.

    The max over the N ~ Bin(branches, rho) branches that wait is θ·H_N, so E = θ·Σ_k P(N >= k)/k
    (harmonic numbers; rho = 1 gives θ·H_branches).
    """
    if branches <= 1 or mean_wait <= 0.0 or rho <= 0.0:
        return max(0.0, mean_wait)
    rho = min(rho, 1.0)
    theta = mean_wait / rho
    pmf = [math.comb(branches, j) * rho**j * (1.0 - rho) ** (branches - j) for j in range(branches + 1)]
    total, tail = 0.0, 1.0 - pmf[0]
    for k in range(1, branches + 1):
        total += tail / k
        tail -= pmf[k]
    return theta * total


def _chunks(keys: int, split_keys: int) -> int:
    return max(1, math.ceil(keys / max(1, split_keys)))


def predict_mean_latency(
    mix: SizeMix,
    dep: MemcachedSetup,
    split_keys: int | None,
    merge: int,
    elephant_threshold: int = DEFAULT_ELEPHANT_THRESHOLD,
) -> Prediction:
    """Predicted mean latency (µs) of Chisel at chunk size `split_keys` (None: no split) and merge level B."""
    prof = dep.profile
    threads = dep.threads_for(mix)
    lam = 1.0 / mix.interarrival_us if mix.interarrival_us > 0 else math.inf
    big = max(mix.sizes) + 1
    L = big if split_keys is None else max(1, split_keys)
    B = max(1, merge)
    mice = [(k, p) for k, p in zip(mix.sizes, mix.probs, strict=True) if k <= elephant_threshold]
    eleph = [(k, p) for k, p in zip(mix.sizes, mix.probs, strict=True) if k > elephant_threshold]
    p_m = sum(p for _, p in mice)
    lam_m = lam * p_m
    k_m = sum(k * p for k, p in mice) / p_m if p_m > 0 else 0.0
    pc = dep.client_phase_us

    def merged_members(wait: float) -> tuple[float, list[float], float]:
        """Expected members in a group's first query, P(member j merged), E[Σ offsets of merged members]."""
        if B == 1 or lam_m <= 0.0:
            return 1.0, [], 0.0
        tau = wait + pc
        probs = [_erlang_cdf(j - 1, lam_m, tau) for j in range(2, B + 1)]
        offsets = sum((j - 1) / lam_m * _erlang_cdf(j, lam_m, tau) for j in range(2, B + 1))
        return 1.0 + sum(probs), probs, offsets

    wc = 0.0
    ws = 0.0
    rho_c = rho_s = 0.0
    m1 = 1.0
    offsets = 0.0
    stable = True
    for _ in range(_FIXED_POINT_ITERATIONS):
        m1, _probs, offsets = merged_members(wc)
        # query classes: (rate per µs, keys)
        classes: list[tuple[float, float]] = []
        ca2_weighted = 0.0
        for k, p in eleph:
            n = _chunks(k, L)
            classes.append((lam * p * n, k / n))
            # a thread sees the chunks of 1 in T/min(n, T) elephants: a cyclic thinning of a Poisson stream
            ca2_weighted += lam * p * n * min(n, threads) / threads
        if lam_m > 0:
            groups = lam_m / B
            classes.append((groups, k_m * m1))
            if B - m1 > 1e-12:
                classes.append((groups * (B - m1), k_m))
            ca2_weighted += groups * (1.0 + B - m1) / threads
        lam_q = sum(r for r, _ in classes)
        if lam_q <= 0.0 or not math.isfinite(lam_q):
            stable = lam_q == 0.0
            break
        # server / network layer: M/G/W per server
        ep = sum(r * prof.processing_us(k) for r, k in classes) / lam_q
        ep2 = sum(r * prof.processing_us(k) ** 2 for r, k in classes) / lam_q
        per_server = lam_q / dep.servers
        rho_s = per_server * ep / dep.worker_threads
        if rho_s >= 1.0:
            stable = False
            break
        cs2_p = max(0.0, ep2 / (ep * ep) - 1.0) if ep > 0 else 0.0
        ws = (
            _erlang_c(dep.worker_threads, per_server * ep) * ep / (dep.worker_threads * (1.0 - rho_s))
            * (1.0 + cs2_p) / 2.0
        )
        # client layer: the query thread is held for overhead + setup + the whole server/network round trip
        svc = [(r, pc + prof.network_us(k) + ws + prof.processing_us(k)) for r, k in classes]
        es = sum(r * s for r, s in svc) / lam_q
        es2 = sum(r * s * s for r, s in svc) / lam_q
        rho_c = lam_q * es / threads
        if rho_c >= 1.0:
            stable = False
            break
        cs2 = max(0.0, es2 / (es * es) - 1.0)
        # superposed per-thread arrival streams: mice round-robin (Erlang-T, ca² = 1/T), chunks of an
        # elephant spread over min(n, T) threads (ca² = min(n, T)/T)
        ca2 = ca2_weighted / lam_q
        new_wc = rho_c / (1.0 - rho_c) * (ca2 + cs2) / 2.0 * es
        if abs(new_wc - wc) < 1e-9:
            wc = new_wc
            break
        wc = 0.5 * wc + 0.5 * new_wc
    if not stable:
        inf = math.inf
        return Prediction(inf, inf, inf, inf, inf, rho_c, rho_s, m1, _max_chunks(eleph, L), False)

    def ts(keys: float) -> float:
        return prof.network_us(keys) + ws + prof.processing_us(keys)

    # mice: group head, merged followers (arrived `offset` later), unmerged followers (queue behind the head)
    mice_us = 0.0
    if lam_m > 0:
        q1 = k_m * m1
        head_and_merged = (wc + pc + ts(q1)) * m1 - offsets
        unmerged = B - m1
        d_head = wc + pc + ts(q1)
        tau = wc + pc
        resid = 0.0
        if unmerged > 1e-12 and d_head > tau:
            span = d_head - tau
            resid = span - (1.0 - math.exp(-lam_m * span)) / lam_m
        mice_us = (head_and_merged + unmerged * (wc + resid + pc + ts(k_m))) / B
    # elephants: fork-join over the chunks
    el_total = 0.0
    for k, p in eleph:
        n = _chunks(k, L)
        size = math.ceil(k / n)
        width = min(n, threads)
        rounds = math.ceil(n / threads)
        server_rounds = math.ceil(width / (dep.servers * dep.worker_threads))
        base = rounds * (pc + ts(size)) + (server_rounds - 1) * prof.processing_us(size)
        el_total += p * (base + _fork_join_wait(width, rho_c, wc))
    p_e = sum(p for _, p in eleph)
    el_us = el_total / p_e if p_e > 0 else 0.0
    mean = p_m * mice_us + el_total
    return Prediction(
        mean_us=mean,
        mice_us=mice_us,
        elephant_us=el_us,
        client_wait_us=wc,
        server_wait_us=ws,
        client_utilization=rho_c,
        server_utilization=rho_s,
        mean_merged=m1,
        max_chunks=_max_chunks(eleph, L),
        stable=True,
    )


def _max_chunks(eleph: Sequence[tuple[int, float]], split_keys: int) -> int:
    return max((_chunks(k, split_keys) for k, _ in eleph), default=1)


def merge_bound(mix: SizeMix, dep: MemcachedSetup, elephant_threshold: int, cap: int) -> int:
    """Largest merge level worth searching: 1 + the mice expected to reach a thread while the group's head
    waits and sets up its query under batching (the setup time bounds merging, §III-A), capped at `cap`."""
    base = predict_mean_latency(mix, dep, None, 1, elephant_threshold)
    wait = base.client_wait_us if math.isfinite(base.client_wait_us) else 10.0 * dep.client_phase_us + 1e3
    p_m = sum(p for k, p in zip(mix.sizes, mix.probs, strict=True) if k <= elephant_threshold)
    lam_m = p_m / mix.interarrival_us if mix.interarrival_us > 0 else 0.0
    return max(1, min(cap, 1 + math.ceil(lam_m * (wait + dep.client_phase_us))))


def grid_search(
    mix: SizeMix,
    dep: MemcachedSetup,
    elephant_threshold: int = DEFAULT_ELEPHANT_THRESHOLD,
    max_chunks: int | None = None,
    max_merge: int = DEFAULT_MAX_MERGE,
) -> ChiselLevels:
    """Chisel's analyzer: evaluate every chunk count 1..max_chunks (default 2 × query threads) for the largest
    elephant and merge levels 1..merge_bound; keep the lowest predicted mean (ties: fewer chunks, smaller B).
    """
    dep.validate()
    threads = dep.threads_for(mix)
    kmax = max(mix.sizes)
    has_elephants = kmax > elephant_threshold
    n_cap = max_chunks if max_chunks is not None else 2 * threads
    if has_elephants:
        Ls = sorted({math.ceil(kmax / n) for n in range(1, min(n_cap, kmax) + 1)}, reverse=True)
    else:
        Ls = [max(1, kmax)]
    b_cap = merge_bound(mix, dep, elephant_threshold, max_merge)
    batching = predict_mean_latency(mix, dep, None, 1, elephant_threshold)
    best: tuple[float, int, int] | None = None
    best_pred = batching
    evaluated = 0
    for L in Ls:
        for B in range(1, b_cap + 1):
            pred = predict_mean_latency(mix, dep, L, B, elephant_threshold)
            evaluated += 1
            if best is None or pred.mean_us < best[0] * (1.0 - 1e-9):
                best, best_pred = (pred.mean_us, L, B), pred
    assert best is not None
    _, L, B = best
    return ChiselLevels(
        split_keys=L,
        merge=B,
        elephant_threshold=elephant_threshold,
        chunks=_chunks(kmax, L) if has_elephants else 1,
        query_threads=threads,
        predicted=best_pred,
        batching=batching,
        evaluated=evaluated,
    )


def requests_from_long(
    request_id: npt.ArrayLike, ts: npt.ArrayLike
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Keys per request and arrival times (s) from the canonical long format (one row per key).

    A request's arrival is the earliest `ts` of its rows; requests come out in arrival order (ties: id).
    """
    rid = np.asarray(request_id, dtype=np.int64)
    t = np.asarray(ts, dtype=np.float64)
    if rid.shape != t.shape or rid.ndim != 1:
        raise ValueError(f"request_id and ts must be 1-d of one length, got {rid.shape} and {t.shape}")
    ids, inverse, counts = np.unique(rid, return_inverse=True, return_counts=True)
    first = np.full(ids.size, np.inf)
    np.minimum.at(first, inverse, t)
    order = np.lexsort((ids, first))
    return counts[order].astype(np.int64), first[order]
