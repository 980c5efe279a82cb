"""A Cassandra node's pauses, measured: the JVM's stop-the-world garbage collections over calibration's
intervals, as the model's stall process (`CassandraDeployment.stall_rate` / `stall_ms`, docs/model.md § Pauses).

**What is read.** Every `java.lang:type=GarbageCollector,*` MBean of the node's JVM: its `CollectionCount` (pauses
since the JVM started) and `CollectionTime` (their total, ms), at the start and at the end of the measured span;
their differences are the span's pauses and their time. Collectors whose work runs beside the application, not in
a pause — G1's `G1 Concurrent GC` (JDK 20+), ZGC's and Shenandoah's `Cycles` — are left out: their time is not a
stall. JMX gives totals only, so the pauses' lengths are their mean (the model's stalls all last it).

**The stall process.** kvsim's random stalls start as a Poisson process of `stall_rate` a second of non-stalled
time and last `stall_ms` each: the rate is the pauses over the span's time not paused, the length their time over
their number. The rate's 95 % interval is the Poisson count's exact (Garwood) one over that time. No pause in the
span: rate 0 (its interval's upper end says how rare a pause could still be), and the model replays none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Pauses", "gc_counters", "pauses_between"]

_GC = "java.lang:type=GarbageCollector,*"
#: A collector whose name holds one of these runs beside the application, not in a pause.
_CONCURRENT = ("Concurrent", "Cycles")


def gc_counters(jmx: Any) -> dict[str, tuple[float, float]]:
    """Each stop-the-world collector's (pauses, total pause ms) now, by MBean name, over `jmx` (a
    `kinds.cassandra.jmx.JmxSession`)."""
    out: dict[str, tuple[float, float]] = {}
    for name in sorted(jmx.names(_GC)):
        if any(c in name for c in _CONCURRENT):
            continue
        out[name] = (jmx.number(name, "CollectionCount"), jmx.number(name, "CollectionTime"))
    return out


@dataclass(frozen=True)
class Pauses:
    """The pauses of a span (module doc): their number and total ms over `seconds`, the stall rate a second of
    non-paused time with its 95 % interval, and the mean pause (None: no pause)."""

    count: int
    total_ms: float
    seconds: float
    rate_per_s: float
    interval: tuple[float, float]
    mean_ms: float | None
    collectors: tuple[str, ...]

    def as_input(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The `pauses` model input's value and its uncertainty."""
        return ({"rate_per_s": self.rate_per_s, "mean_ms": self.mean_ms, "count": self.count,
                 "seconds": self.seconds},
                {"rate_per_s": list(self.interval)})


def pauses_between(before: Mapping[str, tuple[float, float]], after: Mapping[str, tuple[float, float]],
                   seconds: float) -> Pauses:
    """The pauses between two `gc_counters` readings `seconds` apart (module doc). ValueError when the span is not
    positive or a counter went back (the JVM restarted between the readings)."""
    from scipy.stats import chi2

    if not seconds > 0:
        raise ValueError(f"a span of {seconds} s: the pauses need a positive one")
    count, total = 0.0, 0.0
    for name in sorted(set(before) & set(after)):
        dc, dt = after[name][0] - before[name][0], after[name][1] - before[name][1]
        if dc < 0 or dt < 0:
            raise ValueError(f"{name}: its counters went back (the node restarted while measured)")
        count, total = count + dc, total + dt
    n = round(count)
    running = seconds - total / 1e3
    if not running > 0:
        raise ValueError(f"{total:g} ms of pauses in {seconds:g} s: the node was paused throughout")
    lo = 0.0 if n == 0 else float(chi2.ppf(0.025, 2 * n)) / 2 / running
    hi = float(chi2.ppf(0.975, 2 * n + 2)) / 2 / running
    return Pauses(n, total, seconds, n / running, (lo, hi), total / n if n else None,
                  tuple(sorted(set(before) & set(after))))
