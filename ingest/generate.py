"""Synthetic multiget traces in the canonical long format (`tailtune generate`); profiles in ingest/profiles/.

Generation is streamed and vectorized: requests are drawn in fixed blocks of `BLOCK_REQUESTS`, each from its
own random stream `SeedSequence(seed, spawn_key=(block,))`, so the output depends only on (profile, options,
requests, seed, rate), not on `batch_requests`, and the same inputs give byte-identical files. Memory is
bounded by one block plus one output batch (plus 8 bytes per distinct key for the exact distinct-key count).

Per request: arrival `ts` from the profile's arrival process with long-run mean `rate` requests/s (a Poisson
process unless the profile has its own, see ingest/profiles/timing.py), a multiget size, then that many
*distinct* key ids (duplicates within a request are redrawn; drifted per time epoch when the profile says so),
each with the value size the profile assigns to that key.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from base.errors import BadInputError, InputProblem, TailtuneError
from ingest.profiles import PROFILES, Profile
from ingest.profiles.base import OPTION_SOURCE
from ingest.schema import canonical_schema_for

__all__ = [
    "BLOCK_REQUESTS",
    "DEFAULT_RATE",
    "GENERATED_SCHEMA",
    "OUTPUT_SUFFIXES",
    "PROFILES",
    "WRITE_BATCH_ROWS",
    "GenerateStats",
    "generate_batches",
    "generate_table",
    "make_profile",
    "parse_option_strings",
    "write_trace",
]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

#: Default arrival rate, requests per second.
DEFAULT_RATE: Final = 1000.0
#: Requests per internal random block (fixed: changing it changes every generated trace).
BLOCK_REQUESTS: Final = 16_384
#: `write_trace` sizes its batches (= Parquet row groups) to about this many rows, bounding its memory.
WRITE_BATCH_ROWS: Final = 1_000_000
#: The canonical columns a generated trace has.
GENERATED_SCHEMA: Final = canonical_schema_for({"op"})
#: Output formats by file suffix.
OUTPUT_SUFFIXES: Final = (".csv", ".csv.gz", ".csv.zst", ".parquet")
_MAX_DEDUP_ROUNDS: Final = 10_000


# ------------------------------------------------------------ profiles & options
def make_profile(profile: str, options: Mapping[str, object] | None = None) -> Profile[Any]:
    """The named profile with its options parsed and checked (BadInputError, exit 2, on any problem)."""
    cls = PROFILES.get(profile)
    if cls is None:
        valid = ", ".join(PROFILES)
        raise BadInputError.single("--profile", f"unknown profile '{profile}' (valid: {valid})", field="profile")
    return cls.from_options(options)


def parse_option_strings(items: Sequence[str]) -> dict[str, str]:
    """`["mice=10", "mix=5:1"]` → `{"mice": "10", "mix": "5:1"}` (values are coerced by the profile)."""
    out: dict[str, str] = {}
    problems: list[InputProblem] = []
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            problems.append(InputProblem(OPTION_SOURCE, None, None, f'expected KEY=VALUE, got "{item}"'))
        elif name in out:
            problems.append(InputProblem(OPTION_SOURCE, None, name, "given more than once"))
        else:
            out[name] = value.strip()
    if problems:
        raise BadInputError(problems)
    return out


def _check_run(requests: int, seed: int, rate: float, batch_requests: int) -> None:
    problems = []
    if isinstance(requests, bool) or not isinstance(requests, int) or requests < 1:
        problems.append(InputProblem("--requests", None, "requests", f"expected a positive integer, got {requests}"))
    else:
        from base.settings import get_settings

        cap = get_settings().ingest_max_rows  # a request is at least one row of the trace
        if cap and requests > cap:
            shown = str(requests) if requests < 10**30 else f"an integer of {len(str(requests))} digits"
            problems.append(InputProblem(
                "--requests", None, "requests",
                f"{shown} is more than a trace may hold (TAILTUNE_INGEST_MAX_ROWS {cap:,} rows)",
            ))
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problems.append(InputProblem("--seed", None, "seed", f"expected a non-negative integer, got {seed}"))
    if not (isinstance(rate, int | float) and rate > 0 and np.isfinite(rate)):
        problems.append(InputProblem("--rate", None, "rate", f"expected a positive number, got {rate}"))
    if batch_requests < 1:
        problems.append(InputProblem("batch_requests", None, None, f"expected >= 1, got {batch_requests}"))
    if problems:
        raise BadInputError(problems)


# ------------------------------------------------------------ block generation
@dataclass(frozen=True, slots=True)
class _Block:
    """Consecutive requests from `first`: per-request sizes and arrivals, per-row key ids and value sizes."""

    first: int
    sizes: I64
    ts: F64
    keys: I64
    values: I64


def _distinct_within_requests(keys: I64, sizes: I64, redraw: Callable[[int], I64], key_space: int) -> None:
    """Redraw (in place) every key that repeats inside its request until all requests have distinct keys.

    Equivalent to drawing each request's keys one by one and rejecting repeats, i.e. sampling without
    replacement weighted by popularity. Only requests that still hold duplicates are re-examined each round.
    """
    n_req = sizes.size
    row_req = np.repeat(np.arange(n_req, dtype=np.int64), sizes)
    rows = np.flatnonzero(np.repeat(sizes > 1, sizes))  # single-key requests never collide
    for _ in range(_MAX_DEDUP_ROUNDS):
        if rows.size == 0:
            return
        packed = row_req[rows] * key_space + keys[rows]
        order = np.argsort(packed, kind="stable")  # stable: the first occurrence in draw order is kept
        ordered = packed[order]
        repeat = np.flatnonzero(ordered[1:] == ordered[:-1]) + 1
        if repeat.size == 0:
            return
        dup_rows = rows[order[repeat]]
        keys[dup_rows] = redraw(dup_rows.size)
        touched = np.zeros(n_req, dtype=np.bool_)
        touched[row_req[dup_rows]] = True
        rows = rows[touched[row_req[rows]]]
    raise TailtuneError(
        f"could not make keys distinct within requests after {_MAX_DEDUP_ROUNDS} rounds",
        hint="use a key_space well above the largest multiget size",
    )


def _blocks(profile: Profile[Any], requests: int, seed: int, rate: float) -> Iterator[_Block]:
    comp = profile.components
    clock = comp.arrivals.clock(seed, rate)
    for index, first in enumerate(range(0, requests, BLOCK_REQUESTS)):
        n = min(BLOCK_REQUESTS, requests - first)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(index,))))
        ts = clock.next(rng, n)
        sizes = comp.sizes.draw(rng, n)
        keys = comp.keys.draw(rng, int(sizes.sum()))
        _distinct_within_requests(keys, sizes, functools.partial(comp.keys.draw, rng), comp.keys.key_space)
        if comp.drift is not None:
            keys = comp.drift.apply(keys, np.repeat(ts, sizes), seed)
        yield _Block(first, sizes, ts, keys, comp.values(keys))


def _rechunk(blocks: Iterator[_Block], batch_requests: int) -> Iterator[_Block]:
    """Regroup blocks into pieces of exactly `batch_requests` requests (the last one may be shorter)."""
    pending: list[_Block] = []
    held = 0
    for block in blocks:
        pending.append(block)
        held += block.sizes.size
        while held >= batch_requests:
            merged = _concat(pending)
            head, tail = _split(merged, batch_requests)
            yield head
            pending = [tail] if tail.sizes.size else []
            held = tail.sizes.size
    if held:
        yield _concat(pending)


def _concat(blocks: list[_Block]) -> _Block:
    if len(blocks) == 1:
        return blocks[0]
    return _Block(
        blocks[0].first,
        np.concatenate([b.sizes for b in blocks]),
        np.concatenate([b.ts for b in blocks]),
        np.concatenate([b.keys for b in blocks]),
        np.concatenate([b.values for b in blocks]),
    )


def _split(block: _Block, n: int) -> tuple[_Block, _Block]:
    rows = int(block.sizes[:n].sum())
    head = _Block(block.first, block.sizes[:n], block.ts[:n], block.keys[:rows], block.values[:rows])
    tail = _Block(block.first + n, block.sizes[n:], block.ts[n:], block.keys[rows:], block.values[rows:])
    return head, tail


def _to_batch(block: _Block) -> pa.RecordBatch:
    n_rows = block.keys.size
    request_id = np.repeat(np.arange(block.first, block.first + block.sizes.size, dtype=np.int64), block.sizes)
    key = pc.utf8_replace_slice(pc.cast(pa.array(block.keys, type=pa.int64()), pa.string()), 0, 0, "k")
    op = pa.StringArray.from_buffers(
        n_rows, pa.py_buffer(np.arange(0, 3 * n_rows + 1, 3, dtype=np.int32)), pa.py_buffer(b"get" * n_rows)
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array(request_id, type=pa.int64()),
            pa.array(np.repeat(block.ts, block.sizes), type=pa.float64()),
            key,
            pa.array(block.values, type=pa.int64()),
            op,
        ],
        schema=GENERATED_SCHEMA,
    )


def _block_stream(
    profile: str | Profile[Any],
    requests: int,
    seed: int,
    rate: float | None,
    batch_requests: int,
    profile_options: Mapping[str, object],
) -> Iterator[_Block]:
    if isinstance(profile, str):
        prof = make_profile(profile, profile_options)
    else:
        if profile_options:
            raise TypeError("pass options either with the profile name or inside the Profile object, not both")
        prof = profile
    rate = DEFAULT_RATE if rate is None else rate
    _check_run(requests, seed, rate, batch_requests)
    return _rechunk(_blocks(prof, requests, seed, float(rate)), batch_requests)


def generate_batches(
    profile: str | Profile[Any],
    requests: int,
    seed: int,
    *,
    rate: float | None = None,
    batch_requests: int = 100_000,
    **profile_options: object,
) -> Iterator[pa.RecordBatch]:
    """Canonical batches (request_id, ts, key, value_size, op='get') of `batch_requests` whole requests each.

    Profile options and arguments are checked before the first batch is produced (errors raise immediately).
    """
    blocks = _block_stream(profile, requests, seed, rate, batch_requests, profile_options)
    return (_to_batch(b) for b in blocks)


def generate_table(
    profile: str | Profile[Any],
    requests: int,
    seed: int,
    *,
    rate: float | None = None,
    batch_requests: int = 100_000,
    **profile_options: object,
) -> pa.Table:
    """The whole trace in memory (for tests and small traces)."""
    batches = list(
        generate_batches(profile, requests, seed, rate=rate, batch_requests=batch_requests, **profile_options)
    )
    return pa.Table.from_batches(batches, schema=GENERATED_SCHEMA)


# ------------------------------------------------------------ statistics
@dataclass
class GenerateStats:
    """What `tailtune generate` reports about the trace it wrote (`--json` prints `as_dict()`)."""

    out: str
    format: str
    profile: str
    seed: int
    rate: float
    options: dict[str, Any]
    rows: int = 0
    requests: int = 0
    mean_size: float = 0.0
    multi_key_fraction: float = 0.0
    max_size: int = 0
    distinct_keys: int = 0
    duration_s: float = 0.0
    bytes: int = 0
    elapsed_s: float = 0.0
    rows_per_s: float = 0.0
    expected: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _StatsAccumulator:
    """Streaming counts; distinct keys exactly (sorted unique ids, merged per block in linear time)."""

    def __init__(self) -> None:
        self.rows = 0
        self.requests = 0
        self.multi = 0
        self.max_size = 0
        self.last_ts = 0.0
        self._distinct: I64 = np.empty(0, dtype=np.int64)

    def add(self, block: _Block) -> None:
        self.rows += int(block.keys.size)
        self.requests += int(block.sizes.size)
        self.multi += int(np.count_nonzero(block.sizes > 1))
        self.max_size = max(self.max_size, int(block.sizes.max()))
        self.last_ts = float(block.ts[-1])
        # Not np.unique: NumPy >= 2.3 answers it with a hash table, ~10x slower than sorting here.
        merged = np.concatenate([self._distinct, np.sort(block.keys)])
        merged.sort(kind="stable")  # two sorted runs: timsort merges them in linear time
        keep = np.empty(merged.size, dtype=np.bool_)
        keep[:1] = True
        np.not_equal(merged[1:], merged[:-1], out=keep[1:])
        self._distinct = merged[keep]

    @property
    def distinct_keys(self) -> int:
        return int(self._distinct.size)


# ------------------------------------------------------------ sinks
def _output_format(out: Path) -> str:
    name = out.name.lower()
    for suffix in sorted(OUTPUT_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return suffix.lstrip(".")
    raise BadInputError.single(
        str(out), f"unsupported output extension (valid: {', '.join(OUTPUT_SUFFIXES)})", field="out"
    )


class _TraceSink:
    """Writes batches to one open file in one format."""

    def write(self, batch: pa.RecordBatch) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _CsvSink(_TraceSink):
    """CSV with a header row, unquoted (generated keys never contain separators); optionally gzip/zstd."""

    def __init__(self, path: Path, compression: str | None) -> None:
        import pyarrow.csv as pacsv

        self._stream = pa.CompressedOutputStream(str(path), compression) if compression else pa.OSFile(str(path), "wb")
        options = pacsv.WriteOptions(include_header=True, quoting_style="none", quoting_header="none")
        self._writer = pacsv.CSVWriter(self._stream, GENERATED_SCHEMA, write_options=options)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()
        self._stream.close()


class _ParquetSink(_TraceSink):
    """zstd Parquet; one row group per batch; generator provenance in the file's key-value metadata."""

    def __init__(self, path: Path, provenance: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        schema = GENERATED_SCHEMA.with_metadata({"tailtune.generator": json.dumps(provenance, sort_keys=True)})
        self._writer = pq.ParquetWriter(str(path), schema, compression="zstd")
        self._schema = schema

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_table(pa.Table.from_batches([batch], schema=self._schema))

    def close(self) -> None:
        self._writer.close()


def _open_sink(fmt: str, path: Path, provenance: dict[str, Any]) -> _TraceSink:
    if fmt == "parquet":
        return _ParquetSink(path, provenance)
    compression = {"csv": None, "csv.gz": "gzip", "csv.zst": "zstd"}[fmt]
    return _CsvSink(path, compression)


def write_trace(
    out: Path | str,
    profile: str | Profile[Any],
    requests: int,
    seed: int,
    *,
    rate: float | None = None,
    batch_requests: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    **profile_options: object,
) -> GenerateStats:
    """Generate a trace into `out` (format by extension), atomically: a hidden temp file next to `out`,
    renamed into place when complete, removed on any failure. `on_progress(n)` gets the requests written.
    `batch_requests` defaults to about `WRITE_BATCH_ROWS` rows per batch at the profile's mean size.
    """
    out = Path(out)
    fmt = _output_format(out)
    prof = make_profile(profile, profile_options) if isinstance(profile, str) else profile
    if batch_requests is None:
        batch_requests = max(1, round(WRITE_BATCH_ROWS / prof.expected()["mean_size"]))
    blocks = _block_stream(prof, requests, seed, rate, batch_requests, {})
    rate = DEFAULT_RATE if rate is None else float(rate)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create directory {out.parent}: {exc}"
        raise BadInputError.single(str(out), problem, field="out") from None
    options = prof.options.as_dict()
    provenance = {"profile": prof.name, "seed": seed, "requests": requests, "rate": rate, "options": options}
    stats = GenerateStats(out=str(out), format=fmt, profile=prof.name, seed=seed, rate=rate, options=options)
    acc = _StatsAccumulator()
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    started = time.perf_counter()
    try:
        sink = _open_sink(fmt, tmp, provenance)
        try:
            for block in blocks:
                sink.write(_to_batch(block))
                acc.add(block)
                if on_progress is not None:
                    on_progress(acc.requests)
        finally:
            sink.close()
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    stats.elapsed_s = time.perf_counter() - started
    stats.rows, stats.requests, stats.max_size = acc.rows, acc.requests, acc.max_size
    stats.mean_size = acc.rows / acc.requests
    stats.multi_key_fraction = acc.multi / acc.requests
    stats.distinct_keys = acc.distinct_keys
    stats.duration_s = acc.last_ts
    stats.bytes = out.stat().st_size
    stats.rows_per_s = acc.rows / stats.elapsed_s if stats.elapsed_s > 0 else 0.0
    stats.expected = prof.expected()
    return stats
