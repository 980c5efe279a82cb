"""Latency histograms: log-spaced buckets, mergeable (and subtractable) by adding counts, quantile estimates.

Bucket 0 holds latencies below `MIN_US` (1 µs); bucket i ≥ 1 holds [MIN_US·10^((i-1)/B), MIN_US·10^(i/B)) µs
with B = `BUCKETS_PER_DECADE` = 20 (each bucket ~12% wide, so a quantile estimate is within ~6% of the value
recorded); the last bucket (index `BUCKETS - 1`) also holds everything from 10^8 µs (100 s) up. Two histograms
with the same scheme merge by adding counts bucket by bucket, whichever client or process recorded them.

Requests are classed by keys per request (`size_class`): `1`, `2-10`, `11-50`, `51+`. The classes are fixed
(they do not move with a config's elephant threshold), so histograms of different versions stay comparable; the
default elephant threshold of the simulator (50 keys) is the boundary of the last class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = [
    "BUCKETS",
    "BUCKETS_PER_DECADE",
    "MIN_US",
    "SIZE_CLASSES",
    "HistogramJson",
    "LogHistogram",
    "size_class",
]

BUCKETS_PER_DECADE = 20
MIN_US = 1.0
_DECADES = 8
BUCKETS = _DECADES * BUCKETS_PER_DECADE + 2

#: (name, smallest, largest keys per request; None = no upper bound)
SIZE_CLASSES: tuple[tuple[str, int, int | None], ...] = (
    ("1", 1, 1),
    ("2-10", 2, 10),
    ("11-50", 11, 50),
    ("51+", 51, None),
)


def size_class(keys: int) -> str:
    """The size class of a request of `keys` keys."""
    if keys <= 1:
        return "1"
    if keys <= 10:
        return "2-10"
    if keys <= 50:
        return "11-50"
    return "51+"


def bucket_of(us: float) -> int:
    if us < MIN_US:
        return 0
    return min(BUCKETS - 1, 1 + math.floor(math.log10(us / MIN_US) * BUCKETS_PER_DECADE))


def bucket_bounds(index: int) -> tuple[float, float]:
    """[low, high) of bucket `index` in µs (bucket 0: [0, MIN_US); the last bucket's high is infinite)."""
    if index <= 0:
        return 0.0, MIN_US
    low = MIN_US * 10 ** ((index - 1) / BUCKETS_PER_DECADE)
    high = math.inf if index >= BUCKETS - 1 else MIN_US * 10 ** (index / BUCKETS_PER_DECADE)
    return low, high


class HistogramJson(TypedDict):
    """A histogram as JSON: the scheme, totals, sparse counts `[[bucket index, count], ...]`, and estimates."""

    scheme: str
    buckets_per_decade: int
    min_us: float
    count: int
    sum_us: float
    min_observed_us: float | None
    max_observed_us: float | None
    counts: list[list[int]]
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    mean_ms: float | None


class LogHistogram:
    """Counts per log-spaced bucket plus count, sum, min and max. Not thread-safe: callers hold a lock."""

    __slots__ = ("counts", "max_us", "min_us", "n", "sum_us")

    def __init__(self) -> None:
        self.counts = [0] * BUCKETS
        self.n = 0
        self.sum_us = 0.0
        self.min_us = math.inf
        self.max_us = 0.0

    def record(self, us: float) -> None:
        self.counts[bucket_of(us)] += 1
        self.n += 1
        self.sum_us += us
        self.min_us = min(self.min_us, us)
        self.max_us = max(self.max_us, us)

    def merge(self, other: LogHistogram) -> None:
        """Add `other`'s observations to this one."""
        for i, c in enumerate(other.counts):
            if c:
                self.counts[i] += c
        self.n += other.n
        self.sum_us += other.sum_us
        self.min_us = min(self.min_us, other.min_us)
        self.max_us = max(self.max_us, other.max_us)

    def subtract(self, other: LogHistogram) -> None:
        """Remove `other`'s observations (a snapshot taken from this one earlier). min/max stay as they were."""
        for i, c in enumerate(other.counts):
            if c:
                self.counts[i] = max(0, self.counts[i] - c)
        self.n = max(0, self.n - other.n)
        self.sum_us = max(0.0, self.sum_us - other.sum_us)

    def copy(self) -> LogHistogram:
        out = LogHistogram()
        out.merge(self)
        return out

    def quantile_us(self, q: float) -> float | None:
        """Nearest-rank estimate: the bucket of the ceil(q·n)-th value, its geometric middle, clamped to the
        observed min and max. None when empty."""
        if self.n == 0:
            return None
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                low, high = bucket_bounds(i)
                mid = low / 2 if i == 0 else (math.sqrt(low * high) if math.isfinite(high) else low)
                return min(max(mid, self.min_us), self.max_us)
        return self.max_us

    def to_json(self) -> HistogramJson:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v / 1000.0, 6)

        empty = self.n == 0
        return {
            "scheme": "log10",
            "buckets_per_decade": BUCKETS_PER_DECADE,
            "min_us": MIN_US,
            "count": self.n,
            "sum_us": round(self.sum_us, 3),
            "min_observed_us": None if empty else round(self.min_us, 3),
            "max_observed_us": None if empty else round(self.max_us, 3),
            "counts": [[i, c] for i, c in enumerate(self.counts) if c],
            "p50_ms": ms(self.quantile_us(0.50)),
            "p95_ms": ms(self.quantile_us(0.95)),
            "p99_ms": ms(self.quantile_us(0.99)),
            "mean_ms": None if empty else ms(self.sum_us / self.n),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LogHistogram:
        """Back from `to_json()` (same scheme required), e.g. to merge histograms that several clients sent."""
        if doc.get("scheme") != "log10" or doc.get("buckets_per_decade") != BUCKETS_PER_DECADE:
            raise ValueError("histogram: unknown scheme (want log10 with 20 buckets per decade)")
        out = cls()
        for i, c in doc["counts"]:
            out.counts[int(i)] += int(c)
        out.n = int(doc["count"])
        out.sum_us = float(doc["sum_us"])
        if doc.get("min_observed_us") is not None:
            out.min_us = float(doc["min_observed_us"])
            out.max_us = float(doc["max_observed_us"])
        return out
