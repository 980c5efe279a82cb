"""Several nodes' full query logs read as one trace (docs/formats.md § Several nodes' logs).

Each node's full query log holds the requests that node coordinated. `node_logs` turns what the caller named
(`NAME=PATH`, a bare `PATH` named after its directory or file, or one directory holding one log directory per
node) into `NodeLog`s; `MergedLogs` reads them one after the other with the node's own reader (each with its own
error sink, so a problem names its node's log) and yields their rows with the node as a column (`node`) and the
request ids of each log moved past the previous logs' ones. The pipeline sorts the rows by time (a query log is
always sorted), with the node breaking ties, so the dataset is the logs merged in time order.

A request a driver hedged (speculative execution) or retried on another coordinator is in two logs, and nothing
in the log joins the copies. `Duplicates` counts the likely ones: a record whose statements, bound values and
session keyspace equal those of a record of another node that started at most `window_ms` before it (or at the
same millisecond, on a node earlier in the order). They are kept and counted (the manifest's `nodes.duplicates`,
and a warning), not dropped: the same read sent twice by the application is indistinguishable from a hedge.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from base.errors import BadInputError
from base.settings import Settings
from ingest.formats.base import Chunk, TraceReader
from ingest.formats.cassandra_fql.binlog import is_log_dir
from ingest.formats.cassandra_fql.records import QueryLogReader, Record
from ingest.validate import ErrorSink
from ingest.writer import staging_dir

__all__ = ["Duplicates", "MergedLogs", "NodeLog", "missing_share", "node_logs"]

#: What a node's name may hold (it is a column value and a manifest entry).
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")
#: Records buffered before the duplicate counter writes them to its staging file.
_BUFFER: Final = 1 << 16
#: Nodes a merge takes (the duplicate counter's key holds the node's index in 10 bits).
MAX_NODES: Final = 1024


@dataclass(frozen=True)
class NodeLog:
    """One node's full query log: the node's name (the `node` column) and the log (a directory or a dump)."""

    name: str
    path: Path


def _name_of(path: Path) -> str:
    name = path.name if path.is_dir() else path.name.split(".", 1)[0]
    return name or path.resolve().name


def _check_name(name: str, where: str) -> str:
    if not _NAME.fullmatch(name):
        raise BadInputError.single(
            where,
            f"node name {name!r} is not a name: letters, digits and . _ : - (at most 128, not starting with a sign)",
            hint="name the node explicitly: NODE=PATH",
        )
    return name


def node_logs(args: Sequence[str]) -> list[NodeLog] | None:
    """The nodes' logs the arguments name, or None for one trace file or one log (the single-path form).

    An argument is `NODE=PATH` or `PATH` (the node named after the log's directory, or a dump file's name up to its
    first dot); an argument that is an existing path is a path even with a `=` in it. One directory that is not a log
    itself but holds log directories is a log per subdirectory, each named after it.
    """
    if not args:
        raise BadInputError.single("command line", "give a trace file, a full query log, or one log per node")
    if len(args) == 1 and (Path(args[0]).exists() or "=" not in args[0]):
        path = Path(args[0])
        if not path.is_dir() or is_log_dir(path):
            return None
        subdirs = sorted(p for p in path.iterdir() if p.is_dir())
        if not subdirs or not any(is_log_dir(p) for p in subdirs):
            return None  # not a directory of nodes' logs: the single-path form says what it is
        empty = [p.name for p in subdirs if not is_log_dir(p)]
        if empty:
            raise BadInputError.single(
                str(path),
                f"holds a full query log per node, but {', '.join(empty)} holds none (no .cq4 file)",
                hint="remove it, or name the nodes' logs one by one: NODE=PATH ...",
            )
        return [NodeLog(_check_name(p.name, str(p)), p) for p in subdirs]
    out: list[NodeLog] = []
    for arg in args:
        path = Path(arg)
        if not path.exists() and "=" in arg:
            name, _, rest = arg.partition("=")
            out.append(NodeLog(_check_name(name, "command line"), Path(rest)))
        else:
            out.append(NodeLog(_check_name(_name_of(path), arg), path))
    return out


def check_logs(logs: Sequence[NodeLog]) -> None:
    """Every log exists, no two share a name or a path, at most `MAX_NODES`."""
    if len(logs) > MAX_NODES:
        raise BadInputError.single("command line", f"{len(logs):,} nodes' logs; at most {MAX_NODES:,}")
    names: dict[str, Path] = {}
    paths: dict[Path, str] = {}
    for log in logs:
        if not log.path.exists():
            raise BadInputError.single(str(log.path), f"no such file or directory (the log of node {log.name})")
        if log.name in names:
            raise BadInputError.single(
                str(log.path), f"node {log.name} is named twice (also {names[log.name]})", hint="name each: NODE=PATH"
            )
        real = log.path.resolve()
        if real in paths:
            raise BadInputError.single(str(log.path), f"is the log of node {paths[real]} too: one log per node")
        names[log.name] = log.path
        paths[real] = log.name


def missing_share(logged: int, cluster_nodes: int, requests: int) -> dict[str, Any]:
    """What is lost when only `logged` of the cluster's `cluster_nodes` nodes' logs are ingested: the requests the
    other nodes coordinated, estimated as the logged nodes' mean per node (coordinators spread evenly: a driver's
    round robin or token-aware balancing over balanced tokens)."""
    missing = cluster_nodes - logged
    return {
        "cluster_nodes": cluster_nodes,
        "logs": logged,
        "missing_nodes": missing,
        "missing_share": missing / cluster_nodes,
        "estimated_missing_requests": round(requests / logged * missing) if logged else None,
        "method": "each node without a log coordinated as many requests as the logged nodes' mean",
    }


class Duplicates:
    """Counts the likely copies of one request across nodes (see the module doc); bounded memory: the records'
    fingerprints go to a staging Parquet file and DuckDB counts them (an as-of join per node)."""

    def __init__(self, window_ms: int, settings: Settings, staging: Path) -> None:
        self.window_ms = window_ms
        self.settings = settings
        self._file = staging / "records.parquet"
        self._writer: pq.ParquetWriter | None = None
        self._fp: list[int] = []
        self._ms: list[int] = []
        self._node: list[int] = []
        self.nodes = 0

    @staticmethod
    def fingerprint(record: Record) -> int:
        h = hashlib.blake2b(digest_size=8)
        h.update((record.keyspace or "").encode() + b"\0" + record.kind.encode() + b"\0")
        for st in record.statements:
            h.update(st.query.encode() + b"\0")
            for v in st.values:
                if isinstance(v, bytes):
                    h.update(b"b%d:" % len(v) + v)
                else:
                    h.update(b"n" if v is None else b"u")
            h.update(b"\1")
        return int.from_bytes(h.digest(), "big", signed=True)

    def add(self, node: int, record: Record) -> None:
        self._fp.append(self.fingerprint(record))
        self._ms.append(record.start_ms)
        self._node.append(node)
        self.nodes = max(self.nodes, node + 1)
        if len(self._fp) >= _BUFFER:
            self._flush()

    def _flush(self) -> None:
        if not self._fp:
            return
        batch = pa.RecordBatch.from_arrays(
            [pa.array(self._fp, pa.int64()), pa.array(self._ms, pa.int64()), pa.array(self._node, pa.int16())],
            names=["fp", "ms", "node"],
        )
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._file, batch.schema, compression="zstd", compression_level=1)
        self._writer.write_batch(batch)
        self._fp, self._ms, self._node = [], [], []

    def count(self) -> int:
        """The records that have a likely earlier copy on another node (so: the extra copies)."""
        self._flush()
        if self._writer is None:
            return 0
        self._writer.close()
        self._writer = None
        import duckdb

        con = duckdb.connect()
        try:
            con.execute(f"SET memory_limit='{int(self.settings.ingest_count_memory_mb)}MB'")
            con.execute(f"SET temp_directory='{self._file.parent / 'spill'}'")
            con.execute("SET threads=1")
            con.execute(
                "CREATE TEMP TABLE r AS SELECT row_number() OVER () AS i, fp, ms, node, "
                f"ms * {MAX_NODES} + node AS k FROM read_parquet(?)",
                [str(self._file)],
            )
            parts = [
                f"SELECT a.i FROM (SELECT * FROM r WHERE node <> {b}) a "
                f"ASOF JOIN (SELECT fp, ms, k FROM r WHERE node = {b}) s ON a.fp = s.fp AND a.k > s.k "
                f"WHERE a.ms - s.ms <= {int(self.window_ms)}"
                for b in range(self.nodes)
            ]
            row = con.execute(f"SELECT count(DISTINCT i) FROM ({' UNION ALL '.join(parts)})").fetchone()
            assert row is not None
            return int(row[0])
        finally:
            con.close()


class MergedLogs(TraceReader):
    """The rows of several nodes' query logs (see the module doc). Not a format of its own (not in `READERS`):
    `ingest.pipeline.ingest_node_logs` builds it from one reader per node."""

    name: ClassVar[str] = "merged-query-logs"
    query_log: ClassVar[bool] = True

    def __init__(
        self,
        logs: Sequence[NodeLog],
        readers: Sequence[QueryLogReader],
        sinks: Sequence[ErrorSink],
        sink: ErrorSink,
        *,
        duplicate_window_ms: int,
        settings: Settings,
    ) -> None:
        super().__init__(readers[0].source, readers[0].options, sink)
        self.logs = list(logs)
        self.readers = list(readers)
        self.sinks = list(sinks)
        self.duplicate_window_ms = duplicate_window_ms
        self.settings = settings
        self.duplicates: int | None = None
        self.per_node: list[dict[str, Any]] = []

    def columns(self) -> list[str]:
        return [*self.readers[0].columns(), "node"]

    def id_options(self) -> dict[str, Any]:
        return {"duplicate_window_ms": self.duplicate_window_ms}

    def chunks(self) -> Iterator[Chunk]:
        with staging_dir(self.settings, "duplicates") as staging:
            dups = Duplicates(self.duplicate_window_ms, self.settings, staging)
            base = 0
            for index, (log, reader, sink) in enumerate(zip(self.logs, self.readers, self.sinks, strict=True)):
                reader.on_request = lambda record, i=index: dups.add(i, record)
                top = -1
                rows = 0
                for chunk in reader.chunks():
                    batch = chunk.batch
                    highest = pc.max(batch.column("request_id")).as_py()
                    if highest is not None:
                        top = max(top, int(highest))
                    moved = pc.add(batch.column("request_id"), pa.scalar(base, pa.int64()))
                    batch = batch.set_column(batch.schema.names.index("request_id"), "request_id", moved)
                    batch = batch.append_column("node", pa.array([log.name] * batch.num_rows, pa.string()))
                    rows += batch.num_rows
                    yield Chunk(batch, chunk.lines)
                base += top + 1
                sink.flush(rows_dropped=0)
                self.sink.absorb(sink)
                self.notes += [f"node {log.name}: {note}" for note in reader.notes]
                self.warnings += [f"node {log.name}: {w}" for w in reader.warnings]
                self.per_node.append(
                    {"name": log.name, "records": reader.records, "requests": reader.requests, "rows": rows}
                )
            self.duplicates = dups.count()
        if self.duplicates:
            self.warnings.append(
                f"{self.duplicates:,} request(s) are likely copies of a request logged by another node (the same "
                f"statement and values at most {self.duplicate_window_ms} ms later: a hedged or retried request, or "
                "the application sending it twice); they are kept. A client capture records each request once"
            )
