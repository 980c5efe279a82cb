"""`tailtune-client`: the application's own requests as tailtune-client recorded them (`RequestCapture`), before
the client reshaped them (batching, Chisel split/merge) — docs/formats.md § tailtune-client.

JSON lines in sections: a section is one upload, its header line (`schema` = `tailtune.client.capture/1`) then one
line per sampled request; several uploads concatenated are one file of several sections. A request line becomes
one row per key sharing its request id: ts = the request's start, value_size = its size (null for a miss),
op, client_id = the header's client id, latency_us = the request's latency, and `table` for a Cassandra capture.
Only reads (`get`, `read`) are rows; writes are counted in the notes (as the memcached-watch format leaves stores
out). What the client dropped (its memory and bandwidth caps, statements without keys) and the sample rates are
notes too: the trace misses those requests.

Strict: a header that is not one is fatal (line and field named); a request line with a bad field is a problem of
that line (the error policy decides); a section whose header's `records` is not the number of lines that follow
it is fatal (a cut upload).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import numpy as np
import pyarrow as pa

from ingest.formats.base import Chunk, TraceReader, open_text, text_lines, too_many_rows
from ingest.formats.head import Head
from ingest.formats.jsonl import parse_json_line
from ingest.schema import CANONICAL_SCHEMA

__all__ = ["SCHEMA", "TailtuneClientReader"]

#: The header's `schema` (the client's `tailtune_client.capture.CAPTURE_SCHEMA`).
SCHEMA: Final = "tailtune.client.capture/1"
KEY_FORMS: Final = ("plain", "hmac-sha256")
#: The ops that are rows (reads); any other op is counted and left out.
READS: Final = frozenset({"get", "read"})
_HEADER: Final = frozenset({"schema", "client", "kind", "tables", "deployment", "deployment_id", "servers", "hashing",
                            "key_form", "sample_rate", "window", "records", "dropped"})
_REQUEST: Final = frozenset({"ts", "op", "keys", "sizes", "latency_us", "config_version", "failed", "servers",
                             "table"})
_DROPS: Final = ("memory", "bandwidth", "unkeyed")
_KEY_MAX: Final = 250
_NAME_MAX: Final = 128
_INT_MAX: Final = 2**63 - 1
_VERSION_MAX: Final = 2**31 - 1
_CHUNK_ROWS: Final = 65_536


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def _count(value: Any, where: str, high: int = _INT_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise _Bad(where, f"expected an integer from 0 to {high}, got {str(value)[:40]!r}")
    return value


def _number(value: Any, where: str, *, nullable: bool = False) -> float | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise _Bad(where, f"expected a finite number >= 0, got {str(value)[:40]!r}")
    return float(value)


def _text(value: Any, where: str, high: int = _NAME_MAX) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= high:
        raise _Bad(where, f"expected a string of 1 to {high} characters, got {str(value)[:40]!r}")
    return value


@dataclass
class _Section:
    """One upload: its header's figures and the lines counted under it."""

    line: int
    client: str
    tables: bool
    servers: int | None
    rate: float
    records: int
    dropped: dict[str, int]
    lines: int = 0


def _header(doc: Mapping[str, Any], line: int) -> _Section:
    unknown = sorted(set(doc) - _HEADER)
    if unknown:
        raise _Bad(unknown[0][:_NAME_MAX], "not a field of the header")
    if doc.get("schema") != SCHEMA:
        raise _Bad("schema", f"expected {SCHEMA!r}, got {str(doc.get('schema'))[:40]!r}")
    client = doc.get("client")
    if not isinstance(client, Mapping):
        raise _Bad("client", "expected an object (the recording client: name, version, id, host, pid)")
    cid = _text(client.get("id"), "client.id")
    _text(doc.get("kind"), "kind")
    tables = doc.get("tables", False)
    if not isinstance(tables, bool):
        raise _Bad("tables", "expected true (the requests name their tables) or false")
    servers = doc.get("servers")
    if servers is not None:
        if not isinstance(servers, list) or not servers:
            raise _Bad("servers", "expected null or a non-empty list of host:port")
        for i, s in enumerate(servers):
            _text(s, f"servers[{i}]", 300)
    if doc.get("key_form") not in KEY_FORMS:
        raise _Bad("key_form", f"expected one of {', '.join(KEY_FORMS)}, got {str(doc.get('key_form'))[:40]!r}")
    rate = doc.get("sample_rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1:
        raise _Bad("sample_rate", f"expected a number > 0 and <= 1, got {str(rate)[:40]!r}")
    window = doc.get("window")
    if not isinstance(window, Mapping):
        raise _Bad("window", "expected an object {start, end}")
    start, end = _number(window.get("start"), "window.start"), _number(window.get("end"), "window.end")
    assert start is not None and end is not None
    if end < start:
        raise _Bad("window.end", f"before window.start ({end} < {start})")
    raw_dropped = doc.get("dropped")
    if not isinstance(raw_dropped, Mapping) or not set(raw_dropped) <= set(_DROPS):
        raise _Bad("dropped", f"expected an object of counts ({', '.join(_DROPS)})")
    dropped = {k: _count(raw_dropped.get(k, 0), f"dropped.{k}") for k in _DROPS}
    return _Section(line, cid, tables, len(servers) if servers is not None else None, float(rate),
                    _count(doc.get("records"), "records"), dropped)


@dataclass
class _Request:
    ts: float
    op: str
    keys: list[str]
    sizes: list[int | None]
    latency_us: float | None
    table: str | None


def _request(doc: Mapping[str, Any], section: _Section) -> _Request:
    unknown = sorted(set(doc) - _REQUEST)
    if unknown:
        raise _Bad(unknown[0][:_NAME_MAX], "not a field of a request")
    ts = _number(doc.get("ts"), "ts")
    assert ts is not None
    op = _text(doc.get("op"), "op", 32)
    keys = doc.get("keys")
    if not isinstance(keys, list) or not keys:
        raise _Bad("keys", "expected a non-empty list of keys")
    for i, k in enumerate(keys):
        _text(k, f"keys[{i}]", _KEY_MAX)
    sizes = doc.get("sizes")
    if not isinstance(sizes, list) or len(sizes) != len(keys):
        raise _Bad("sizes", f"expected a list of {len(keys)} sizes (one per key; null for a miss)")
    for i, v in enumerate(sizes):
        if v is not None:
            _count(v, f"sizes[{i}]")
    latency = _number(doc.get("latency_us"), "latency_us", nullable=True)
    version = doc.get("config_version")
    if version is not None:
        _count(version, "config_version", _VERSION_MAX)
    if not isinstance(doc.get("failed", False), bool):
        raise _Bad("failed", "expected true or false")
    servers = doc.get("servers")
    if servers is not None:
        if section.servers is None:
            raise _Bad("servers", "the header names no servers")
        if not isinstance(servers, list) or len(servers) != len(keys):
            raise _Bad("servers", f"expected a list of {len(keys)} server indexes (one per key)")
        for i, s in enumerate(servers):
            _count(s, f"servers[{i}]", section.servers - 1)
    table = doc.get("table")
    if table is not None:
        if not section.tables:
            raise _Bad("table", "the header declares no tables (tables: false)")
        _text(table, "table", 256)
    return _Request(ts, op, [str(k) for k in keys], list(sizes), latency, table)


@dataclass
class _Tally:
    sections: list[_Section] = field(default_factory=list)
    writes: int = 0
    requests: int = 0


_SCHEMA_COLUMNS: Final = ("request_id", "ts", "key", "value_size", "op", "client_id", "latency_us", "table")


class TailtuneClientReader(TraceReader):
    """tailtune-client's capture of the application's requests (see the module doc)."""

    name: ClassVar[str] = "tailtune-client"
    sniff_rank: ClassVar[int | None] = 25
    ordered: ClassVar[bool] = False

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        obj = head.first_object
        if obj is not None and obj.get("schema") == SCHEMA:
            return f"{head.where}a tailtune-client capture (schema {SCHEMA})"
        return None

    _columns: list[str] | None = None

    def columns(self) -> list[str]:
        if self._columns is None:
            first = self._first_header()
            cols = list(_SCHEMA_COLUMNS)
            if not first.tables:  # a capture whose requests name no tables (memcached's) has no table column
                cols.remove("table")
            self._columns = cols
        return self._columns

    def _first_header(self) -> _Section:
        with open_text(self.source, self.sink) as fh:
            for number, raw in text_lines(fh, limits=self.options.limits, sink=self.sink):
                if not raw.strip():
                    continue
                doc, problem = parse_json_line(raw)
                if problem is not None or not isinstance(doc, dict):
                    raise self.fatal(number, None, problem or "expected a JSON object (the header)")
                if "schema" not in doc:
                    raise self.fatal(number, "schema", "the first line must be a header (a capture starts with one)")
                try:
                    return _header(doc, number)
                except _Bad as exc:
                    raise self.fatal(number, exc.field, exc.problem) from None
        raise self.fatal(1, None, "file is empty")

    def chunks(self) -> Iterator[Chunk]:
        cols = self.columns()
        sink, limits = self.sink, self.options.limits
        tally = _Tally()
        rows = _Rows(cols)
        bad = 0
        section: _Section | None = None
        with open_text(self.source, sink) as fh:
            for number, raw in text_lines(fh, limits=limits, sink=sink):
                if not raw.strip():
                    continue
                doc, problem = parse_json_line(raw)
                if problem is None and not isinstance(doc, dict):
                    problem = f"expected a JSON object, got {type(doc).__name__}"
                if problem is not None:
                    if section is not None:
                        section.lines += 1
                    sink.report(number, None, problem)
                    bad += 1
                    continue
                assert isinstance(doc, dict)
                if "schema" in doc:
                    self._close(section)
                    try:
                        section = _header(doc, number)
                    except _Bad as exc:
                        raise self.fatal(number, exc.field, exc.problem) from None
                    tally.sections.append(section)
                    continue
                assert section is not None  # the first line is a header (columns() checked it)
                section.lines += 1
                try:
                    req = _request(doc, section)
                except _Bad as exc:
                    sink.report(number, exc.field, exc.problem)
                    bad += 1
                    continue
                if req.op not in READS:
                    tally.writes += 1
                    continue
                if limits.max_rows and rows.total + len(req.keys) > limits.max_rows:
                    raise too_many_rows(sink, limits, number)
                rows.add(req, section.client, number)
                tally.requests += 1
                if rows.n >= _CHUNK_ROWS:
                    sink.flush(rows_dropped=bad)
                    bad = 0
                    yield rows.chunk()
        self._close(section)
        sink.flush(rows_dropped=bad)
        if rows.n:
            yield rows.chunk()
        self._note(tally)

    def _close(self, section: _Section | None) -> None:
        if section is not None and section.lines != section.records:
            raise self.fatal(section.line, "records", f"the header announces {section.records:,} request line(s), "
                             f"{section.lines:,} follow (a cut or spliced upload)")

    def _note(self, t: _Tally) -> None:
        clients = {s.client for s in t.sections}
        rates = sorted({s.rate for s in t.sections})
        shown = ", ".join(f"{r:g}" for r in rates)
        self.notes.append(f"the application's requests as {len(clients):,} client(s) recorded them before "
                          f"reshaping them, in {len(t.sections):,} upload(s); sampled at rate {shown} per request "
                          "(the arrival rate is the application's times the rate)")
        if len(rates) > 1:
            self.notes.append("the uploads were sampled at different rates: the clients' shares of the trace are "
                              "not their shares of the traffic")
        if t.writes:
            self.notes.append(f"{t.writes:,} write request(s) left out (the trace holds reads)")
        lost = {k: sum(s.dropped[k] for s in t.sections) for k in _DROPS}
        if any(lost.values()):
            self.notes.append(
                f"LOST: the clients dropped {sum(lost.values()):,} sampled request(s) (memory cap {lost['memory']:,}, "
                f"bandwidth cap {lost['bandwidth']:,}, without keys {lost['unkeyed']:,}): the trace misses them"
            )


class _Rows:
    """Requests accumulated as columns until a chunk is full."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self.schema = pa.schema([CANONICAL_SCHEMA.field(c) for c in columns])
        self.next_id = 0
        self.total = 0
        self._clear()

    def _clear(self) -> None:
        self.n = 0
        self.data: dict[str, list[Any]] = {c: [] for c in self.columns}
        self.lines: list[int] = []

    def add(self, req: _Request, client: str, line: int) -> None:
        rid = self.next_id
        self.next_id += 1
        n = len(req.keys)
        d = self.data
        d["request_id"].extend([rid] * n)
        d["ts"].extend([req.ts] * n)
        d["key"].extend(req.keys)
        d["value_size"].extend(req.sizes)
        d["op"].extend([req.op] * n)
        d["client_id"].extend([client] * n)
        d["latency_us"].extend([req.latency_us] * n)
        if "table" in d:
            d["table"].extend([req.table] * n)
        self.lines.extend([line] * n)
        self.n += n
        self.total += n

    def chunk(self) -> Chunk:
        arrays = [pa.array(self.data[f.name], type=f.type) for f in self.schema]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        chunk = Chunk(batch, np.asarray(self.lines, dtype=np.int64))
        self._clear()
        return chunk
