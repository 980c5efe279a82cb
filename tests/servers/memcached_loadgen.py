"""Replay a mice/elephant workload on a real memcached with `batching` or Chisel split/merge, client-side (for the
tests and validation/chisel_memcached.py).

The client mirrors the simulator's memcached deployment kind: one dispatcher (the calling thread) releases
requests at their open-loop arrival times and places them on the FCFS queues of a pool of query threads in
round-robin order (`kvsim` semantics: elephants of more than `elephant_threshold` keys are split into
balanced chunks of at most `split_keys` keys on consecutive threads; `merge` consecutive mice share one
thread, which piggybacks the group members already waiting in its queue when it starts the query). Each
query thread owns one pymemcache connection and sends one `get k1 .. kK` per query. A request's latency
runs from its scheduled arrival (so dispatcher lag counts) to the return of its last chunk.

This is CPython: query threads share the GIL, so client-side work (building and parsing multigets) does not
run in parallel, unlike the paper's Go/C clients. validation/chisel_memcached.py reports what that means.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.memcached_profile import populate

__all__ = [
    "LoadgenResult",
    "QueryPlan",
    "mice_elephant_workload",
    "plan_queries",
    "run_loadgen",
]


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """One subrequest: its request, the thread queue it goes to, its keys' count and merge group (mice)."""

    request: int
    thread: int
    keys: int
    group: int | None


def mice_elephant_workload(
    n: int,
    mice_keys: int,
    ratio: int,
    interarrival_us: float,
    seed: int,
    elephant_keys: int = 100,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """`n` requests, on average `ratio` mice per elephant, Poisson arrivals (seconds from 0)."""
    rng = np.random.default_rng(seed)
    elephant = rng.random(n) < 1.0 / (ratio + 1)
    sizes = np.where(elephant, elephant_keys, mice_keys).astype(np.int64)
    gaps = rng.exponential(interarrival_us, n)
    gaps[0] = 0.0
    return sizes, np.cumsum(gaps) / 1e6


def plan_queries(
    sizes: npt.ArrayLike,
    policy: str,
    threads: int,
    split_keys: int | None = None,
    merge: int = 1,
    elephant_threshold: int = 50,
) -> list[list[QueryPlan]]:
    """The dispatcher's decisions for every request (same rules as `kvsim_core::memcached::DispatchState`)."""
    if policy not in ("batching", "chisel"):
        raise ValueError(f"policy: unknown memcached policy {policy!r} (batching, chisel)")
    if threads < 1 or merge < 1 or (split_keys is not None and split_keys < 1):
        raise ValueError("threads, merge and split_keys must be >= 1")
    nxt = 0
    group_id = 0
    open_group: tuple[int, int, int] | None = None  # (id, thread, members)
    plans: list[list[QueryPlan]] = []
    for i, k in enumerate(np.asarray(sizes, dtype=np.int64).tolist()):
        out: list[QueryPlan] = []
        if policy == "chisel" and k > elephant_threshold:
            n = max(1, min(k, -(-k // (split_keys or k))))
            base, rem = divmod(k, n)
            for j in range(n):
                out.append(QueryPlan(i, nxt, base + (1 if j < rem else 0), None))
                nxt = (nxt + 1) % threads
        elif policy == "chisel" and merge > 1:
            if open_group is None:
                open_group = (group_id, nxt, 0)
                group_id += 1
                nxt = (nxt + 1) % threads
            gid, th, count = open_group
            out.append(QueryPlan(i, th, k, gid))
            open_group = None if count + 1 >= merge else (gid, th, count + 1)
        else:
            out.append(QueryPlan(i, nxt, k, None))
            nxt = (nxt + 1) % threads
        plans.append(out)
    return plans


@dataclass
class LoadgenResult:
    """What one replay measured (latencies in ms from scheduled arrival to completion)."""

    policy: str
    params: dict[str, int]
    requests: int
    queries: int
    merged_queries: int
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_dispatch_lag_ms: float
    wall_s: float
    latencies_ms: npt.NDArray[np.float64] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "params": self.params,
            "requests": self.requests,
            "queries": self.queries,
            "merged_queries": self.merged_queries,
            "mean_ms": self.mean_ms,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "p99_ms": self.p99_ms,
            "mean_dispatch_lag_ms": self.mean_dispatch_lag_ms,
            "wall_s": self.wall_s,
        }


class _QueryThread(threading.Thread):
    def __init__(self, host: str, port: int, done: _Completion, keyspace: list[str]) -> None:
        super().__init__(daemon=True)
        from pymemcache.client.base import Client

        self.client = Client((host, port), connect_timeout=2.0, timeout=10.0, no_delay=True)
        self.cond = threading.Condition()
        self.queue: deque[tuple[QueryPlan, list[str]] | None] = deque()
        self.done = done
        self.keyspace = keyspace
        self.queries = 0
        self.merged = 0
        self.error: BaseException | None = None

    def put(self, item: tuple[QueryPlan, list[str]] | None) -> None:
        with self.cond:
            self.queue.append(item)
            self.cond.notify()

    def run(self) -> None:
        try:
            while True:
                with self.cond:
                    while not self.queue:
                        self.cond.wait()
                    head = self.queue.popleft()
                    if head is None:
                        return
                    members = [head]
                    if head[0].group is not None:
                        keep: deque[tuple[QueryPlan, list[str]] | None] = deque()
                        for item in self.queue:
                            if item is not None and item[0].group == head[0].group:
                                members.append(item)
                            else:
                                keep.append(item)
                        self.queue = keep
                keys = [k for _, ks in members for k in ks]
                got = self.client.get_many(keys)
                now = time.perf_counter()
                if len(got) < len(set(keys)):
                    raise RuntimeError(f"memcached returned {len(got)} of {len(set(keys))} keys")
                self.queries += 1
                self.merged += len(members) > 1
                for plan, _ in members:
                    self.done.finish(plan.request, now)
        except BaseException as exc:  # reported by run_loadgen
            self.error = exc
        finally:
            self.client.close()


class _Completion:
    def __init__(self, n: int) -> None:
        self.lock = threading.Lock()
        self.remaining = np.zeros(n, dtype=np.int64)
        self.finished = np.full(n, np.nan)

    def finish(self, request: int, now: float) -> None:
        with self.lock:
            self.remaining[request] -= 1
            if self.remaining[request] == 0:
                self.finished[request] = now


def run_loadgen(
    host: str,
    port: int,
    sizes: npt.ArrayLike,
    arrivals_s: npt.ArrayLike,
    policy: str,
    *,
    query_threads: int = 4,
    split_keys: int | None = None,
    merge: int = 1,
    elephant_threshold: int = 50,
    keyspace_size: int = 1000,
    value_size: int = 100,
    seed: int = 0,
    populate_keys: bool = True,
) -> LoadgenResult:
    """Replay requests (keys per request, arrival seconds from 0) against the memcached at `host`:`port` and
    measure latencies."""
    k = np.asarray(sizes, dtype=np.int64)
    t = np.asarray(arrivals_s, dtype=np.float64)
    if k.ndim != 1 or k.shape != t.shape or k.size == 0:
        raise ValueError("sizes and arrivals must be non-empty 1-d arrays of one length")
    if int(k.max()) > keyspace_size:
        raise ValueError(f"keyspace_size {keyspace_size} < the largest request ({int(k.max())} keys)")
    plans = plan_queries(k, policy, query_threads, split_keys, merge, elephant_threshold)
    keyspace = (
        populate(host, port, keyspace_size, value_size)
        if populate_keys
        else [f"tt:k:{i}" for i in range(keyspace_size)]
    )
    rng = np.random.default_rng(seed)
    request_keys = [[keyspace[j] for j in rng.choice(keyspace_size, int(n), replace=False)] for n in k]
    done = _Completion(k.size)
    for i, p in enumerate(plans):
        done.remaining[i] = len(p)
    workers = [_QueryThread(host, port, done, keyspace) for _ in range(query_threads)]
    for w in workers:
        w.start()
    lag = np.zeros(k.size)
    start = time.perf_counter() + 0.01
    for i, p in enumerate(plans):
        due = start + float(t[i] - t[0])
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        lag[i] = max(0.0, time.perf_counter() - due)
        offset = 0
        keys = request_keys[i]
        for plan in p:
            workers[plan.thread].put((plan, keys[offset : offset + plan.keys]))
            offset += plan.keys
    for w in workers:
        w.put(None)
    for w in workers:
        w.join(timeout=120)
    wall = time.perf_counter() - start
    errors = [w.error for w in workers if w.error is not None]
    if errors:
        raise RuntimeError(f"query thread failed: {errors[0]!r}") from errors[0]
    due_all = start + (t - t[0])
    lat = (done.finished - due_all) * 1e3
    if np.isnan(lat).any():
        raise RuntimeError(f"{int(np.isnan(lat).sum())} requests did not complete")
    params: dict[str, int] = {}
    if policy == "chisel":
        params = {"merge": merge, "elephant_threshold": elephant_threshold}
        if split_keys is not None:
            params["split_keys"] = split_keys
    return LoadgenResult(
        policy=policy,
        params=params,
        requests=int(k.size),
        queries=sum(w.queries for w in workers),
        merged_queries=sum(w.merged for w in workers),
        mean_ms=float(lat.mean()),
        p50_ms=float(np.percentile(lat, 50, method="inverted_cdf")),
        p95_ms=float(np.percentile(lat, 95, method="inverted_cdf")),
        p99_ms=float(np.percentile(lat, 99, method="inverted_cdf")),
        mean_dispatch_lag_ms=float(lag.mean() * 1e3),
        wall_s=wall,
        latencies_ms=lat,
    )
