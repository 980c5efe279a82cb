"""Server heterogeneity and variability, read/write mix and closed-loop clients.

- `ServerModel`: per-server speed factors (service time = demand / speed), C3-style time-varying slowdowns
  (`Slowdown`: every interval, a random subset of the servers is slowed by a factor for a duration) and
  stop-the-world stalls, at random (`stalls`) or on an explicit schedule (`stall_schedule`).
- `ClosedLoop`: N client threads, each issuing the next request (in workload order) when its previous one
  completed plus a think time.
- `write_flags`: which ops are writes (a write is served at every replica, answered by the first: ONE).

Model choices: docs/simulator-replicas.md § "Server speeds, writes, closed-loop clients".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvsim import _kvsim
from kvsim._kvsim import ParameterError
from kvsim.types import ServersInfo, SlowdownInfo, StallScheduleInfo

__all__ = ["THINK_DISTS", "WRITE_OPS", "ClosedLoop", "ServerModel", "Slowdown", "write_flags"]

THINK_DISTS = ("exponential", "fixed")
# Values of a dataset's `op` column that are writes (lower-cased); every other value is a read.
WRITE_OPS = frozenset(
    {
        "set",
        "add",
        "replace",
        "cas",
        "append",
        "prepend",
        "delete",
        "incr",
        "decr",
        "update",
        "insert",
        "write",
        "put",
        "upsert",
        "mutate",
    }
)


@dataclass(frozen=True)
class Slowdown:
    """Every `interval_ms`, a fraction of the servers (drawn from the seed) is `factor`× slower for `duration_ms`
    (default: the whole interval)."""

    interval_ms: float
    fraction: float
    factor: float
    duration_ms: float | None = None

    def native(self) -> tuple[int, float, float, int]:
        """(interval ns, fraction, factor, duration ns) as the binding takes it."""
        dur = self.interval_ms if self.duration_ms is None else self.duration_ms
        return (
            _ns("slowdown_interval_ms", self.interval_ms, minimum=1e-6),
            float(self.fraction),
            float(self.factor),
            _ns("slowdown_duration_ms", dur, minimum=1e-6),
        )

    def to_json(self) -> SlowdownInfo:
        return {
            "interval_ms": self.interval_ms,
            "fraction": self.fraction,
            "factor": self.factor,
            "duration_ms": self.interval_ms if self.duration_ms is None else self.duration_ms,
        }


def _ns(name: str, ms: float, *, minimum: float = 0.0) -> int:
    if not (np.isfinite(ms) and ms >= minimum):
        raise ParameterError(f"parameter '{name}' = {ms} is out of range: valid ≥ {minimum} ms")
    return round(ms * 1e6)


@dataclass(frozen=True)
class ServerModel:
    """Per-server speed factors (None = all 1) and optional slowdowns."""

    speeds: tuple[float, ...] | None = None
    slowdown: Slowdown | None = None
    #: Transient stop-the-world stalls: (stalls per second per server, stall length ms); None = none.
    stalls: tuple[float, float] | None = None
    #: Stalls on an explicit schedule instead: (server index, start ms, end ms) each, on the replay's clock (0 =
    #: the workload's time origin: the first request's arrival with a trace's own timestamps, the replay's start
    #: with Poisson arrivals); any order, no overlap on one server; None = none. Not with `stalls`.
    stall_schedule: tuple[tuple[int, float, float], ...] | None = None

    @classmethod
    def slow_servers(cls, servers: int, n: int, factor: float, slowdown: Slowdown | None = None) -> ServerModel:
        """`n` servers `factor`× slower (speed 1/factor), spread evenly over the ring."""
        return cls(speeds=tuple(_kvsim.slow_server_speeds(servers, n, float(factor))), slowdown=slowdown)

    def is_default(self) -> bool:
        return (
            (self.speeds is None or all(s == 1.0 for s in self.speeds))
            and self.slowdown is None
            and self.stalls is None
            and not self.stall_schedule
        )

    def stalls_native(self) -> tuple[float, int] | None:
        """The stalls as the binding takes them: (per s per server, ns)."""
        if self.stalls is None:
            return None
        rate, ms = self.stalls
        if not (rate >= 0.0 and ms >= 0.0):
            raise ParameterError(f"stalls ({rate}, {ms}): rate and length must be ≥ 0")
        return float(rate), round(ms * 1e6)

    def stall_schedule_native(self) -> list[tuple[int, int, int]] | None:
        """The schedule as the binding takes it: (server, start ns, end ns) each (times rounded to whole ns)."""
        if self.stall_schedule is None:
            return None
        out = []
        for i, (server, start, end) in enumerate(self.stall_schedule):
            if not (isinstance(server, int) and server >= 0):
                raise ParameterError(f"parameter 'stall_schedule[{i}].server' = {server} is out of range: valid ≥ 0")
            out.append((server, _ns(f"stall_schedule[{i}].start_ms", start), _ns(f"stall_schedule[{i}].end_ms", end)))
        return out

    def speeds_array(self) -> npt.NDArray[np.float64] | None:
        """The speed factors as the binding takes them (None = all 1)."""
        return None if self.speeds is None else np.ascontiguousarray(self.speeds, dtype=np.float64)

    def capacity_factor(self, servers: int, span_ms: tuple[float, float] | None = None) -> float:
        """Time-averaged capacity relative to `servers` servers at speed 1 (validates the model). A stall
        schedule's stalled fraction is taken over `span_ms` = (from, to) on the replay's clock; None = the
        schedule's own span (0 to its last end)."""
        slowdown = None if self.slowdown is None else self.slowdown.native()
        span = None if span_ms is None else (_ns("span_ms", span_ms[0]), _ns("span_ms", span_ms[1]))
        return float(
            _kvsim.capacity_factor(
                servers, server_speeds=self.speeds_array(), slowdown=slowdown, stalls=self.stalls_native(),
                stall_schedule=self.stall_schedule_native(), span_ns=span,
            )
        )

    def to_json(self, servers: int, capacity_factor: float | None = None) -> ServersInfo:
        """What the model is, with `capacity_factor` (the replay's; None: `capacity_factor(servers)`)."""
        cf = self.capacity_factor(servers) if capacity_factor is None else capacity_factor
        out: ServersInfo = {"capacity_factor": cf}
        if self.speeds is not None:
            out["speeds"] = list(self.speeds)
            out["slow_servers"] = sum(1 for s in self.speeds if s < 1.0)
        if self.slowdown is not None:
            out["slowdown"] = self.slowdown.to_json()
        if self.stalls is not None:
            out["stalls"] = {"rate_per_s": self.stalls[0], "ms": self.stalls[1]}
        if self.stall_schedule is not None:
            sched: StallScheduleInfo = {
                "intervals": len(self.stall_schedule),
                "servers": sorted({int(s) for s, _, _ in self.stall_schedule}),
                "stalled_ms": float(sum(e - a for _, a, e in self.stall_schedule)),
                "first_ms": min((float(a) for _, a, _ in self.stall_schedule), default=0.0),
                "last_ms": max((float(e) for _, _, e in self.stall_schedule), default=0.0),
            }
            out["stall_schedule"] = sched
        return out


@dataclass(frozen=True)
class ClosedLoop:
    """`threads` client threads with a think time of mean `think_ms` (exponential or fixed) between a response
    and the thread's next request."""

    threads: int
    think_ms: float = 0.0
    think_dist: str = "exponential"

    def native(self) -> tuple[int, int, str]:
        """(threads, mean think time ns, distribution) as the binding takes it (validates)."""
        if self.threads < 1:
            raise ParameterError(f"parameter 'threads' = {self.threads} is out of range: valid ≥ 1")
        if self.think_dist not in THINK_DISTS:
            raise ParameterError(f"parameter 'think_dist' = {self.think_dist!r} is out of range: valid {THINK_DISTS}")
        return int(self.threads), _ns("think_ms", self.think_ms), self.think_dist


def write_flags(
    n_ops: int,
    *,
    write_fraction: float | None = None,
    ops: Sequence[str] | npt.NDArray[np.str_] | npt.NDArray[np.object_] | None = None,
    seed: int = 0,
) -> npt.NDArray[np.bool_]:
    """Per-op write flags: from an `op` column (values in WRITE_OPS, case-insensitive, are writes) or, with
    `write_fraction`, each op independently with that probability (numpy PCG64 seeded by (seed, 0x57)).
    With both, the `op` column wins."""
    if ops is not None:
        arr = np.char.lower(np.asarray(ops, dtype=str))
        if arr.shape != (n_ops,):
            raise ParameterError(f"parameter 'ops' has {arr.size} values for {n_ops} ops")
        return np.isin(arr, sorted(WRITE_OPS))
    if write_fraction is None:
        return np.zeros(n_ops, dtype=np.bool_)
    if not (0.0 <= write_fraction <= 1.0):
        raise ParameterError(f"parameter 'write_fraction' = {write_fraction} is out of range: valid [0, 1]")
    rng = np.random.default_rng([seed, 0x57])
    return rng.random(n_ops) < write_fraction
