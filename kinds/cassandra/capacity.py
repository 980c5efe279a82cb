"""What a read costs a Cassandra node, measured: the CPU each request and each partition read adds, the node's
cores, the background share of them — the capacity the model's servers must saturate at.

**Demand estimation by the utilization law.** Over an interval, a node's process CPU (JMX
`java.lang:type=OperatingSystem` `ProcessCpuTime`, ns) is its background work (GC, compaction, gossip, the
transport's threads) plus each request's cost plus each partition read's:

    cpu_cores(interval) = background + cpu_per_request × requests/s + cpu_per_read × partition reads/s

with requests the CQL statements the node executed as a coordinator (JMX `org.apache.cassandra.metrics:type=CQL`
`PreparedStatementsExecuted` + `RegularStatementsExecuted`, `Count`: exact) and partition reads the local reads of
the deployment's table (`type=Table,keyspace=K,scope=T,name=ReadLatency` `Count`: exact; every partition read
runs as one, inline or on the READ stage — not ReadStage's completed tasks, which miss the inline local reads).
The three unknowns are the least-squares fit over many intervals (`TAILTUNE_CALIBRATE_CAPACITY_INTERVAL_S` each)
of traffic at different mixes: idle intervals (the background), single-partition reads at
`TAILTUNE_CALIBRATE_CAPACITY_RATES` (requests and partitions alike), and `IN` reads of K partitions at the same
rates (K partitions a request: what separates a request's cost from a partition's). CPU ÷ reads at one low load
is not the demand: it holds the background. The traffic already on the node enters the same counters and the fit
alike (its statements and reads are counted; what it costs beyond them is background).

**Cores** are the node's JVM's `AvailableProcessors` (it follows the JVM's affinity and CPU quota): what the
node can spend at most; the capacity left to the trace's requests is `cores − background`, and the node's
single-partition request rate at saturation `(cores − background) / (cpu_per_request + cpu_per_read)`.

**A shared host** (`shared_host`): nodes whose addresses are all loopback addresses run on one machine, the
calibrating process's; where the contact node's JVM sees as many processors as that machine offers this process
(its affinity: the JVM is not pinned to a subset), the nodes' JVMs share those cores: `host.nodes_per_host` is the
nodes, `host.host_cores` the cores, and each node can spend at most host_cores / nodes_per_host of them. Otherwise
each node is taken to have its own `cores` (nodes_per_host 1): nodes on separate machines, or pinned JVMs, which
this cannot tell apart from separate machines.

**Intervals**: 95 % bootstrap over the intervals (400 resamples, the fit redone on each). The load is sent by the
Python driver, open loop at the phase's rate, from this process — its CPU is the client's, not the node's, and a
Python sender never brings a node near its limit, which the utilization law does not need. A fit whose slopes are
not resolved (the interval reaches 0) says so in a note, and its figures stay as measured.
"""

from __future__ import annotations

import ipaddress
import math
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BOOTSTRAP", "CapacityFit", "Interval", "fit_capacity", "local_cpus", "node_counters", "shared_host"]

BOOTSTRAP = 400
_OS = "java.lang:type=OperatingSystem"
_CQL = "org.apache.cassandra.metrics:type=CQL,name={}"


@dataclass(frozen=True)
class Interval:
    """One interval's differences of a node's counters: seconds, process CPU seconds, statements, partition
    reads; `phase` names the load it ran under."""

    phase: str
    seconds: float
    cpu_s: float
    requests: float
    reads: float


@dataclass(frozen=True)
class CapacityFit:
    """The fit (module doc): µs of CPU a request and a partition read add, the background in cores, the node's
    cores, each with its 95 % interval; `resolved` false when a slope's interval reaches 0."""

    cpu_per_request_us: float
    cpu_per_read_us: float
    background_cores: float
    cores: int
    intervals: Mapping[str, tuple[float, float]]
    n: int
    resolved: bool

    @property
    def requests_per_s(self) -> float | None:
        """Single-partition requests a second the node completes at saturation: (cores − background) over a
        request's and its one partition read's CPU; None when the fit gives no positive cost or no free core."""
        per = (self.cpu_per_request_us + self.cpu_per_read_us) * 1e-6
        free = self.cores - self.background_cores
        return free / per if per > 0 and free > 0 else None


def _ols(rows: Sequence[Interval]) -> tuple[float, float, float]:
    """(background cores, CPU s a request, CPU s a partition read), least squares over `rows`."""
    x = np.array([[1.0, r.requests / r.seconds, r.reads / r.seconds] for r in rows])
    y = np.array([r.cpu_s / r.seconds for r in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(coef[0]), float(coef[1]), float(coef[2])


def fit_capacity(rows: Sequence[Interval], cores: int, *, seed: int = 1) -> CapacityFit:
    """The utilization-law fit over `rows` (module doc). ValueError when the rows cannot separate the three
    unknowns (fewer than 4, or their mixes all alike)."""
    rows = [r for r in rows if r.seconds > 0]
    if len(rows) < 4:
        raise ValueError(f"{len(rows)} intervals: the fit needs at least 4")
    x = np.array([[1.0, r.requests / r.seconds, r.reads / r.seconds] for r in rows])
    if np.linalg.matrix_rank(x) < 3:
        raise ValueError("the intervals' mixes of requests and partition reads do not separate a request's cost "
                         "from a partition read's (idle, single- and multi-partition intervals are needed)")
    bg, per_req, per_read = _ols(rows)
    rng = random.Random(seed)
    boots: list[tuple[float, float, float]] = []
    for _ in range(BOOTSTRAP):
        sample = [rows[rng.randrange(len(rows))] for _ in rows]
        xs = np.array([[1.0, r.requests / r.seconds, r.reads / r.seconds] for r in sample])
        if np.linalg.matrix_rank(xs) < 3:
            continue
        boots.append(_ols(sample))

    def interval(i: int, scale: float) -> tuple[float, float]:
        values = sorted(b[i] * scale for b in boots)
        if not values:
            return (math.nan, math.nan)
        return (values[int(0.025 * (len(values) - 1))], values[math.ceil(0.975 * (len(values) - 1))])

    intervals = {"background_cores": interval(0, 1.0), "cpu_per_request_us": interval(1, 1e6),
                 "cpu_per_read_us": interval(2, 1e6)}
    resolved = all(lo > 0 for lo, _ in (intervals["cpu_per_request_us"], intervals["cpu_per_read_us"]))
    return CapacityFit(per_req * 1e6, per_read * 1e6, bg, int(cores), intervals, len(rows), resolved)


# ------------------------------------------------------------------------------------------------- a shared host


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def local_cpus() -> int:
    """The processors this process may run on (its affinity; the machine's count where affinity is not known)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def shared_host(addresses: Sequence[str], jvm_cores: int, local: int) -> tuple[dict[str, int], str]:
    """The host the nodes at `addresses` run on (module doc): `{"host_cores", "nodes_per_host"}` and how it was
    found, from the contact node JVM's `AvailableProcessors` (`jvm_cores`) and this process's processors
    (`local`)."""
    nodes = sorted(set(addresses))
    if nodes and all(_loopback(a) for a in nodes):
        if jvm_cores == local:
            return ({"host_cores": int(jvm_cores), "nodes_per_host": len(nodes)},
                    f"the {len(nodes)} node(s) {', '.join(nodes)} have loopback addresses: one host, this one, "
                    f"whose {local} processor(s) the contact node's JVM sees all of (AvailableProcessors "
                    f"{jvm_cores}): the nodes share them")
        return ({"host_cores": int(jvm_cores), "nodes_per_host": 1},
                f"the node(s) {', '.join(nodes)} have loopback addresses, but the contact node's JVM sees "
                f"{jvm_cores} of this host's {local} processor(s) (pinned or limited): each node is taken to have "
                "its own")
    return ({"host_cores": int(jvm_cores), "nodes_per_host": 1},
            f"the nodes' addresses are not all loopback ({len(nodes)} node(s)): each node is taken to be on its own "
            f"host, with the contact node JVM's {jvm_cores} AvailableProcessors")


# ----------------------------------------------------------------------------------------------- the node's counters


def node_counters(jmx: Any, keyspace: str, table: str) -> tuple[float, float, float]:
    """(process CPU s, statements executed, local partition reads of `keyspace.table`) now, over `jmx` (a
    `kinds.cassandra.jmx.JmxSession`)."""
    cpu = jmx.number(_OS, "ProcessCpuTime") / 1e9
    statements = sum(jmx.number(_CQL.format(n), "Count")
                     for n in ("PreparedStatementsExecuted", "RegularStatementsExecuted"))
    reads = jmx.number(f"org.apache.cassandra.metrics:type=Table,keyspace={keyspace},scope={table},name=ReadLatency",
                       "Count")
    return cpu, statements, reads


def measure(jmx: Any, keyspace: str, table: str, phases: Sequence[tuple[str, Callable[[], object] | None, float]],
            interval_s: float, intervals: int, *, stop_at: float | None = None,
            log: Callable[[str], None] = lambda _: None) -> list[Interval]:
    """Run each phase (name, the request to send or None for idle, rate a second) for `intervals` intervals of
    `interval_s`, open loop, and return every interval's counter differences."""
    out: list[Interval] = []
    for name, send, rate in phases:
        prev = node_counters(jmx, keyspace, table)
        t_prev = time.monotonic()
        next_send = t_prev
        gap = 1.0 / rate if send is not None and rate > 0 else math.inf
        for _ in range(intervals):
            end = t_prev + interval_s
            while True:
                now = time.monotonic()
                if stop_at is not None and now > stop_at:
                    raise TimeoutError("the capacity measurement ran past its time budget")
                if now >= end:
                    break
                if send is not None and now >= next_send:
                    send()
                    next_send += gap
                    continue
                time.sleep(max(0.0, min(end, next_send) - now))
            cur = node_counters(jmx, keyspace, table)
            t_cur = time.monotonic()
            out.append(Interval(name, t_cur - t_prev, cur[0] - prev[0], cur[1] - prev[1], cur[2] - prev[2]))
            prev, t_prev = cur, t_cur
        last = out[-1]
        log(f"capacity: {name}: {last.requests / last.seconds:.0f} statements/s, {last.reads / last.seconds:.0f} "
            f"partition reads/s, {last.cpu_s / last.seconds:.3f} cores")
    return out


def as_inputs(fit: CapacityFit, how: str) -> dict[str, dict[str, Any]]:
    """The fit as the calibrate result's `capacity` figures: each `{value, interval, source, how}`."""
    def one(value: float | None, interval: tuple[float, float] | None, what: str) -> dict[str, Any]:
        return {"value": value, "interval": list(interval) if interval is not None else None,
                "source": "calibrated", "how": f"{what}; {how}"}

    return {
        "cpu_per_read_us": one(fit.cpu_per_read_us, fit.intervals["cpu_per_read_us"],
                               "the slope of the node's process CPU over its local partition reads"),
        "cpu_per_request_us": one(fit.cpu_per_request_us, fit.intervals["cpu_per_request_us"],
                                  "the slope of the node's process CPU over the CQL statements it executed"),
        "background_cores": one(fit.background_cores, fit.intervals["background_cores"],
                                "the fit's intercept: the node's CPU with no statement and no read"),
        "cores": one(float(fit.cores), None, "the node JVM's AvailableProcessors (its affinity and CPU quota)"),
        "requests_per_s": one(fit.requests_per_s, None,
                              "(cores − background) / (cpu_per_request + cpu_per_read): single-partition requests a "
                              "second at saturation"),
    }
