"""`ingest_file`: one trace file → one validated canonical dataset (or a clear error and nothing written).

Stages (all streaming, bounded memory): sniff → reader (canonical chunks + source lines) → [external sort]
→ request ids (single-key traces) → StreamValidator → DatasetWriter → DuckDB counts → manifest → publish.
The dataset id is derived from the source bytes and the options that change the result, so ingesting the
same bytes again returns the existing dataset without writing anything.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from base import __version__
from base.errors import BadInputError, TailtuneError
from base.settings import Settings, get_settings
from ingest.formats import AUTO, READERS, format_choices, reader_class
from ingest.formats.base import Chunk, ReaderOptions, TraceReader, too_many_rows
from ingest.formats.source import Source
from ingest.grouping import OnePerRow, RequestIds, StatementGrouper, WindowGrouper
from ingest.limits import Limits
from ingest.schema import OPTIONAL_FIELDS, SCHEMA_VERSION, canonical_schema_for
from ingest.sniff import sniff_directory, sniff_source
from ingest.sorting import sorted_chunks
from ingest.store import DatasetInfo, DatasetStore
from ingest.validate import ErrorPolicy, ErrorSink, StreamValidator, UnsortedPolicy
from ingest.writer import BackgroundWriter, DatasetWriter, staging_dir

if TYPE_CHECKING:
    from ingest.formats.cassandra_fql.nodes import NodeLog

__all__ = ["Progress", "dataset_id", "ingest_file", "ingest_node_logs", "sha256_file"]

#: progress(bytes_read, total_bytes), called after each chunk.
Progress = Callable[[int, int], None]

_COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd", ".xz", ".bz2")

#: The grouping window of query logs (`cassandra-fql` formats) when none is given: 1 ms, the log's resolution.
QUERY_LOG_WINDOW_S = 0.001


def sha256_file(path: Path, progress: Progress | None = None) -> str:
    h = hashlib.sha256()
    size = path.stat().st_size
    done = 0
    with path.open("rb") as fh:
        while block := fh.read(8 << 20):
            h.update(block)
            done += len(block)
            if progress is not None:
                progress(done, size)
    return h.hexdigest()


def dataset_id(source_sha256: str, options: dict[str, Any]) -> str:
    """16 hex digits of sha256(source sha256 + canonical JSON of the result-changing ingest options)."""
    canonical = json.dumps(options, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{source_sha256}\n{canonical}".encode()).hexdigest()[:16]


def _default_name(path: Path) -> str:
    name = path.name
    for suffix in _COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    stem = Path(name).stem
    return stem or name


def _choice(value: str, enum: type[ErrorPolicy] | type[UnsortedPolicy], label: str, flag: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(m.value for m in enum)
        raise BadInputError.single(label, f"{flag} must be one of {choices}, got '{value}'") from None


def _check_window(label: str, group_window_s: float | None, no_grouping: bool) -> None:
    if group_window_s is not None and not group_window_s >= 0:
        raise BadInputError.single(label, f"the grouping window must be >= 0, got {group_window_s} s")
    if group_window_s is not None and no_grouping:
        raise BadInputError.single(label, "--no-grouping and a grouping window exclude each other")


def ingest_file(
    path: Path,
    *,
    fmt: str = "auto",
    name: str | None = None,
    mapping: dict[str, str] | None = None,
    group_window_s: float | None = None,
    no_grouping: bool = False,
    tables: tuple[str, ...] = (),
    schema_file: Path | None = None,
    max_errors: int = 20,
    on_error: str = "fail",
    unsorted: str = "reject",
    rate: float = 1000.0,
    watch_gap_us: int | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
    limits: Limits | None = None,
) -> DatasetInfo:
    """Ingest one trace file into the dataset store; returns the new (or already existing) dataset.

    `DatasetInfo.reused` tells whether the same bytes with the same options had been ingested before.
    Raises BadInputError (exit 2, `FILE:LINE: field 'x': problem` lines) and leaves nothing behind on failure.
    `limits` caps the input (ingest.limits); without it, the `TAILTUNE_INGEST_MAX_*` settings apply (the caps of
    uploads). The caps do not change a result, so they are not part of the dataset id.

    A query log (`cassandra-fql` formats; `path` may then be the log's directory) takes `schema_file` and `tables`,
    and groups its single-partition reads within `group_window_s` (default `QUERY_LOG_WINDOW_S`) unless
    `no_grouping` (docs/formats.md § cassandra-fql).
    `watch_gap_us` is the memcached-watch grouping's gap (default: `TAILTUNE_MEMCACHED_WATCH_GAP_US`; refused for
    other formats).
    """
    settings = settings or get_settings()
    limits = limits or Limits.from_settings(settings)
    path = Path(path)
    label = str(path)
    directory = path.is_dir()
    if not path.is_file() and not directory:
        raise BadInputError.single(label, "no such file")
    policy: ErrorPolicy = _choice(on_error, ErrorPolicy, label, "--on-error")
    sort_policy: UnsortedPolicy = _choice(unsorted, UnsortedPolicy, label, "--unsorted")
    _check_window(label, group_window_s, no_grouping)
    if not rate > 0:
        raise BadInputError.single(label, f"--rate must be > 0, got {rate}")
    if watch_gap_us is not None and watch_gap_us < 0:
        raise BadInputError.single(label, f"--watch-gap-us must be >= 0, got {watch_gap_us}")

    reason = "given with --format"
    if directory:
        source = Source(path=path, compression="none", size=0, limits=limits)
        if fmt == AUTO:
            fmt, reason = sniff_directory(path)
        elif fmt in READERS and not reader_class(fmt).reads_directory:
            raise BadInputError.single(label, f"is a directory; the format {fmt} reads a file")
    else:
        source = Source.of(path, limits)
        source.check_size()
        if fmt == AUTO:
            sniffed = sniff_source(source, mapping)
            fmt, reason = sniffed.format, sniffed.reason
    if fmt not in READERS:
        known = ", ".join(format_choices())
        raise BadInputError.single(label, f"unknown format '{fmt}'", hint=f"known formats: {known}")
    if not directory and source.size == 0:
        raise BadInputError.single(label, "file is empty", line=1)
    sink = ErrorSink(label, max_errors=max_errors, policy=policy)
    reader_type = reader_class(fmt)
    query_log = reader_type.query_log
    if not query_log and (tables or schema_file is not None):
        raise BadInputError.single(label, f"--table and --schema are for query logs (cassandra-fql); this is {fmt}")
    gap = settings.memcached_watch_gap_us if watch_gap_us is None else watch_gap_us
    reader_options = ReaderOptions(
        mapping=dict(mapping or {}),
        rate=rate,
        limits=limits,
        watch_gap_us=gap,
        schema=schema_file,
        tables=tuple(tables),
        cassandra_lib=settings.cassandra_lib,
    )
    reader: TraceReader = reader_type(source, reader_options, sink)
    own_options = reader.id_options()
    if watch_gap_us is not None and "watch_gap_us" not in own_options:
        raise BadInputError.single(label, f"--watch-gap-us applies to memcached-watch logs only, not to {fmt}")
    if not reader.ordered:  # its rows come out of time order whatever the file: always sorted
        sort_policy = UnsortedPolicy.SORT
    columns = reader.columns()
    single_key = "request_id" not in columns
    if group_window_s is not None and not single_key and not query_log:
        raise BadInputError.single(
            label, "a grouping window groups single-key traces; this file already has request ids"
        )
    if query_log:
        group_window_s = None if no_grouping else (QUERY_LOG_WINDOW_S if group_window_s is None else group_window_s)
        sort_policy = UnsortedPolicy.SORT  # records are logged as queries end: sorted by start, always

    options: dict[str, Any] = {
        "format": fmt,
        "mapping": dict(sorted((mapping or {}).items())),
        "group_window_s": group_window_s,
        "on_error": policy.value,
        "unsorted": sort_policy.value,
    }
    if reader.uses_rate():
        options["rate"] = rate
    options.update(own_options)
    if tables:
        options["tables"] = sorted(set(tables))
    if schema_file is not None:
        options["schema_sha256"] = sha256_file(schema_file)
    if directory:
        source_sha, source.size = reader_type.hash_directory(path)
    else:
        source_sha = sha256_file(path)
    return _write_dataset(
        reader,
        columns,
        sink,
        options,
        source_sha,
        settings=settings,
        limits=limits,
        sort_policy=sort_policy,
        group_window_s=group_window_s,
        name=name or _default_name(path),
        label=label,
        source_entry=lambda: {
            "file_name": path.name,
            "sha256": source_sha,
            "bytes": source.size,
            "format": fmt,
            "layout": reader.layout,
            "compression": source.compression,
            "detected": reason,
        },
        progress=(lambda: (min(source.bytes_read, source.size), source.size)) if progress is not None else None,
        on_progress=progress,
    )


def ingest_node_logs(
    logs: Sequence[NodeLog],
    *,
    fmt: str = "auto",
    name: str | None = None,
    cluster_nodes: int | None = None,
    group_window_s: float | None = None,
    no_grouping: bool = False,
    tables: tuple[str, ...] = (),
    schema_file: Path | None = None,
    max_errors: int = 20,
    on_error: str = "fail",
    duplicate_window_ms: int | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
    limits: Limits | None = None,
) -> DatasetInfo:
    """Several nodes' full query logs (one per node, all of one query-log format) → one dataset, in time order,
    with the node as the `node` column (docs/formats.md § Several nodes' logs; `ingest.formats.cassandra_fql.nodes`).

    The manifest's `nodes` says what each log held, the likely duplicates across nodes (same statement and values
    within `duplicate_window_ms`, default `TAILTUNE_FQL_DUPLICATE_WINDOW_MS`; kept, counted, warned about) and, when
    the caller gives the cluster's node count (`cluster_nodes`), what the nodes without a log leave out (also a
    warning). Options as `ingest_file`'s for a query log.
    """
    from ingest.formats.cassandra_fql.nodes import MergedLogs, check_logs, missing_share
    from ingest.formats.cassandra_fql.records import QueryLogReader

    settings = settings or get_settings()
    limits = limits or Limits.from_settings(settings)
    if not logs:
        raise BadInputError.single("command line", "no node's log given")
    check_logs(logs)
    label = str(logs[0].path)
    if cluster_nodes is not None and cluster_nodes < len(logs):
        raise BadInputError.single(
            "command line", f"--nodes {cluster_nodes}, but {len(logs)} nodes' logs are given: one log per node"
        )
    window_ms = settings.fql_duplicate_window_ms if duplicate_window_ms is None else duplicate_window_ms
    if window_ms < 0:
        raise BadInputError.single("command line", f"the duplicate window must be >= 0 ms, got {window_ms}")
    policy: ErrorPolicy = _choice(on_error, ErrorPolicy, label, "--on-error")
    _check_window(label, group_window_s, no_grouping)
    formats: list[tuple[str, str]] = []
    sources: list[Source] = []
    for log in logs:
        where = str(log.path)
        if log.path.is_dir():
            source = Source(path=log.path, compression="none", size=0, limits=limits)
            found = sniff_directory(log.path) if fmt == AUTO else (fmt, "given with --format")
        else:
            source = Source.of(log.path, limits)
            source.check_size()
            if fmt == AUTO:
                sniffed = sniff_source(source, None)
                found = (sniffed.format, sniffed.reason)
            else:
                found = (fmt, "given with --format")
            if source.size == 0:
                raise BadInputError.single(where, "file is empty", line=1)
        if found[0] not in READERS:
            known = ", ".join(format_choices())
            raise BadInputError.single(where, f"unknown format '{found[0]}'", hint=f"known formats: {known}")
        reader_type = reader_class(found[0])
        if not reader_type.query_log:
            raise BadInputError.single(
                where, f"is {found[0]}, not a full query log: only query logs are ingested one per node"
            )
        if log.path.is_dir() != reader_type.reads_directory:
            what = "a directory" if log.path.is_dir() else "a file"
            raise BadInputError.single(where, f"is {what}; the format {found[0]} reads the other")
        if formats and found[0] != formats[0][0]:
            raise BadInputError.single(
                where, f"is {found[0]}, the log of node {logs[0].name} is {formats[0][0]}: the nodes' logs are "
                "ingested in one format"
            )
        formats.append(found)
        sources.append(source)
    fmt = formats[0][0]
    reader_type = reader_class(fmt)
    reader_options = ReaderOptions(
        limits=limits, schema=schema_file, tables=tuple(tables), cassandra_lib=settings.cassandra_lib
    )
    sink = ErrorSink(label, max_errors=max_errors, policy=policy)
    sinks = [ErrorSink(str(log.path), max_errors=max_errors, policy=policy) for log in logs]
    node_readers = [
        reader_type(source, reader_options, node_sink) for source, node_sink in zip(sources, sinks, strict=True)
    ]
    readers: list[QueryLogReader] = []
    for r in node_readers:
        assert isinstance(r, QueryLogReader)
        readers.append(r)
    merged = MergedLogs(logs, readers, sinks, sink, duplicate_window_ms=window_ms, settings=settings)
    group = None if no_grouping else (QUERY_LOG_WINDOW_S if group_window_s is None else group_window_s)
    options: dict[str, Any] = {
        "format": fmt,
        "mapping": {},
        "group_window_s": group,
        "on_error": policy.value,
        "unsorted": UnsortedPolicy.SORT.value,
        "nodes": [log.name for log in logs],
    }
    options.update(merged.id_options())
    if cluster_nodes is not None:
        options["cluster_nodes"] = cluster_nodes
    if tables:
        options["tables"] = sorted(set(tables))
    if schema_file is not None:
        options["schema_sha256"] = sha256_file(schema_file)
    h = hashlib.sha256()
    total = 0
    hashes: list[tuple[str, int]] = []
    for log in logs:
        sha, size = reader_type.hash_directory(log.path) if log.path.is_dir() else (sha256_file(log.path), 0)
        size = size or (log.path.stat().st_size if log.path.is_file() else 0)
        hashes.append((sha, size))
        total += size
        h.update(f"{log.name}\0{sha}\0{size}\n".encode())
    source_sha = h.hexdigest()
    reasons = sorted({r for _, r in formats if r})

    def finish(manifest: dict[str, Any]) -> None:
        requests = int(manifest["requests"])
        entry: dict[str, Any] = {
            "logs": [
                {"name": log.name, "file_name": log.path.name, "sha256": sha, "bytes": size, **seen}
                for log, (sha, size), seen in zip(logs, hashes, merged.per_node, strict=True)
            ],
            "duplicates": {
                "likely": merged.duplicates,
                "window_ms": window_ms,
                "kept": True,
                "method": "records whose keyspace, statements and bound values equal those of a record another "
                "node logged at most window_ms earlier (or at the same ms, from a node earlier in the list)",
            },
        }
        if cluster_nodes is not None:
            entry["missing"] = missing_share(len(logs), cluster_nodes, requests)
            if cluster_nodes > len(logs):
                m = entry["missing"]
                manifest["warnings"].append(
                    f"{m['missing_nodes']} of the cluster's {cluster_nodes} nodes have no log here: the requests "
                    f"they coordinated are not in the dataset, about {m['missing_share']:.0%} of the traffic "
                    f"(~{m['estimated_missing_requests']:,} requests, the logged nodes' mean per node)"
                )
        manifest["nodes"] = entry

    return _write_dataset(
        merged,
        merged.columns(),
        sink,
        options,
        source_sha,
        settings=settings,
        limits=limits,
        sort_policy=UnsortedPolicy.SORT,
        group_window_s=group,
        name=name or "+".join(log.name for log in logs)[:200],
        label=label,
        source_entry=lambda: {
            "file_name": ", ".join(log.path.name for log in logs),
            "sha256": source_sha,
            "bytes": total,
            "format": fmt,
            "layout": None,
            "compression": "none" if all(src.compression == "none" for src in sources) else "mixed",
            "detected": "; ".join(reasons) if reasons else "given with --format",
        },
        progress=None,
        on_progress=progress,
        tiebreak=("node",),
        finish_manifest=finish,
    )


def _write_dataset(
    reader: TraceReader,
    columns: list[str],
    sink: ErrorSink,
    options: dict[str, Any],
    source_sha: str,
    *,
    settings: Settings,
    limits: Limits,
    sort_policy: UnsortedPolicy,
    group_window_s: float | None,
    name: str,
    label: str,
    source_entry: Callable[[], dict[str, Any]],
    progress: Callable[[], tuple[int, int]] | None,
    on_progress: Progress | None,
    tiebreak: tuple[str, ...] = (),
    finish_manifest: Callable[[dict[str, Any]], None] | None = None,
) -> DatasetInfo:
    """The run shared by one file and several nodes' logs: the dataset of `reader`'s rows under the id of
    `source_sha` and `options` (the existing one when it is there), written, counted, described and published.
    `finish_manifest` adds what only the caller knows once the rows are read."""
    single_key = "request_id" not in columns
    query_log = reader.query_log
    did = dataset_id(source_sha, options)
    store = DatasetStore(settings)
    existing = store.find(did)
    if existing is not None:
        return replace(existing, reused=True)

    started = time.perf_counter()
    optional = {c for c in columns if c in OPTIONAL_FIELDS}
    schema = canonical_schema_for(optional)
    hint = "rerun with --unsorted sort to sort by (ts, request_id)"
    validator = StreamValidator(sink, unsorted_hint=hint if sort_policy is UnsortedPolicy.REJECT else None)

    def report_progress() -> None:
        if progress is not None and on_progress is not None:
            on_progress(*progress())

    def capped(stream: Iterator[Chunk]) -> Iterator[Chunk]:
        """The row cap, counted as the reader produces rows (before any sort, so a sort stages no more)."""
        rows = 0
        for chunk in stream:
            rows += chunk.batch.num_rows
            if limits.max_rows and rows > limits.max_rows:
                first_over = limits.max_rows - (rows - chunk.batch.num_rows)
                raise too_many_rows(sink, limits, int(chunk.lines[first_over]))
            yield chunk

    def canonical() -> Generator[Chunk, None, None]:
        read = reader.chunks()
        stream: Iterator[Chunk] = capped(read)
        if sort_policy is UnsortedPolicy.SORT:
            stream = sorted_chunks(stream, settings=settings, by_request=not single_key, tiebreak=tiebreak)
        ids: RequestIds | None = None
        if query_log:
            ids = StatementGrouper(group_window_s, sink)
        elif single_key:
            ids = WindowGrouper(group_window_s, sink, unsorted_hint=hint) if group_window_s is not None else OnePerRow()
        try:
            for chunk in stream:
                report_progress()
                yield from ids.assign(chunk) if ids is not None else (chunk,)
            if ids is not None:
                yield from ids.finish()
        finally:  # close the stages now (the sort's staging folder, open files), not when the traceback dies
            for stage in (stream, read):
                close = getattr(stage, "close", None)
                if close is not None:
                    close()

    with staging_dir(settings) as staging:
        writer = BackgroundWriter(DatasetWriter(staging, schema))
        chunks = canonical()
        try:
            for chunk in chunks:
                batch, _ = validator.check(chunk.batch, chunk.lines)
                writer.write(batch)
            sink.finish()
            files = writer.close()
        except BaseException:
            chunks.close()
            writer.abort()
            raise
        stats = validator.stats
        if stats.rows == 0:
            what = f"no valid rows ({sink.skipped_rows} skipped)" if sink.skipped_rows else "no data rows"
            raise BadInputError.single(label, what)
        distinct_keys = stats.distinct_keys
        if distinct_keys is None or stats.distinct_requests is None:  # too many to track in memory
            counts = _count(files, settings)
            distinct_keys = counts["distinct_keys"]
            if counts["requests"] != stats.requests:
                raise BadInputError.single(
                    label,
                    f"{stats.requests - counts['requests']} request id(s) appear in more than one place; the rows "
                    "of a request must be contiguous",
                    field="request_id",
                )
        manifest: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "id": did,
            "name": name,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "tailtune_version": __version__,
            "source": source_entry(),
            "ingest_options": options,
            "rows": stats.rows,
            "requests": stats.requests,
            "distinct_keys": distinct_keys,
            "ts_min": stats.ts_min,
            "ts_max": stats.ts_max,
            "multiget": {"mean": stats.rows / stats.requests, "max": stats.max_request_rows},
            "columns": schema.names,
            "has_value_size": stats.value_size_known > 0,
            "has_latency": stats.latency_known > 0,
            "sorted_by": ["ts", "request_id"],
            "sorted_on_ingest": sort_policy is UnsortedPolicy.SORT,
            "errors": sink.summary(),
            "notes": reader.notes,
            "warnings": reader.warnings,
            "parquet_files": [f.name for f in files],
            "ingest_seconds": round(time.perf_counter() - started, 3),
        }
        if finish_manifest is not None:
            finish_manifest(manifest)
        info, created = store.publish(staging, manifest)
    return info if created else replace(info, reused=True)


def _count(files: list[Path], settings: Settings) -> dict[str, Any]:
    """Exact distinct counts over the written parts with DuckDB, in `ingest_count_memory_mb`: one column at a
    time, as a GROUP BY (DuckDB's hash aggregate spills to disk beyond its memory limit; a `count(DISTINCT)` does
    not, and each extra thread needs its own buffers: with 2 threads 512 MiB did not suffice for 860 M rows)."""
    import duckdb

    with staging_dir(settings, "count") as spill:  # DuckDB's spill files go with it, whatever happens
        con = duckdb.connect()
        try:
            con.execute(f"SET memory_limit='{int(settings.ingest_count_memory_mb)}MB'")
            con.execute(f"SET temp_directory='{spill}'")
            con.execute("SET threads=1")
            con.execute("SET preserve_insertion_order=false")
            parts = [str(f) for f in files]
            counts: dict[str, int] = {}
            for col in ("key", "request_id"):
                try:
                    row = con.execute(
                        f"SELECT count(*) FROM (SELECT {col} FROM read_parquet(?) GROUP BY {col})", [parts]
                    ).fetchone()
                except duckdb.OutOfMemoryException:
                    raise TailtuneError(
                        f"counting the distinct {col} values of {len(parts)} part file(s) needed more than "
                        f"TAILTUNE_INGEST_COUNT_MEMORY_MB={settings.ingest_count_memory_mb}",
                        hint="raise TAILTUNE_INGEST_COUNT_MEMORY_MB and ingest again (nothing was kept)",
                    ) from None
                assert row is not None
                counts[col] = int(row[0])
            return {"distinct_keys": counts["key"], "requests": counts["request_id"]}
        finally:
            con.close()
