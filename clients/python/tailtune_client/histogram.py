"""Latency histograms: log-spaced buckets, mergeable (and subtractable) by adding counts, quantile estimates.

Bucket 0 holds latencies below `MIN_US` (1 µs); bucket i ≥ 1 holds [MIN_US·10^((i-1)/B), MIN_US·10^(i/B)) µs
with B = `BUCKETS_PER_DECADE` = 20 (each bucket ~12% wide, so a quantile estimate is within ~6% of the value
recorded); the last bucket (`LAST_BUCKET` = `BUCKETS - 1`) also holds everything from 10^8 µs (100 s) up. Two
histograms with the same scheme merge by adding counts bucket by bucket, whichever client or process recorded them.

This module is the one declaration of the scheme: the service (`control.observations`,
`control.verify`) imports it, and `LogHistogram.from_json` is the one reader of a histogram document —
strict, so what it accepts every reader can merge (`SchemeError` names the field otherwise).

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
    "LAST_BUCKET",
    "MAX_COUNT",
    "MAX_US",
    "MIN_US",
    "SCHEME",
    "SIZE_CLASSES",
    "HistogramJson",
    "LogHistogram",
    "SchemeError",
    "bucket_bounds",
    "bucket_mid_us",
    "checked_count",
    "size_class",
]

SCHEME = "log10"
BUCKETS_PER_DECADE = 20
MIN_US = 1.0
_DECADES = 8
BUCKETS = _DECADES * BUCKETS_PER_DECADE + 2
LAST_BUCKET = BUCKETS - 1
#: The largest count a document may hold (JSON's exact integers): counts of any number of documents stay exact.
MAX_COUNT = 2**53 - 1
#: The largest latency a document may hold (about 31 years): sums of any number of documents stay finite.
MAX_US = 1e15

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
    high = math.inf if index >= LAST_BUCKET else MIN_US * 10 ** (index / BUCKETS_PER_DECADE)
    return low, high


def bucket_mid_us(index: int) -> float:
    """The value a quantile estimate takes in bucket `index` (before clamping to the observed min/max): the
    geometric middle; bucket 0's middle, MIN_US / 2; the last bucket's low bound."""
    low, high = bucket_bounds(index)
    if index <= 0:
        return high / 2
    return math.sqrt(low * high) if math.isfinite(high) else low


class SchemeError(ValueError):
    """A histogram or observation document that does not follow the scheme; `field` is the path of the value."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field {field!r}: {problem}")
        self.field = field
        self.problem = problem


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def checked_count(v: Any, field: str) -> int:
    """`v` as a count: an integer in [0, MAX_COUNT] (SchemeError naming `field` otherwise)."""
    if not _is_int(v) or not 0 <= v <= MAX_COUNT:
        raise SchemeError(field, f"must be an integer from 0 to {MAX_COUNT}, got {_show(v)}")
    return int(v)


def _checked_us(v: Any, field: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= MAX_US:
        raise SchemeError(field, f"must be a number of µs from 0 to {MAX_US:g}, got {_show(v)}")
    return float(v)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


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
                return min(max(bucket_mid_us(i), self.min_us), self.max_us)
        return self.max_us

    def to_json(self) -> HistogramJson:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v / 1000.0, 6)

        empty = self.n == 0
        return {
            "scheme": SCHEME,
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
    def from_json(cls, doc: Any, field: str = "histogram") -> LogHistogram:
        """Back from `to_json()`, e.g. to merge histograms that several clients sent. Strict: the scheme must be
        this one, every bucket index in [0, LAST_BUCKET] (each at most once), counts integers that add up to
        `count`, `sum_us` and the observed min/max numbers in [0, MAX_US] consistent with the count (None when
        empty); the estimates (`p50_ms`, ...) are not read. `SchemeError` names the first field that is not."""
        if not isinstance(doc, Mapping):
            raise SchemeError(field, "must be an object (a histogram)")
        if doc.get("scheme", SCHEME) != SCHEME:
            raise SchemeError(f"{field}.scheme", f"must be {SCHEME!r}, got {_show(doc.get('scheme'))}")
        bpd = doc.get("buckets_per_decade", BUCKETS_PER_DECADE)
        if not _is_int(bpd) or bpd != BUCKETS_PER_DECADE:
            raise SchemeError(f"{field}.buckets_per_decade", f"must be {BUCKETS_PER_DECADE}, got {_show(bpd)}")
        low = doc.get("min_us", MIN_US)
        if isinstance(low, bool) or not isinstance(low, int | float) or low != MIN_US:
            raise SchemeError(f"{field}.min_us", f"must be {MIN_US:g}, got {_show(low)}")
        out = cls()
        pairs = doc.get("counts", [])
        if not isinstance(pairs, list) or len(pairs) > BUCKETS:
            raise SchemeError(f"{field}.counts", f"must be a list of at most {BUCKETS} [bucket, count] pairs")
        seen: set[int] = set()
        for k, pair in enumerate(pairs):
            where = f"{field}.counts[{k}]"
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise SchemeError(where, "must be a [bucket, count] pair")
            b, c = pair
            if not _is_int(b) or not 0 <= b <= LAST_BUCKET:
                raise SchemeError(where, f"bucket must be an integer from 0 to {LAST_BUCKET}, got {_show(b)}")
            if b in seen:
                raise SchemeError(where, f"bucket {b} is listed twice")
            seen.add(b)
            out.counts[b] = checked_count(c, where)
        out.n = checked_count(doc.get("count", 0), f"{field}.count")
        if sum(out.counts) != out.n:
            raise SchemeError(f"{field}.count", f"is {out.n} but the bucket counts add up to {sum(out.counts)}")
        out.sum_us = _checked_us(doc.get("sum_us", 0.0), f"{field}.sum_us")
        lo_v, hi_v = doc.get("min_observed_us"), doc.get("max_observed_us")
        if out.n == 0:
            for name, v in (("min_observed_us", lo_v), ("max_observed_us", hi_v)):
                if v is not None:
                    raise SchemeError(f"{field}.{name}", "must be null in an empty histogram")
            if out.sum_us != 0:
                raise SchemeError(f"{field}.sum_us", "must be 0 in an empty histogram")
            return out
        out.min_us = _checked_us(lo_v, f"{field}.min_observed_us")
        out.max_us = _checked_us(hi_v, f"{field}.max_observed_us")
        if out.min_us > out.max_us:
            raise SchemeError(f"{field}.min_observed_us", "must not exceed max_observed_us")
        slack = 1e-3 * (out.n + 1) + 1e-9 * out.sum_us  # to_json rounds the sum and min/max to 3 decimals
        if not out.n * out.min_us - slack <= out.sum_us <= out.n * out.max_us + slack:
            raise SchemeError(f"{field}.sum_us", "must lie between count x min_observed_us and count x "
                              "max_observed_us")
        return out
