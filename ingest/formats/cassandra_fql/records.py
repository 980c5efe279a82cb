"""Full query log records → canonical rows: what both `cassandra-fql` readers share (docs/formats.md
§ cassandra-fql).

A `Record` is one entry of the log (a query or a batch) as either reader reads it: its start time, the session's
keyspace, and its statements with their bound values. `QueryLogReader.chunks` turns each into rows:

* a SELECT naming its partitions with `IN` (`k IN ?`, `k IN (...)`; on a composite key, every combination),
  a write (INSERT, UPDATE, DELETE) and a batch are each one request of their partition keys (a partition
  written twice in a batch counts once; op `get`, `set` or `delete`);
* a SELECT naming one partition with `=` on every partition key column is a single access that the pipeline
  groups with the same statement's other single accesses (`ingest.grouping.StatementGrouper`): its row has no
  request id and carries the grouping key (`_group`: the table and the statement text);
* everything else is skipped and counted in the manifest's notes: statements that touch no partition (USE,
  DDL, ...), the system keyspaces (the drivers' own queries), tables left out by `--table`, reads that name no
  partition (token ranges, secondary indexes, ALLOW FILTERING) and INSERT JSON.

The partition key's columns and CQL types come from `--schema` (`cql.parse_schema`); values are decoded by
`keys`. A problem is reported on the record's line (the binary log: the record's number; the dump: the line of the
statement or the value), with the field it is about, and the record is left out.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Final

import numpy as np
import pyarrow as pa

from base.errors import BadInputError
from ingest.formats.base import Chunk, ReaderOptions, TraceReader
from ingest.formats.cassandra_fql import cql
from ingest.formats.cassandra_fql.keys import ValueProblem, compose, decode, from_literal, split_collection
from ingest.formats.source import Source
from ingest.validate import ErrorSink

__all__ = ["TRUNCATED", "UNSET", "QueryLogReader", "Record", "Statement", "Value", "load_schema", "resolve_tables"]

#: A value the client left unset (protocol v4+): not a value.
UNSET: Final = "unset"
#: A value `fqltool dump` cut at 1,024 bytes.
TRUNCATED: Final = "truncated"

#: Keyspaces whose statements are the drivers' and the server's own (schema, peers, auth).
SYSTEM_KEYSPACES: Final = frozenset(
    {
        "system",
        "system_schema",
        "system_auth",
        "system_distributed",
        "system_traces",
        "system_views",
        "system_virtual_schema",
        "system_cluster_metadata",
    }
)

#: Rows per chunk.
_CHUNK_ROWS: Final = 1 << 16
#: Distinct statement texts whose parse is kept (prepared statements repeat; plain ones rarely do).
_PARSE_CACHE: Final = 4096

Value = bytes | str | None  # bytes, UNSET or None (null)


@dataclass
class Statement:
    """One statement of a record: its text, its bound values, and where each is in the input."""

    query: str
    values: list[Value]
    line: int
    value_lines: list[int] = field(default_factory=list)
    names: list[str] | None = None

    def value_line(self, i: int) -> int:
        return self.value_lines[i] if i < len(self.value_lines) else self.line


@dataclass
class Record:
    """One entry of the full query log."""

    line: int
    kind: str  # single-query or batch
    start_ms: int
    keyspace: str | None
    statements: list[Statement]


class _Skip(Exception):
    """The statement is left out, for the reason (a note's category)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Bad(Exception):
    """A problem of the record at `line`, about `field`."""

    def __init__(self, line: int, field: str, problem: str) -> None:
        super().__init__(problem)
        self.line = line
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class _Hit:
    op: str
    table: str
    keys: list[str]
    single: bool  # one partition named with = on every key column (a SELECT): grouped


def resolve_tables(names: tuple[str, ...], label: str) -> frozenset[str]:
    """`--table KS.T` values → qualified internal names (unquoted names lower-cased)."""
    out: set[str] = set()
    for name in names:
        try:
            ks, table = cql.split_name(name)
        except cql.CqlError as exc:
            raise BadInputError.single(label, f"--table {exc}", hint="--table KEYSPACE.TABLE") from None
        out.add(f"{ks}.{table}")
    return frozenset(out)


def load_schema(path: Path) -> dict[str, cql.Table]:
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInputError.single(label, "no such schema file (--schema)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError.single(label, f"cannot read the schema file (--schema): {exc}") from None
    try:
        return cql.parse_schema(text)
    except cql.CqlError as exc:
        raise BadInputError.single(label, f"schema: {exc}", line=exc.line) from None


class QueryLogReader(TraceReader):
    """The rows of a full query log's records (see the module doc); subclasses read the records."""

    query_log: ClassVar[bool] = True

    def __init__(self, source: Source, options: ReaderOptions, sink: ErrorSink) -> None:
        super().__init__(source, options, sink)
        o = self.options
        self.schema: dict[str, cql.Table] = load_schema(o.schema) if o.schema is not None else {}
        self.tables = resolve_tables(o.tables, "command line")
        self._parsed: dict[str, tuple[cql.Parsed, int]] = {}
        self.skipped: Counter[str] = Counter()
        self.records = 0
        self.requests = 0
        #: Called with each record that became a request or a single access (a merge of nodes' logs counts
        #: their likely duplicates so: `nodes.Duplicates`).
        self.on_request: Callable[[Record], None] | None = None

    def columns(self) -> list[str]:
        return ["request_id", "ts", "key", "op", "table"]

    def records_of(self) -> Iterator[Record]:  # pragma: no cover - each reader implements it
        raise NotImplementedError

    # --------------------------------------------------------------------------------------------- rows

    def chunks(self) -> Iterator[Chunk]:
        ids: list[int | None] = []
        ts: list[float] = []
        keys: list[str] = []
        ops: list[str] = []
        tables: list[str] = []
        groups: list[str | None] = []
        lines: list[int] = []
        next_id = 0

        def chunk() -> Chunk:
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array(ids, pa.int64()),
                    pa.array(ts, pa.float64()),
                    pa.array(keys, pa.string()),
                    pa.nulls(len(keys), pa.int64()),
                    pa.array(ops, pa.string()),
                    pa.array(tables, pa.string()),
                    pa.array(groups, pa.string()),
                ],
                names=["request_id", "ts", "key", "value_size", "op", "table", "_group"],
            )
            out = Chunk(batch, np.asarray(lines, dtype=np.int64))
            for column in (ids, ts, keys, ops, tables, groups, lines):
                column.clear()
            return out

        for record in self.records_of():
            self.records += 1
            try:
                hits = self._hits(record)
            except _Bad as bad:
                self.sink.report_dropped(bad.line, bad.field, bad.problem)
                self.sink.flush(rows_dropped=0)
                continue
            if not hits:
                continue
            t = record.start_ms / 1000.0
            if len(hits) == 1 and hits[0].single:
                hit = hits[0]
                ids.append(None)
                ts.append(t)
                keys.append(hit.keys[0])
                ops.append(hit.op)
                tables.append(hit.table)
                groups.append(f"{hit.table}\n{record.statements[0].query}")
                lines.append(record.line)
            else:
                seen: set[str] = set()
                for hit in hits:
                    for key in hit.keys:
                        if key in seen:
                            continue
                        seen.add(key)
                        ids.append(next_id)
                        ts.append(t)
                        keys.append(key)
                        ops.append(hit.op)
                        tables.append(hit.table)
                        groups.append(None)
                        lines.append(record.line)
                next_id += 1
            self.requests += 1
            if self.on_request is not None:
                self.on_request(record)
            if len(keys) >= _CHUNK_ROWS:
                yield chunk()
        self._note()
        if keys:
            yield chunk()

    def _note(self) -> None:
        what = ", ".join(f"{n:,} {reason}" for reason, n in sorted(self.skipped.items())) or "none"
        self.notes.append(
            f"{self.records:,} log records; {self.requests:,} became requests or single accesses; skipped: {what}"
        )

    # ---------------------------------------------------------------------------------------- statements

    def _parse(self, statement: Statement) -> tuple[cql.Parsed, int]:
        hit = self._parsed.get(statement.query)
        if hit is not None:
            return hit
        try:
            parsed, markers = cql.parse_statement(statement.query)
        except cql.CqlError as exc:
            raise _Bad(statement.line + exc.line - 1, "query", f"cannot read the statement: {exc}") from None
        if len(self._parsed) >= _PARSE_CACHE:
            self._parsed.clear()
        self._parsed[statement.query] = (parsed, markers)
        return parsed, markers

    def _hits(self, record: Record) -> list[_Hit]:
        hits: list[_Hit] = []
        for statement in record.statements:
            parsed, markers = self._parse(statement)
            if statement.names is not None:
                raise _Bad(statement.line, "values", "values bound by name are not supported")
            if markers >= 0 and len(statement.values) != markers:
                raise _Bad(
                    statement.line,
                    "values",
                    f"the statement has {markers} bind marker(s) but the record binds {len(statement.values)} "
                    "value(s)",
                )
            accesses: tuple[cql.Access | cql.Other, ...]
            if isinstance(parsed, cql.Batch):
                accesses = parsed.statements
            else:
                accesses = (parsed,)
            for access in accesses:
                try:
                    hit = self._hit(access, statement, record)
                except _Skip as skip:
                    self.skipped[skip.reason] += 1
                    continue
                hits.append(hit)
        if len(hits) == 1 and hits[0].single and (record.kind != "single-query" or len(record.statements) != 1):
            hits = [_Hit(hits[0].op, hits[0].table, hits[0].keys, False)]
        if not hits:
            return hits
        if sum(len(h.keys) for h in hits) == 0:
            self.skipped["statements naming no partition (IN ())"] += 1
            return []
        return hits

    def _hit(self, access: cql.Access | cql.Other, statement: Statement, record: Record) -> _Hit:
        if isinstance(access, cql.Other):
            if access.what == "CREATE":
                self._learn(statement.query, record.keyspace)
            raise _Skip("statements that touch no partition (USE, DDL, ...)")
        keyspace = access.keyspace or record.keyspace
        if keyspace is None:
            raise _Bad(
                statement.line + access.line - 1,
                "keyspace",
                f"table {access.table} is not qualified and the session has no keyspace",
            )
        if keyspace in SYSTEM_KEYSPACES:
            raise _Skip("statements on system keyspaces")
        qualified = f"{keyspace}.{access.table}"
        if self.tables and qualified not in self.tables:
            raise _Skip("statements on tables left out by --table")
        if access.json:
            raise _Skip("INSERT JSON statements (not read)")
        table = self.schema.get(qualified)
        if table is None:
            have = ", ".join(sorted(self.schema)) or "none"
            raise self.fatal(
                statement.line + access.line - 1,
                "table",
                f"no schema for table {qualified} (tables in --schema: {have})",
                hint=f"give its CREATE TABLE with --schema FILE (cqlsh -e 'DESCRIBE TABLE {qualified}' > FILE), "
                "or keep only the tables of the schema with --table",
            )
        if access.token:
            if access.op == "get":
                raise _Skip("reads of token ranges")
            raise _Bad(statement.line, "query", "a write restricted by token() names no partition")
        missing = [c for c in table.partition_key if c not in access.columns]
        if missing:
            if access.op == "get":
                raise _Skip("reads that name no partition (ranges, indexes, ALLOW FILTERING)")
            raise _Bad(
                statement.line + access.line - 1,
                "query",
                f"the statement gives no value for the partition key column {missing[0]} of {qualified}",
            )
        per_column: list[list[str]] = []
        for column in table.partition_key:
            per_column.append(self._column(column, table, access, statement))
        keys = list(dict.fromkeys(compose(list(parts)) for parts in itertools.product(*per_column)))
        single = access.op == "get" and not access.in_columns & set(table.partition_key)
        return _Hit(access.op, qualified, keys, single)

    def _learn(self, text: str, keyspace: str | None) -> None:
        """A CREATE TABLE the log holds: the table's key, unless --schema (or an earlier one) gave it."""
        try:
            created = cql.parse_schema(text, keyspace)
        except cql.CqlError:
            return  # not a table we can read: its statements fail on the missing schema, saying so
        for name, table in created.items():
            self.schema.setdefault(name, table)

    def _column(self, column: str, table: cql.Table, access: cql.Access, statement: Statement) -> list[str]:
        cql_type = table.types[column]
        out: list[str] = []
        for term in access.columns[column]:
            if isinstance(term, cql.Literal):
                try:
                    out.append(from_literal(cql_type, term))
                except ValueProblem as exc:
                    raise _Bad(statement.line + term.line - 1, "query", f"column {column}: {exc}") from None
                continue
            at = statement.value_line(term.index)
            value = statement.values[term.index]
            if value == TRUNCATED:
                raise _Bad(
                    at,
                    "values",
                    f"value {term.index + 1} (column {column}) is cut at 1,024 bytes by fqltool dump; "
                    "ingest the binary log (--format cassandra-fql)",
                )
            if value is None or value == UNSET:
                what = "null" if value is None else "unset"
                raise _Bad(at, "values", f"value {term.index + 1} (column {column}) is {what}")
            assert isinstance(value, bytes)
            try:
                if column in access.in_list:
                    out.extend(decode(cql_type, v) for v in split_collection(value))
                else:
                    out.append(decode(cql_type, value))
            except ValueProblem as exc:
                raise _Bad(at, "values", f"value {term.index + 1} (column {column}): {exc}") from None
        return out

