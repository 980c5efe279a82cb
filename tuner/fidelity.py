"""The statistics of a live replay: what the cluster showed between configs, with its interval, and whether the
model ranks the configs as the cluster does.

A live replay drives a dataset's requests at a real cluster under several configs (arms). **Concurrent arms**
(settings one table or one client can carry, e.g. twin tables per `speculative_retry` value) share one request
stream: requests are dealt to the arms at random in short time blocks, so every arm meets the same cluster at
the same moment. **Alternating arms** (cluster-wide settings) cannot run at once and alternate whole runs in ABBA
order. Latencies arrive as HDR-style histograms: per arm, per block of 15–30 s, the count of requests in each
latency bucket (`BlockHistograms`).

**Quantiles from buckets.** Bucket j holds the latencies in (upper[j−1], upper[j]] µs (the first bucket starts at
0). The q-quantile of N requests is the value at rank q·N in the merged counts, found in the first non-empty
bucket whose cumulative count reaches q·N and linearly interpolated inside it, as if the bucket's requests were
spread evenly between its edges (the rule of Prometheus' `histogram_quantile`). Its error is at most the width
of one bucket: 1 % of the value for an HDR histogram at two significant digits.

**The observed difference, concurrent arms: a paired block bootstrap** (`compare_concurrent`). Blocks are the
unit: latencies inside a block are correlated (a queue, a compaction, a GC pause lasts seconds), blocks of
15–30 s much less so. A resample draws n block indices with replacement, the **same indices for both arms**
(block b of A and of B met the same cluster at the same moment: what drifts, a compaction or a neighbour's
load, moves both, and pairing cancels it), merges each arm's resampled blocks and recomputes its quantile; the
difference is B/A − 1 in %, and the interval the percentile interval of the resampled differences (`level`,
95 % by default; `resamples` 2,000; the seed explicit). Fewer than `min_blocks` (20) blocks, blocks shorter than
`min_block_s` (15 s), or a block in which an arm served no request: refused, with the reason, not estimated.

**Alternating arms: ABBA pairs** (`compare_alternating`). A bootstrap over 3 runs has 10 distinct resamples and
says little, so the runs are taken two at a time in their order (AB, BA, AB, …: in ABBA order a linear drift
adds to one pair what it takes from the next), each pair gives the log-ratio ln(q_B/q_A) of its two runs'
quantiles, and the interval is the Student-t interval of the mean log-ratio over the m pairs (m − 1 degrees of
freedom), reported as exp(·) − 1 in %. Fewer than 2 pairs: refused.

**Measured error rates** (`error_rates` in tests/tuner/test_fidelity.py, which states the command: two arms on
one simulated machine, 30 blocks of 15 s with 1,000 requests per arm each, latencies 0.5 ms + 1 ms × Lomax(2.5)
(a heavy tail) times a block-level drift exp(z), z an AR(1) series with lag-1 correlation 0.6 and sd 0.3 shared
by the arms; 1,000 resamples, 95 % level): the paired block bootstrap's false-positive rate on p99 was 4.7 %
(94 of 2,000 A/A replays; Wilson 95 % interval 3.9–5.7 %); its power was 100 % on a +20 % p99 shift (1,000 of
1,000 replays) and 29.3 % on a +5 % one; an unpaired resample of the same data (each arm's blocks drawn
independently) gave intervals 2.4 times as wide, since the drift moves both arms and only pairing cancels it.

**The gate** (`gate`): a candidate is published only if the real difference is not worse than `max_worse_pct`
(5 % by default): the interval's upper end below it passes, its lower end above it refuses (shown worse), an
interval across it, a refused comparison or a run shorter than `min_duration_s` is inconclusive.

**The model against the cluster** (`fidelity`, pooled over every replay of a deployment): for each compared
pair whose interval resolves the difference (excludes 0), whether the model's predicted difference has the same
sign (k of m, with a Wilson or Clopper–Pearson interval); the regret of the model's pick (its observed figure
against the observed best, in %); each pair's predicted log-ratio minus the observed one; per config, predicted
against observed p50/p95/p99 (predicted/observed − 1).

**Interference** (`interference`): the arms share the cluster, so an arm that reads more (a speculative retry
`ALWAYS` reads a second replica for every request) loads the others' replicas too. Given each arm's reads on the
cluster and the part of them that is extra, each arm's share of the cluster's reads, and a flag when an arm's
extra reads exceed `max_extra_share_pct` (5 %) of them: the observed differences are then those of configs
sharing a cluster so loaded, not of each config alone.

Everything here is pure computation on numpy arrays (the t and beta quantiles are computed here, no scipy);
every result is a frozen dataclass whose `as_dict()` is plain JSON-able data with fixed keys.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "METRICS",
    "Agreement",
    "ArmLoad",
    "BlockHistograms",
    "Comparison",
    "ConfigFidelity",
    "Fidelity",
    "GateVerdict",
    "Interference",
    "PairFidelity",
    "PickRegret",
    "Quantiles",
    "ReplayEvidence",
    "Run",
    "arm_quantiles",
    "clopper_pearson_interval",
    "compare_alternating",
    "compare_concurrent",
    "fidelity",
    "gate",
    "histogram_quantiles",
    "interference",
    "observed_quantiles",
    "wilson_interval",
]

#: The reported metrics and their quantiles.
METRICS: Mapping[str, float] = {"p50": 0.50, "p95": 0.95, "p99": 0.99}
#: Defaults: the fewest blocks a bootstrap takes, the shortest block, the resamples, the fewest ABBA pairs.
MIN_BLOCKS = 20
MIN_BLOCK_S = 15.0
RESAMPLES = 2000
MIN_PAIRS = 2
#: The gate's defaults: the largest tolerated worsening (upper end of the interval) and the shortest run.
MAX_WORSE_PCT = 5.0
MIN_DURATION_S = MIN_BLOCKS * MIN_BLOCK_S
#: The interference flag's default: an arm's extra reads above this share of the cluster's reads.
MAX_EXTRA_SHARE_PCT = 5.0
#: Resamples merged at once (bounds the memory of a bootstrap to CHUNK × buckets per arm).
_CHUNK = 500

FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------------------------------- the input


@dataclass(frozen=True, eq=False)
class BlockHistograms:
    """One arm's latencies in one run, per block: `counts[b, j]` requests of block b whose latency fell in bucket
    j, (upper_us[j−1], upper_us[j]] µs (bucket 0 from 0). `upper_us` strictly increasing, positive and finite;
    `counts` non-negative integers, blocks × buckets; every block lasts `block_s` seconds. Arrays are copied
    and made read-only."""

    upper_us: npt.NDArray[np.floating[Any]]
    counts: npt.NDArray[np.integer[Any]]
    block_s: float

    def __post_init__(self) -> None:
        upper = np.array(self.upper_us, dtype=np.float64)
        raw = np.asarray(self.counts)
        if raw.ndim == 1:
            raw = raw[None, :]
        if upper.ndim != 1 or upper.size == 0 or not np.all(np.isfinite(upper)) or upper[0] <= 0 \
                or np.any(np.diff(upper) <= 0):
            raise ValueError("upper_us must be a non-empty, strictly increasing list of positive finite bounds")
        if raw.ndim != 2 or raw.shape[1] != upper.size:
            raise ValueError(f"counts must be blocks × {upper.size} buckets, got shape {raw.shape}")
        if raw.size and (not np.all(np.isfinite(raw)) or np.any(raw < 0) or np.any(raw != np.floor(raw))):
            raise ValueError("counts must be non-negative integers")
        if not (math.isfinite(self.block_s) and self.block_s > 0):
            raise ValueError("block_s must be a positive number of seconds")
        counts = raw.astype(np.int64)
        upper.setflags(write=False)
        counts.setflags(write=False)
        object.__setattr__(self, "upper_us", upper)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "block_s", float(self.block_s))

    @property
    def blocks(self) -> int:
        return int(self.counts.shape[0])

    @property
    def requests(self) -> int:
        return int(self.counts.sum())

    @property
    def duration_s(self) -> float:
        return self.blocks * self.block_s

    def merged(self) -> npt.NDArray[np.int64]:
        """The counts of every block together, per bucket."""
        return np.asarray(self.counts.sum(axis=0), dtype=np.int64)

    def merge_blocks(self, k: int) -> BlockHistograms:
        """Every `k` consecutive blocks as one block of k × `block_s` (a trailing remainder of fewer than k blocks
        is dropped): to bring short blocks up to the bootstrap's 15–30 s."""
        if k < 1:
            raise ValueError("k must be at least 1")
        n = self.blocks // k
        grouped = self.counts[: n * k].reshape(n, k, -1).sum(axis=1)
        return BlockHistograms(self.upper_us, grouped, self.block_s * k)


@dataclass(frozen=True)
class Run:
    """One whole run of an alternating (cluster-wide) config: its arm's name and its histograms."""

    arm: str
    histograms: BlockHistograms


@dataclass(frozen=True)
class Quantiles:
    """p50/p95/p99 in ms (observed, with the requests they come from; or predicted, `requests` None)."""

    p50_ms: float
    p95_ms: float
    p99_ms: float
    requests: int | None = None

    def value(self, metric: str) -> float:
        _check_metric(metric)
        return float(getattr(self, f"{metric}_ms"))

    def as_dict(self) -> dict[str, Any]:
        return {"p50_ms": self.p50_ms, "p95_ms": self.p95_ms, "p99_ms": self.p99_ms, "requests": self.requests}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Quantiles:
        """The inverse of `as_dict` (and the reader of a report's `observed`/`predicted` entries): a missing or
        null quantile (a stored NaN) is NaN; `requests` is optional. ValueError naming the key that is not a
        number."""
        values = []
        for metric in METRICS:
            v = data.get(f"{metric}_ms")
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise ValueError(f"{metric}_ms must be a number or null, got {v!r}")
            values.append(math.nan if v is None else float(v))
        requests = data.get("requests")
        if requests is not None and (isinstance(requests, bool) or not isinstance(requests, int)):
            raise ValueError(f"requests must be an integer or null, got {requests!r}")
        return cls(values[0], values[1], values[2], requests)


def _check_metric(metric: str) -> float:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    return METRICS[metric]


# --------------------------------------------------------------------------------------- quantiles from buckets


def histogram_quantiles(upper_us: npt.ArrayLike, counts: npt.ArrayLike, q: float) -> FloatArray:
    """The q-quantile in µs of each row of `counts` (rows × buckets, or one row) by the module's interpolation
    rule: rank q·N, the first non-empty bucket whose cumulative count reaches it, linear inside the bucket.
    NaN for a row without requests."""
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must be in [0, 1]")
    upper = np.asarray(upper_us, dtype=np.float64)
    c = np.atleast_2d(np.asarray(counts, dtype=np.float64))
    lower = np.concatenate(([0.0], upper[:-1]))
    total = c.sum(axis=1)
    cum = np.cumsum(c, axis=1)
    rank = q * total
    hit = (cum >= rank[:, None]) & (c > 0)
    j = hit.argmax(axis=1)
    rows = np.arange(c.shape[0])
    inside = c[rows, j]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.clip((rank - (cum[rows, j] - inside)) / inside, 0.0, 1.0)
    out = lower[j] + (upper[j] - lower[j]) * frac
    out[total <= 0] = np.nan
    return np.asarray(out, dtype=np.float64)


def arm_quantiles(hist: BlockHistograms) -> Quantiles:
    """The arm's observed p50/p95/p99 in ms from its merged blocks (NaN without requests)."""
    merged = hist.merged()
    v = [float(histogram_quantiles(hist.upper_us, merged, q)[0]) / 1000.0 for q in METRICS.values()]
    return Quantiles(v[0], v[1], v[2], hist.requests)


def observed_quantiles(source: Mapping[str, BlockHistograms] | Sequence[Run]) -> dict[str, Quantiles]:
    """Each config's observed quantiles: of its blocks (concurrent arms, by name) or of all its runs merged
    (alternating runs; runs of one arm must share their bucket bounds)."""
    if isinstance(source, Mapping):
        return {name: arm_quantiles(h) for name, h in source.items()}
    by_arm: dict[str, list[BlockHistograms]] = {}
    for r in source:
        by_arm.setdefault(r.arm, []).append(r.histograms)
    out = {}
    for arm, hists in by_arm.items():
        if any(not np.array_equal(h.upper_us, hists[0].upper_us) for h in hists):
            raise ValueError(f"the runs of {arm!r} must share their bucket bounds")
        merged = np.vstack([h.counts for h in hists])
        out[arm] = arm_quantiles(BlockHistograms(hists[0].upper_us, merged, hists[0].block_s))
    return out


# ------------------------------------------------------------------------------------------------ comparisons


@dataclass(frozen=True)
class Comparison:
    """The observed difference of `candidate` against `baseline` on `metric`: `diff_pct` = 100 (B/A − 1) with its
    `interval_pct` at `level`; `reason` says why it was refused (then the estimates are None). `blocks` (the
    concurrent design) or `pairs` (the alternating one) is what the interval rests on; `duration_s` the time
    of the replay it covers."""

    baseline: str
    candidate: str
    metric: str
    design: Literal["concurrent", "alternating"]
    method: str
    blocks: int | None
    pairs: int | None
    duration_s: float
    level: float
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    diff_pct: float | None = None
    interval_pct: tuple[float, float] | None = None
    resamples: int | None = None
    seed: int | None = None
    reason: str | None = None

    @property
    def refused(self) -> bool:
        return self.reason is not None

    @property
    def resolved(self) -> bool:
        """The interval excludes 0: the cluster told the two configs apart."""
        if self.interval_pct is None:
            return False
        lo, hi = self.interval_pct
        return lo > 0.0 or hi < 0.0

    @property
    def log_ratio(self) -> float | None:
        """ln(B/A) of the estimate (ln(1 + diff_pct/100))."""
        if self.diff_pct is None or not self.diff_pct > -100.0:
            return None
        return math.log1p(self.diff_pct / 100.0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline, "candidate": self.candidate, "metric": self.metric, "design": self.design,
            "method": self.method, "blocks": self.blocks, "pairs": self.pairs, "duration_s": self.duration_s,
            "level": self.level, "baseline_ms": self.baseline_ms, "candidate_ms": self.candidate_ms,
            "diff_pct": self.diff_pct,
            "interval_pct": list(self.interval_pct) if self.interval_pct is not None else None,
            "resolved": self.resolved, "resamples": self.resamples, "seed": self.seed, "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        """The inverse of `as_dict` (its derived `resolved` is recomputed, not read): a stored comparison read back.
        ValueError naming the key that is missing or of the wrong type."""

        def num(key: str, *, optional: bool = True) -> float | None:
            v = data.get(key)
            if v is None and optional:
                return None
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError(f"comparison {key} must be a number{' or null' if optional else ''}, got {v!r}")
            return float(v)

        def whole(key: str) -> int | None:
            v = data.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise ValueError(f"comparison {key} must be an integer or null, got {v!r}")
            return v

        def text(key: str, *, optional: bool = False) -> str | None:
            v = data.get(key)
            if v is None and optional:
                return None
            if not isinstance(v, str):
                raise ValueError(f"comparison {key} must be a string, got {v!r}")
            return v

        metric = str(text("metric"))
        _check_metric(metric)
        design = text("design")
        if design not in ("concurrent", "alternating"):
            raise ValueError(f"comparison design must be concurrent or alternating, got {design!r}")
        band = data.get("interval_pct")
        interval: tuple[float, float] | None = None
        if band is not None:
            if (not isinstance(band, list | tuple) or len(band) != 2
                    or any(isinstance(x, bool) or not isinstance(x, int | float) for x in band)):
                raise ValueError(f"comparison interval_pct must be [low, high] or null, got {band!r}")
            interval = (float(band[0]), float(band[1]))
        duration, level = num("duration_s", optional=False), num("level", optional=False)
        return cls(
            baseline=str(text("baseline")), candidate=str(text("candidate")), metric=metric,
            design="concurrent" if design == "concurrent" else "alternating", method=str(text("method")),
            blocks=whole("blocks"), pairs=whole("pairs"), duration_s=float(duration or 0.0),
            level=float(level or 0.0), baseline_ms=num("baseline_ms"), candidate_ms=num("candidate_ms"),
            diff_pct=num("diff_pct"), interval_pct=interval, resamples=whole("resamples"), seed=whole("seed"),
            reason=text("reason", optional=True),
        )

    def sentence(self) -> str:
        """`p99 +3.2 % [+1.1 %, +5.0 %] (fast against fifo; 40 blocks, paired block bootstrap)`."""
        who = f"{self.candidate} against {self.baseline}"
        if self.diff_pct is None or self.interval_pct is None:
            return f"{self.metric} ({who}): not estimated: {self.reason}"
        lo, hi = self.interval_pct
        unit = f"{self.blocks} blocks" if self.blocks is not None else f"{self.pairs} ABBA pairs"
        return f"{self.metric} {self.diff_pct:+.1f} % [{lo:+.1f} %, {hi:+.1f} %] ({who}; {unit}, {self.method})"


def _pct(ratio: FloatArray | float) -> Any:
    return 100.0 * (np.asarray(ratio) - 1.0)


def _resampled_quantiles(counts: FloatArray, weights: npt.NDArray[np.int64], upper: npt.ArrayLike,
                         q: float) -> FloatArray:
    """The q-quantile (µs) of the blocks of `counts` (blocks × buckets) merged with each row's multiplicities."""
    # einsum's own loop: exact on integer counts, and not at the mercy of a slow BLAS build
    merged = np.einsum("rn,nk->rk", weights.astype(np.float64), counts, optimize=False)
    return histogram_quantiles(upper, merged, q)


def _multiplicities(rng: np.random.Generator, rows: int, n: int) -> npt.NDArray[np.int64]:
    """`rows` resamples of n block indices drawn with replacement, as each block's multiplicity (rows × n)."""
    idx = rng.integers(0, n, size=(rows, n)) + n * np.arange(rows)[:, None]
    return np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n).astype(np.int64)


def compare_concurrent(
    arms: Mapping[str, BlockHistograms],
    baseline: str,
    candidate: str,
    *,
    metric: str = "p99",
    seed: int,
    resamples: int = RESAMPLES,
    level: float = 0.95,
    min_blocks: int = MIN_BLOCKS,
    min_block_s: float = MIN_BLOCK_S,
    paired: bool = True,
) -> Comparison:
    """`candidate` against `baseline`, two concurrent arms of one replay (the same blocks: same bucket bounds,
    block count and block length; otherwise ValueError), by the paired block bootstrap of the module docstring.
    `paired=False` draws each arm's blocks independently (the comparison pairing is measured against)."""
    q = _check_metric(metric)
    if not 0.0 < level < 1.0 or resamples < 1:
        raise ValueError("level must be in (0, 1) and resamples at least 1")
    a, b = arms[baseline], arms[candidate]
    if a.counts.shape != b.counts.shape or not np.array_equal(a.upper_us, b.upper_us) or a.block_s != b.block_s:
        raise ValueError(f"arms {baseline!r} and {candidate!r} are not blocks of the same replay "
                         "(bucket bounds, block count and block length must match)")
    n = a.blocks
    method = ("paired" if paired else "unpaired") + " block bootstrap, percentile interval"
    base = Comparison(baseline, candidate, metric, "concurrent", method, n, None, a.duration_s, level,
                      resamples=resamples, seed=seed)
    if n < min_blocks:
        return _refuse(base, f"{n} blocks: the bootstrap needs at least {min_blocks}")
    if a.block_s < min_block_s:
        return _refuse(base, f"blocks of {a.block_s:g} s are shorter than {min_block_s:g} s "
                             "(merge consecutive blocks: BlockHistograms.merge_blocks)")
    for name, h in ((baseline, a), (candidate, b)):
        empty = np.flatnonzero(h.counts.sum(axis=1) == 0)
        if empty.size:
            return _refuse(base, f"arm {name!r} served no request in block {int(empty[0])}")
    ca, cb = a.counts.astype(np.float64), b.counts.astype(np.float64)
    qa = float(histogram_quantiles(a.upper_us, ca.sum(axis=0), q)[0])
    qb = float(histogram_quantiles(b.upper_us, cb.sum(axis=0), q)[0])
    rng = np.random.default_rng(seed)
    diffs: list[FloatArray] = []
    for start in range(0, resamples, _CHUNK):
        rows = min(_CHUNK, resamples - start)
        wa = _multiplicities(rng, rows, n)
        wb = wa if paired else _multiplicities(rng, rows, n)
        ra = _resampled_quantiles(ca, wa, a.upper_us, q)
        rb = _resampled_quantiles(cb, wb, b.upper_us, q)
        diffs.append(np.asarray(_pct(rb / ra), dtype=np.float64))
    d = np.concatenate(diffs)
    alpha = 1.0 - level
    lo, hi = (float(x) for x in np.quantile(d, [alpha / 2, 1.0 - alpha / 2]))
    return _estimate(base, qa / 1000.0, qb / 1000.0, float(_pct(qb / qa)), (lo, hi))


def compare_alternating(
    runs: Sequence[Run],
    baseline: str,
    candidate: str,
    *,
    metric: str = "p99",
    level: float = 0.95,
    min_pairs: int = MIN_PAIRS,
) -> Comparison:
    """`candidate` against `baseline`, two alternating configs whose whole runs are `runs` in the order they ran
    (runs of other arms are left out): consecutive runs two at a time form a pair, which must hold one run of
    each (ABBA order; else refused); a trailing odd run is left out. The Student-t interval of the pairs'
    mean log-ratio (module docstring); `diff_pct` is exp(mean log-ratio) − 1."""
    q = _check_metric(metric)
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    mine = [r for r in runs if r.arm in (baseline, candidate)]
    m = len(mine) // 2
    paired_runs = mine[: 2 * m]
    duration = sum(r.histograms.duration_s for r in paired_runs)
    method = f"ABBA pairs, per-pair log-ratio, Student-t interval ({' '.join(r.arm for r in mine) or 'no run'})"
    base = Comparison(baseline, candidate, metric, "alternating", method, None, m, duration, level)
    for i in range(m):
        first, second = paired_runs[2 * i], paired_runs[2 * i + 1]
        if {first.arm, second.arm} != {baseline, candidate}:
            return _refuse(base, f"runs {2 * i} and {2 * i + 1} of {baseline!r}/{candidate!r} are both "
                                 f"{first.arm!r}: not in ABBA order")
    if m < min_pairs:
        return _refuse(base, f"{m} ABBA pair{'s' if m != 1 else ''}: the t interval needs at least {min_pairs}")
    if any(not np.array_equal(r.histograms.upper_us, paired_runs[0].histograms.upper_us) for r in paired_runs):
        raise ValueError("the runs' histograms must share their bucket bounds")
    value = {id(r): float(histogram_quantiles(r.histograms.upper_us, r.histograms.merged(), q)[0])
             for r in paired_runs}
    if not all(math.isfinite(v) and v > 0 for v in value.values()):
        return _refuse(base, "a run served no request")
    logs = []
    for i in range(m):
        first, second = paired_runs[2 * i], paired_runs[2 * i + 1]
        a_run, b_run = (first, second) if first.arm == baseline else (second, first)
        logs.append(math.log(value[id(b_run)] / value[id(a_run)]))
    mean = sum(logs) / m
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (m - 1))
    half = _t_ppf(1.0 - (1.0 - level) / 2, m - 1) * sd / math.sqrt(m)
    qa = _merged_ms([r for r in paired_runs if r.arm == baseline], q)
    qb = _merged_ms([r for r in paired_runs if r.arm == candidate], q)
    interval = (100.0 * math.expm1(mean - half), 100.0 * math.expm1(mean + half))
    return _estimate(base, qa, qb, 100.0 * math.expm1(mean), interval)


def _merged_ms(runs: Iterable[Run], q: float) -> float:
    hists = list(runs)
    merged = sum((r.histograms.merged() for r in hists), start=np.zeros_like(hists[0].histograms.upper_us))
    return float(histogram_quantiles(hists[0].histograms.upper_us, merged, q)[0]) / 1000.0


def _refuse(c: Comparison, reason: str) -> Comparison:
    return Comparison(c.baseline, c.candidate, c.metric, c.design, c.method, c.blocks, c.pairs, c.duration_s,
                      c.level, resamples=c.resamples, seed=c.seed, reason=reason)


def _estimate(c: Comparison, a_ms: float, b_ms: float, diff: float, interval: tuple[float, float]) -> Comparison:
    return Comparison(c.baseline, c.candidate, c.metric, c.design, c.method, c.blocks, c.pairs, c.duration_s,
                      c.level, a_ms, b_ms, diff, interval, c.resamples, c.seed, None)


# ------------------------------------------------------------------------------------------------------ the gate


@dataclass(frozen=True)
class GateVerdict:
    """`verdict`: `pass` (publish), `refuse` (shown worse than allowed) or `inconclusive` (not shown either way:
    the interval reaches across the bound, the comparison was refused or the run is too short); `reason` says
    which, with the figures."""

    verdict: Literal["pass", "refuse", "inconclusive"]
    reason: str
    metric: str
    diff_pct: float | None
    interval_pct: tuple[float, float] | None
    max_worse_pct: float
    min_duration_s: float
    duration_s: float

    @property
    def publish(self) -> bool:
        return self.verdict == "pass"

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "publish": self.publish, "reason": self.reason, "metric": self.metric,
            "diff_pct": self.diff_pct,
            "interval_pct": list(self.interval_pct) if self.interval_pct is not None else None,
            "max_worse_pct": self.max_worse_pct, "min_duration_s": self.min_duration_s,
            "duration_s": self.duration_s,
        }


def gate(comparison: Comparison, max_worse_pct: float = MAX_WORSE_PCT, *,
         min_duration_s: float = MIN_DURATION_S) -> GateVerdict:
    """Publish the candidate only if its real difference is not worse than `max_worse_pct`: the interval's upper
    end below it passes; its lower end above it refuses; anything else is inconclusive (module docstring)."""
    c = comparison

    def verdict(v: Literal["pass", "refuse", "inconclusive"], reason: str) -> GateVerdict:
        return GateVerdict(v, reason, c.metric, c.diff_pct, c.interval_pct, max_worse_pct, min_duration_s,
                           c.duration_s)

    if c.reason is not None or c.interval_pct is None:
        return verdict("inconclusive", f"the comparison was refused: {c.reason or 'no interval'}")
    if c.duration_s < min_duration_s:
        return verdict("inconclusive", f"the replay lasted {c.duration_s:g} s, less than {min_duration_s:g} s")
    lo, hi = c.interval_pct
    text = f"{c.metric} {c.diff_pct:+.1f} % [{lo:+.1f} %, {hi:+.1f} %]"
    if hi < max_worse_pct:
        return verdict("pass", f"{text}: the upper end is below +{max_worse_pct:g} %")
    if lo > max_worse_pct:
        return verdict("refuse", f"{text}: worse than +{max_worse_pct:g} % (the lower end is above it)")
    return verdict("inconclusive", f"{text}: the interval reaches across +{max_worse_pct:g} % (a longer replay "
                                   "narrows it)")


# ----------------------------------------------------------------------------------------- binomial intervals


def wilson_interval(k: int, m: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion k/m (m ≥ 1)."""
    _check_binomial(k, m, level)
    z = NormalDist().inv_cdf(1.0 - (1.0 - level) / 2)
    p = k / m
    denom = 1.0 + z * z / m
    centre = (p + z * z / (2 * m)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m))
    return max(0.0, centre - half), min(1.0, centre + half)


def clopper_pearson_interval(k: int, m: int, level: float = 0.95) -> tuple[float, float]:
    """The Clopper–Pearson (exact) interval of a proportion k/m (m ≥ 1): beta quantiles."""
    _check_binomial(k, m, level)
    alpha = 1.0 - level
    lo = 0.0 if k == 0 else _beta_ppf(alpha / 2, k, m - k + 1)
    hi = 1.0 if k == m else _beta_ppf(1.0 - alpha / 2, k + 1, m - k)
    return lo, hi


def _check_binomial(k: int, m: int, level: float) -> None:
    if m < 1 or not 0 <= k <= m or not 0.0 < level < 1.0:
        raise ValueError("need 0 ≤ k ≤ m, m ≥ 1 and a level in (0, 1)")


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for i in range(1, 1000):
        m2 = 2 * i
        aa = i * (b - i) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + i) * (qab + i) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _bisect(f: Any, lo: float, hi: float, target: float) -> float:
    """x in [lo, hi] with f(x) = target, f increasing."""
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(mid)):
            break
    return (lo + hi) / 2


def _beta_ppf(p: float, a: float, b: float) -> float:
    return _bisect(lambda x: _betainc(a, b, x), 0.0, 1.0, p)


def _t_cdf(t: float, df: float) -> float:
    # the one-sided tail ½ I_{df/(df+t²)}(df/2, ½), from the complementary side where t² is small (precision)
    if t * t < df:
        tail = 0.5 * (1.0 - _betainc(0.5, df / 2, t * t / (df + t * t)))
    else:
        tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _t_ppf(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom."""
    hi = 1.0
    while _t_cdf(hi, df) < max(p, 1 - p):
        hi *= 2.0
    return _bisect(lambda t: _t_cdf(t, df), -hi, hi, p)


# ------------------------------------------------------------------------------------- the model and the cluster


@dataclass(frozen=True)
class ReplayEvidence:
    """One live replay of a deployment: per config its `observed` quantiles (`arm_quantiles`) and the model's
    `predicted` ones, and the observed `comparisons` between configs (every config they name has a prediction
    and an observation)."""

    replay: str
    observed: Mapping[str, Quantiles]
    predicted: Mapping[str, Quantiles]
    comparisons: Sequence[Comparison] = field(default_factory=tuple)


@dataclass(frozen=True)
class ConfigFidelity:
    """One config in one replay: predicted against observed, `error_pct` = 100 (predicted/observed − 1)."""

    replay: str
    config: str
    predicted: Quantiles
    observed: Quantiles

    def error_pct(self, metric: str) -> float | None:
        o, p = self.observed.value(metric), self.predicted.value(metric)
        return 100.0 * (p / o - 1.0) if math.isfinite(o) and o > 0 and math.isfinite(p) else None

    def as_dict(self) -> dict[str, Any]:
        return {"replay": self.replay, "config": self.config, "predicted": self.predicted.as_dict(),
                "observed": self.observed.as_dict(), "error_pct": {m: self.error_pct(m) for m in METRICS}}


@dataclass(frozen=True)
class PairFidelity:
    """One compared pair: the observed difference (`diff_pct`, `interval_pct`, `resolved`), the model's
    (`predicted_diff_pct`), whether the signs agree (None: not resolved, so not counted), and
    `log_ratio_error` = predicted ln(B/A) − observed ln(B/A) (None where either is undefined)."""

    replay: str
    baseline: str
    candidate: str
    metric: str
    diff_pct: float | None
    interval_pct: tuple[float, float] | None
    resolved: bool
    predicted_diff_pct: float | None
    agree: bool | None
    observed_log_ratio: float | None
    predicted_log_ratio: float | None
    log_ratio_error: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "replay": self.replay, "baseline": self.baseline, "candidate": self.candidate, "metric": self.metric,
            "diff_pct": self.diff_pct,
            "interval_pct": list(self.interval_pct) if self.interval_pct is not None else None,
            "resolved": self.resolved, "predicted_diff_pct": self.predicted_diff_pct, "agree": self.agree,
            "observed_log_ratio": self.observed_log_ratio, "predicted_log_ratio": self.predicted_log_ratio,
            "log_ratio_error": self.log_ratio_error,
        }


@dataclass(frozen=True)
class PickRegret:
    """The model's pick (lowest predicted `metric`) against the observed best in one replay: `regret_pct` =
    100 (observed pick / observed best − 1) ≥ 0, with the interval of the replay's comparison of the two when
    there is one."""

    replay: str
    metric: str
    pick: str
    best: str
    regret_pct: float
    interval_pct: tuple[float, float] | None

    def as_dict(self) -> dict[str, Any]:
        return {"replay": self.replay, "metric": self.metric, "pick": self.pick, "best": self.best,
                "regret_pct": self.regret_pct,
                "interval_pct": list(self.interval_pct) if self.interval_pct is not None else None}


@dataclass(frozen=True)
class Agreement:
    """k of the m resolved pairs whose predicted difference has the observed sign, with the interval of k/m
    (None when m is 0)."""

    k: int
    m: int
    interval: tuple[float, float] | None
    method: str
    level: float

    @property
    def rate(self) -> float | None:
        return self.k / self.m if self.m else None

    def as_dict(self) -> dict[str, Any]:
        return {"k": self.k, "m": self.m, "rate": self.rate,
                "interval": list(self.interval) if self.interval is not None else None,
                "method": self.method, "level": self.level}


@dataclass(frozen=True)
class Fidelity:
    """The model against the cluster, pooled over every replay of a deployment (module docstring)."""

    metric: str
    replays: int
    configs: tuple[ConfigFidelity, ...]
    pairs: tuple[PairFidelity, ...]
    agreement: Agreement
    regrets: tuple[PickRegret, ...]

    @property
    def mean_abs_log_ratio_error(self) -> float | None:
        e = [abs(p.log_ratio_error) for p in self.pairs if p.log_ratio_error is not None]
        return sum(e) / len(e) if e else None

    @property
    def max_regret_pct(self) -> float | None:
        return max((r.regret_pct for r in self.regrets), default=None)

    @property
    def mean_regret_pct(self) -> float | None:
        return sum(r.regret_pct for r in self.regrets) / len(self.regrets) if self.regrets else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "replays": self.replays, "agreement": self.agreement.as_dict(),
            "mean_regret_pct": self.mean_regret_pct, "max_regret_pct": self.max_regret_pct,
            "mean_abs_log_ratio_error": self.mean_abs_log_ratio_error,
            "regret": [r.as_dict() for r in self.regrets], "pairs": [p.as_dict() for p in self.pairs],
            "configs": [c.as_dict() for c in self.configs],
        }


def _log_ratio(b: float, a: float) -> float | None:
    return math.log(b / a) if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0 else None


def fidelity(
    replays: Sequence[ReplayEvidence],
    *,
    metric: str = "p99",
    level: float = 0.95,
    interval: Literal["wilson", "clopper-pearson"] = "wilson",
) -> Fidelity:
    """Whether the model ranks the configs as the cluster does, pooled over `replays` (each replay's comparisons
    on `metric`; the others are left out): the sign agreement on resolved pairs (k of m, `interval`), each
    replay's regret of the model's pick, each pair's log-ratio error, each config's predicted/observed error.
    A predicted difference of exactly 0 (or undefined) does not agree with a resolved one. A compared config without a
    prediction or observation: ValueError."""
    _check_metric(metric)
    configs: list[ConfigFidelity] = []
    pairs: list[PairFidelity] = []
    regrets: list[PickRegret] = []
    for ev in replays:
        for name in sorted(set(ev.observed) & set(ev.predicted)):
            configs.append(ConfigFidelity(ev.replay, name, ev.predicted[name], ev.observed[name]))
        for c in ev.comparisons:
            if c.metric != metric:
                continue
            missing = [n for n in (c.baseline, c.candidate) if n not in ev.predicted]
            if missing:
                raise ValueError(f"replay {ev.replay!r}: no prediction for {', '.join(missing)}")
            pred = _log_ratio(ev.predicted[c.candidate].value(metric), ev.predicted[c.baseline].value(metric))
            obs = c.log_ratio
            agree = None
            if c.resolved and obs is not None:
                agree = pred is not None and pred != 0.0 and (pred > 0) == (obs > 0)
            pairs.append(PairFidelity(
                ev.replay, c.baseline, c.candidate, metric, c.diff_pct, c.interval_pct, c.resolved,
                100.0 * math.expm1(pred) if pred is not None else None, agree, obs, pred,
                pred - obs if pred is not None and obs is not None else None))
        regret = _regret(ev, metric)
        if regret is not None:
            regrets.append(regret)
    counted = [p.agree for p in pairs if p.agree is not None]
    k, m = sum(counted), len(counted)
    fn = wilson_interval if interval == "wilson" else clopper_pearson_interval
    agreement = Agreement(k, m, fn(k, m, level) if m else None, interval, level)
    return Fidelity(metric, len(replays), tuple(configs), tuple(pairs), agreement, tuple(regrets))


def _regret(ev: ReplayEvidence, metric: str) -> PickRegret | None:
    names = [n for n in sorted(set(ev.observed) & set(ev.predicted))
             if math.isfinite(ev.observed[n].value(metric)) and math.isfinite(ev.predicted[n].value(metric))]
    if not names:
        return None
    pick = min(names, key=lambda n: ev.predicted[n].value(metric))
    best = min(names, key=lambda n: ev.observed[n].value(metric))
    regret = 100.0 * (ev.observed[pick].value(metric) / ev.observed[best].value(metric) - 1.0)
    band: tuple[float, float] | None = None
    for c in ev.comparisons:
        if c.metric != metric or c.interval_pct is None or pick == best:
            continue
        lo, hi = c.interval_pct
        if (c.baseline, c.candidate) == (best, pick):
            band = (lo, hi)
        elif (c.baseline, c.candidate) == (pick, best) and lo > -100.0:
            band = (100.0 * (100.0 / (100.0 + hi) - 1.0), 100.0 * (100.0 / (100.0 + lo) - 1.0))
    return PickRegret(ev.replay, metric, pick, best, regret, band)


# ------------------------------------------------------------------------------------------------ interference


@dataclass(frozen=True)
class ArmLoad:
    """One arm's reads on the cluster: `share_pct` of the cluster's reads, `extra_share_pct` the part of the
    cluster's reads that are its extra ones; `flagged` above the threshold."""

    arm: str
    reads: int
    extra_reads: int
    share_pct: float
    extra_share_pct: float
    flagged: bool

    def as_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "reads": self.reads, "extra_reads": self.extra_reads, "share_pct": self.share_pct,
                "extra_share_pct": self.extra_share_pct, "flagged": self.flagged}


@dataclass(frozen=True)
class Interference:
    """The arms' shares of the cluster's reads; `flagged` when any arm's extra reads exceed
    `max_extra_share_pct` of them (`reason` names which)."""

    arms: tuple[ArmLoad, ...]
    reads: int
    extra_share_pct: float
    max_extra_share_pct: float
    flagged: bool
    reason: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"arms": [a.as_dict() for a in self.arms], "reads": self.reads,
                "extra_share_pct": self.extra_share_pct, "max_extra_share_pct": self.max_extra_share_pct,
                "flagged": self.flagged, "reason": self.reason}


def interference(reads: Mapping[str, int], extra_reads: Mapping[str, int], *,
                 max_extra_share_pct: float = MAX_EXTRA_SHARE_PCT) -> Interference:
    """Each arm's share of the cluster's reads. `reads[arm]`: the replica reads the cluster served for the arm,
    its extra ones included (the same unit for every arm, e.g. a twin table's read count on the nodes);
    `extra_reads[arm]`: the part of them beyond what its requests needed (a speculative retry's second read;
    an arm missing from it has none). ValueError on a negative count or extra reads above the reads."""
    unknown = set(extra_reads) - set(reads)
    if unknown:
        raise ValueError(f"extra reads for arms without reads: {', '.join(sorted(unknown))}")
    for arm, r in reads.items():
        e = extra_reads.get(arm, 0)
        if r < 0 or e < 0 or e > r:
            raise ValueError(f"arm {arm!r}: need 0 ≤ extra_reads ({e}) ≤ reads ({r})")
    total = sum(reads.values())
    share = (lambda x: 100.0 * x / total) if total > 0 else (lambda x: 0.0)
    loads = tuple(ArmLoad(arm, r, extra_reads.get(arm, 0), share(r), share(extra_reads.get(arm, 0)),
                          share(extra_reads.get(arm, 0)) > max_extra_share_pct) for arm, r in reads.items())
    flagged = [a for a in loads if a.flagged]
    reason = None
    if flagged:
        reason = "; ".join(f"{a.arm}'s extra reads are {a.extra_share_pct:.1f} % of the cluster's reads" for a in
                           flagged) + f" (above {max_extra_share_pct:g} %): every arm was measured under that load"
    return Interference(loads, total, share(sum(extra_reads.values())), max_extra_share_pct, bool(flagged), reason)
