"""Replaying less of a trace, knowingly: contiguous time windows, stratified over the trace's time span.

The span [t0, t1] of request arrival times is cut into `strata` equal strata; in each one a window of
`fraction` of the stratum's length starts at a seeded offset (uniform over the room the stratum leaves). A
window keeps every request that arrives in it, whole, so bursts and the drift of the hot keys inside it are
replayed as they were; the strata spread the windows over the whole span (every phase of a daily cycle is
represented). The sampled trace is the windows laid end to end: each window's times are shifted so it starts
where the previous one ends (no idle gaps between windows).

With trace timestamps the simulator scales arrival times so the trace's mean rate gives the offered load; the
windows' mean rate differs from the whole trace's, so `load_factor` (the windows' ops per second over the whole
trace's) says how much to scale the load for the windows to be replayed at the whole trace's absolute rate.

The peak check (tuner/peak_check.py) replays the stretches around the trace's most intense bursts:
`burst_windows` finds them on `ops_histogram`, `peak_source` writes them like a sample.

Everything here is a pure function of its arguments except `sample_source` and `peak_source`, which read a source
and write its sample (or its burst stretches) to `TAILTUNE_HOME/samples/` for the tuner (`tuner/tune.py`) to
replay.

The error a sample introduces is not derived from a model: `CALIBRATION` holds the worst p50/p99 errors of a
sampled recommendation's estimate (`tuner.peak_check.estimate`) measured against full replays
(validation/sampling.py, bench/RESULTS.md § "Sampling error"), and `error_bound` /
`fraction_for_error` read it. docs/sampling.md describes the scheme and its limits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from base.errors import BadInputError
from base.settings import Settings
from simulation.source import WorkloadSource

__all__ = [
    "CALIBRATED_ON",
    "CALIBRATION",
    "DEFAULT_STRATA",
    "METHOD",
    "NOT_VALID_FOR",
    "SampleInfo",
    "SamplingSpec",
    "Window",
    "burst_windows",
    "describe",
    "error_bound",
    "fraction_for_error",
    "ops_histogram",
    "parquet_span",
    "peak_source",
    "plan_windows",
    "request_times",
    "requests_in",
    "sample_parquet",
    "sample_source",
    "sample_table",
    "source_key",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: Time bins of the histogram the bursts are found on (`burst_windows`).
PEAK_BINS: Final = 100_000
#: Pieces of the stretch the peak check replays: one around each of the trace's most intense bursts.
PEAK_PIECES: Final = 3
#: A burst's length, as a fraction of a piece's (`burst_windows`).
BURST_FRACTION: Final = 0.1
#: Strata (= windows) when none are given.
DEFAULT_STRATA: Final = 10
METHOD: Final = "stratified contiguous time windows"

#: (fraction, worst |p50 error| %, worst |p99 error| %) of a sampled recommendation's estimate for the whole trace
#: (`tuner.peak_check.estimate`) against the recommended config's full replay, measured by `python -m
#: validation.sampling` with DEFAULT_STRATA strata over every workload and window seed of CALIBRATED_ON
#: (bench/RESULTS.md § "Sampling error"), rounded up to 0.1 and made non-increasing in the fraction (each entry is
#: the worst measured at that fraction or a larger one).
CALIBRATION: Final[tuple[tuple[float, float, float], ...]] = (
    (0.05, 10.5, 74.3),
    (0.1, 10.5, 74.3),
    (1.0, 0.0, 0.0),
)
#: Where CALIBRATION was measured, and where it is known not to hold (docs/sampling.md § The error bound): both go
#: into every sampled recommendation's `error_bound`.
CALIBRATED_ON: Final = ("Cassandra at 3 M requests, trace timestamps, load 0.5, 10 strata, the peak check and the "
                        "two-strata estimate: the stock space on generated diurnal (three days, 24 bursts of 10 s at "
                        "2x), diurnal with 6 bursts of 40 s, and stationary soundcloud; the patched space on diurnal")
NOT_VALID_FOR: Final = ("storms that need longer than a burst stretch (F x span / 3) to build or start at bursts less "
                        "intense than the three replayed, and traces whose tail is set by events rarer or longer than "
                        "the calibration traces' bursts; replay the recommended config over the whole trace when that "
                        "matters")


@dataclass(frozen=True, slots=True)
class Window:
    """Requests arriving in [start, end) (trace seconds), from stratum `stratum`."""

    stratum: int
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class SamplingSpec:
    """What the user asked for: a fraction of the span, or a target p99 error (percent) to pick it from."""

    fraction: float | None = None
    target_error_pct: float | None = None
    strata: int = DEFAULT_STRATA
    seed: int = 0

    def __post_init__(self) -> None:
        if self.fraction is not None and self.target_error_pct is not None:
            raise BadInputError.single("command line", "give --sample-fraction or --target-error, not both",
                                       field="sample_fraction")  # fmt: skip
        if self.fraction is not None and not (0.0 < self.fraction <= 1.0 and math.isfinite(self.fraction)):
            raise BadInputError.single("--sample-fraction", f"expected a number in (0, 1], got {self.fraction:g}",
                                       field="sample_fraction")  # fmt: skip
        if self.target_error_pct is not None and not (
            self.target_error_pct > 0.0 and math.isfinite(self.target_error_pct)
        ):
            raise BadInputError.single("--target-error", f"expected a positive percentage, got "
                                       f"{self.target_error_pct:g}", field="target_error")  # fmt: skip
        if isinstance(self.strata, bool) or not isinstance(self.strata, int) or self.strata < 1:
            raise BadInputError.single("--strata", f"expected a positive integer, got {self.strata}", field="strata")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise BadInputError.single("--sample-seed", f"expected a non-negative integer, got {self.seed}",
                                       field="sample_seed")  # fmt: skip

    def resolved_fraction(self) -> float:
        """The fraction of the span to replay: given, or the smallest calibrated one meeting the target."""
        if self.fraction is not None:
            return self.fraction
        if self.target_error_pct is not None:
            return fraction_for_error(self.target_error_pct)
        return 1.0


@dataclass(frozen=True, slots=True)
class SampleInfo:
    """What a sample holds compared with its whole trace."""

    windows: tuple[Window, ...]
    requests: int
    requests_total: int
    ops: int
    ops_total: int
    span_s: float
    span_total_s: float

    @property
    def replayed_fraction(self) -> float:
        """Requests replayed / requests in the trace."""
        return self.requests / self.requests_total if self.requests_total else 1.0

    @property
    def load_factor(self) -> float:
        """The windows' ops per second over the whole trace's (1.0 when either spans no time)."""
        if self.span_s <= 0.0 or self.span_total_s <= 0.0 or self.ops == 0:
            return 1.0
        return (self.ops / self.span_s) / (self.ops_total / self.span_total_s)


def plan_windows(t0: float, t1: float, fraction: float, strata: int, seed: int) -> tuple[Window, ...]:
    """One window of `fraction` × stratum length per stratum of [t0, t1], at a seeded offset in the stratum.

    The offsets are `SeedSequence(seed)` uniforms; the same arguments always give the same windows.
    `fraction` 1 gives the strata themselves (the last one closed at t1).
    """
    if not (0.0 < fraction <= 1.0):
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if strata < 1:
        raise ValueError(f"strata must be >= 1, got {strata}")
    length = (t1 - t0) / strata
    width = fraction * length
    u = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed))).random(strata)
    out = []
    for j in range(strata):
        start = t0 + j * length + float(u[j]) * (length - width)
        end = start + width
        out.append(Window(j, start, math.nextafter(t1, math.inf) if j == strata - 1 and fraction >= 1.0 else end))
    return tuple(out)


def request_times(table: pa.Table) -> tuple[I64, F64, I64]:
    """(request ids, arrival time, ops) per request, ordered by arrival: a request arrives at its first row's
    time (the simulator's rule)."""
    grouped = table.select(["request_id", "ts"]).group_by("request_id", use_threads=False).aggregate(
        [("ts", "min"), ("ts", "count")]
    )
    ids = grouped.column("request_id").to_numpy().astype(np.int64)
    ts = grouped.column("ts_min").to_numpy().astype(np.float64)
    ops = grouped.column("ts_count").to_numpy().astype(np.int64)
    order = np.lexsort((ids, ts))
    return ids[order], ts[order], ops[order]


def sample_table(table: pa.Table, windows: Sequence[Window]) -> tuple[pa.Table, SampleInfo]:
    """The rows of the requests arriving in the windows, with times laid end to end (window j starts where
    window j - 1 ends), in window order; and what the sample holds."""
    ids, ts, ops = request_times(table)
    if ids.size == 0:
        raise BadInputError.single("trace", "no requests to sample", field="request_id")
    win = sorted(windows, key=lambda w: w.start)
    starts = np.array([w.start for w in win], dtype=np.float64)
    ends = np.array([w.end for w in win], dtype=np.float64)
    slot = np.searchsorted(starts, ts, side="right") - 1
    inside = (slot >= 0) & (ts < ends[np.clip(slot, 0, None)])
    placed = np.concatenate(([0.0], np.cumsum(ends - starts)))[:-1]  # where each window starts in the sample
    shift = placed - starts  # per window: sample time = trace time + shift
    kept_ids = ids[inside]
    by_id = np.argsort(kept_ids, kind="stable")
    sorted_ids, sorted_shift = kept_ids[by_id], shift[slot[inside]][by_id]
    rows = table if inside.all() else table.filter(  # streamed samples hold only kept requests: no copy then
        pc.is_in(table.column("request_id"), value_set=pa.array(kept_ids, type=pa.int64())))
    row_ids = rows.column("request_id").to_numpy().astype(np.int64)
    row_shift = sorted_shift[np.searchsorted(sorted_ids, row_ids)]
    new_ts = rows.column("ts").to_numpy().astype(np.float64) + row_shift
    rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", pa.array(new_ts, type=pa.float64()))
    order = np.lexsort((row_ids, new_ts))
    if not np.array_equal(order, np.arange(order.size)):  # rows already in order (a time-sorted trace): no copy
        rows = rows.take(pa.array(order))
    kept_ts = ts[inside] + shift[slot[inside]]
    info = SampleInfo(
        windows=tuple(win),
        requests=int(kept_ids.size),
        requests_total=int(ids.size),
        ops=int(ops[inside].sum()),
        ops_total=int(ops.sum()),
        span_s=float(kept_ts.max() - kept_ts.min()) if kept_ts.size else 0.0,
        span_total_s=float(ts[-1] - ts[0]),
    )
    return rows, info


def parquet_span(files: Sequence[Path]) -> tuple[float, float]:
    """(earliest, latest) `ts` of Parquet files: from the row groups' statistics, else a scan of `ts` alone."""
    import pyarrow.parquet as pq

    lo, hi = math.inf, -math.inf
    for path in files:
        pf = pq.ParquetFile(path)
        col = pf.schema_arrow.get_field_index("ts")
        if col < 0:
            raise BadInputError.single(str(path), "sampling needs a ts column", field="ts")
        for g in range(pf.metadata.num_row_groups):
            stats = pf.metadata.row_group(g).column(col).statistics
            if stats is not None and stats.has_min_max:
                lo, hi = min(lo, float(stats.min)), max(hi, float(stats.max))
            else:
                mm = pc.min_max(pf.read_row_group(g, columns=["ts"]).column("ts")).as_py()
                if mm["min"] is not None:
                    lo, hi = min(lo, float(mm["min"])), max(hi, float(mm["max"]))
    if not math.isfinite(lo):
        raise BadInputError.single(str(files[0]) if files else "trace", "no requests to sample", field="ts")
    return lo, hi


def _in_windows(ts: F64, starts: F64, ends: F64) -> npt.NDArray[np.bool_]:
    slot = np.searchsorted(starts, ts, side="right") - 1
    return np.asarray((slot >= 0) & (ts < ends[np.clip(slot, 0, None)]), dtype=np.bool_)


def sample_parquet(
    files: Sequence[Path], windows: Sequence[Window], *, batch_rows: int = 1 << 20
) -> tuple[pa.Table, SampleInfo]:
    """`sample_table` for traces that do not fit in memory: one streaming pass over the files keeps the rows whose
    own `ts` is in a window (memory: one batch plus the sample). Totals count a request per change of
    `request_id` between consecutive rows, exact when a request's rows are consecutive and share its `ts` (as
    in generated traces and ingested datasets)."""
    import pyarrow.parquet as pq

    win = sorted(windows, key=lambda w: w.start)
    starts = np.array([w.start for w in win], dtype=np.float64)
    ends = np.array([w.end for w in win], dtype=np.float64)
    kept: list[pa.RecordBatch] = []
    rows_total = requests_total = 0
    last_id: int | None = None
    lo, hi = math.inf, -math.inf
    for path in files:
        # pre_buffer=False: a pre-buffering reader keeps every column chunk read until the file is closed
        for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=batch_rows):
            ids = batch.column("request_id").to_numpy().astype(np.int64)
            ts = batch.column("ts").to_numpy().astype(np.float64)
            if ids.size == 0:
                continue
            rows_total += ids.size
            requests_total += requests_in(ids, last_id)
            last_id = int(ids[-1])
            lo, hi = min(lo, float(ts.min())), max(hi, float(ts.max()))
            mask = _in_windows(ts, starts, ends)
            if mask.any():
                kept.append(batch.filter(pa.array(mask)))
    if not kept:
        raise BadInputError.single(str(files[0]) if files else "trace", "no request falls in the windows",
                                   field="ts")  # fmt: skip
    sample, info = sample_table(pa.Table.from_batches(kept), win)
    return sample, SampleInfo(tuple(win), info.requests, requests_total, info.ops, rows_total, info.span_s, hi - lo)


def ops_histogram(ts: F64, t0: float, t1: float, bins: int = PEAK_BINS) -> I64:
    """Rows (= ops) per time bin: `bins` equal bins over [t0, t1] (the last one closed)."""
    counts, _ = np.histogram(ts, bins=bins, range=(t0, t1) if t1 > t0 else (t0, t0 + 1.0))
    return np.asarray(counts, dtype=np.int64)


def _parquet_histogram(files: Sequence[Path], t0: float, t1: float, *, batch_rows: int = 1 << 20) -> I64:
    """`ops_histogram` of Parquet files, streaming the `ts` column alone."""
    import pyarrow.parquet as pq

    counts = np.zeros(PEAK_BINS, dtype=np.int64)
    for path in files:
        for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=batch_rows, columns=["ts"]):
            counts += ops_histogram(batch.column("ts").to_numpy().astype(np.float64), t0, t1)
    return counts


def burst_windows(
    counts: I64, t0: float, t1: float, fraction: float, pieces: int = PEAK_PIECES, burst: float = BURST_FRACTION
) -> tuple[Window, ...]:
    """The stretches around the trace's most intense bursts: `pieces` windows of `fraction` / `pieces` of [t0, t1]
    each, in time order. Taken greedily: the burst is the sub-window of `burst` × a piece's length holding the most
    ops (on the bins of `counts`) among the positions whose piece does not overlap a piece already taken; its piece
    starts a quarter of a piece before it (the load that leads into the burst, then three quarters to show whether
    the queues recover), shifted to stay inside the span. `fraction` 1 gives the whole span."""
    if not (0.0 < fraction <= 1.0):
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction >= 1.0 or t1 <= t0:
        return (Window(0, t0, math.nextafter(t1, math.inf)),)
    n = counts.size
    width = (t1 - t0) / n
    piece = max(1, min(n, round(fraction * n / pieces)))  # bins per piece
    b = max(1, round(burst * piece))  # bins per burst
    cum = np.concatenate(([0], np.cumsum(counts)))
    sums = (cum[b:] - cum[:-b]).astype(np.float64)  # ops in bins [i, i + b)
    starts = np.clip(np.arange(sums.size) - piece // 4, 0, n - piece)  # the piece of a burst at bin i
    taken: list[int] = []  # first bins of the pieces taken
    for _ in range(pieces):
        free = sums.copy()
        for s in taken:  # a burst whose piece would overlap piece s
            free[np.abs(starts - s) < piece] = -1.0
        i = int(np.argmax(free))
        if free[i] < 0.0:
            break
        taken.append(int(starts[i]))
    return tuple(Window(j, t0 + s * width, t0 + (s + piece) * width) for j, s in enumerate(sorted(taken)))


def error_bound(fraction: float) -> tuple[float, float]:
    """(p50 %, p99 %) error bound of a sample of `fraction` of the span, from `CALIBRATION`: the bound of the
    largest calibrated fraction not above it; below the smallest one, that bound × sqrt(smallest / fraction)."""
    if fraction >= 1.0:
        return 0.0, 0.0
    below = [c for c in CALIBRATION if c[0] <= fraction]
    if below:
        _, p50, p99 = below[-1]
        return p50, p99
    f0, p50, p99 = CALIBRATION[0]
    scale = math.sqrt(f0 / fraction)
    return p50 * scale, p99 * scale


def fraction_for_error(target_p99_pct: float) -> float:
    """The smallest calibrated fraction whose p99 bound is at most `target_p99_pct` (1.0: the whole trace)."""
    for fraction, _, p99 in CALIBRATION:
        if p99 <= target_p99_pct:
            return fraction
    return 1.0


def describe(info: SampleInfo, spec: SamplingSpec, fraction: float, load_factor: float | None) -> dict[str, Any]:
    """The recommendation's `sampling` block."""
    p50, p99 = error_bound(fraction)
    extrapolated = fraction < CALIBRATION[0][0]
    return {
        "replayed_fraction": info.replayed_fraction,
        "span_fraction": fraction,
        "target_error_pct": spec.target_error_pct,
        "strata": spec.strata,
        "seed": spec.seed,
        "windows": [[w.start, w.end] for w in info.windows],
        "requests": info.requests,
        "requests_total": info.requests_total,
        "load_factor": load_factor,
        "error_bound": {"p50_pct": p50, "p99_pct": p99,
                        "basis": "calibration (extrapolated below the smallest calibrated fraction)"
                        if extrapolated else "calibration",
                        "calibrated_on": CALIBRATED_ON, "not_valid_for": NOT_VALID_FOR},
        "method": METHOD,
    }


def sample_source(
    source: WorkloadSource, fraction: float, spec: SamplingSpec, settings: Settings
) -> tuple[Path, SampleInfo]:
    """The sampled trace of a source, written once to `TAILTUNE_HOME/samples/<hash>.parquet`. Datasets and
    Parquet traces are streamed (`sample_parquet`); other sources (CSV files, generator profiles) are loaded whole
    and sampled with `sample_table`."""

    def windows(t0: float, t1: float, _: Callable[[], I64]) -> tuple[Window, ...]:
        return plan_windows(t0, t1, fraction, spec.strata, spec.seed)

    return _write_sample(source, settings, windows)


def peak_source(source: WorkloadSource, fraction: float, settings: Settings) -> tuple[Path, SampleInfo]:
    """The stretches around the trace's most intense bursts, `fraction` of its span in all (`burst_windows` on
    `ops_histogram`), written like a sample (`sample_source`, laid end to end): what the peak check
    (tuner/peak_check.py) replays."""

    def windows(t0: float, t1: float, counts: Callable[[], I64]) -> tuple[Window, ...]:
        return burst_windows(counts(), t0, t1, fraction)

    return _write_sample(source, settings, windows)


def _write_sample(
    source: WorkloadSource, settings: Settings,
    windows: Callable[[float, float, Callable[[], I64]], tuple[Window, ...]],
) -> tuple[Path, SampleInfo]:
    """The rows of `source` in `windows(t0, t1, histogram)` (the span and a lazy `ops_histogram`), written once
    to `TAILTUNE_HOME/samples/<hash>.parquet` (the one function here that reads and writes files)."""
    import os

    import pyarrow.parquet as pq

    files = _parquet_files(source, settings)
    if files:  # streamed: the whole trace is never in memory
        t0, t1 = parquet_span(files)
        sample, info = sample_parquet(files, windows(t0, t1, lambda: _parquet_histogram(files, t0, t1)))
    else:
        table = source.load(settings)
        if "ts" not in table.column_names:
            raise BadInputError.single(source.where, "sampling needs a ts column", field="ts")
        span = pc.min_max(table.column("ts")).as_py()
        lo, hi = float(span["min"]), float(span["max"])
        ts = table.column("ts")
        sample, info = sample_table(table, windows(lo, hi, lambda: ops_histogram(
            ts.to_numpy().astype(np.float64), lo, hi)))  # fmt: skip
        del table, ts
    path = settings.home_dir / "samples" / f"{source_key(source, [[w.start, w.end] for w in info.windows])}.parquet"
    if not path.exists():  # written next to its place, renamed when complete
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        pq.write_table(sample, tmp, compression="zstd")
        os.replace(tmp, path)
    return path, info


def write_input(kind: str, text: str, settings: Settings) -> Path:
    """A `reproduce` input too long for a command line (a measured round trip's quantiles), written once to
    `TAILTUNE_HOME/samples/<kind>-<hash>.txt` beside the samples the same commands replay (renamed into place when
    complete); the same text is the same file."""
    import hashlib
    import os

    path = settings.home_dir / "samples" / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return path


def requests_in(ids: I64, last_id: int | None) -> int:
    """Requests starting in a batch of `request_id`s that follows one ending with `last_id` (None: the first
    batch): a change of id between consecutive rows, exact when a request's rows are consecutive."""
    if ids.size == 0:
        return 0
    return int(np.count_nonzero(ids[1:] != ids[:-1])) + int(last_id is None or ids[0] != last_id)


def source_key(source: WorkloadSource, *extra: Any) -> str:
    """A short hash naming what is written from `source` (and `extra`) under `TAILTUNE_HOME/samples`: a trace file
    rewritten in place (another size or time) is another trace."""
    import hashlib
    import json
    import os

    stat = os.stat(source.trace) if source.trace is not None else None
    key = json.dumps([source.as_dict(), [stat.st_size, stat.st_mtime_ns] if stat else None, *extra], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _parquet_files(source: WorkloadSource, settings: Settings) -> list[Path]:
    """The Parquet files of a dataset or a Parquet trace; [] for other sources."""
    if source.dataset is not None:
        from ingest.store import DatasetStore

        return list(DatasetStore(settings).get(source.dataset).parquet_files)
    if source.trace is not None and source.trace.endswith(".parquet") and Path(source.trace).is_file():
        return [Path(source.trace)]
    return []
