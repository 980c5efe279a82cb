"""`memcached-watch`: what memcached's `watch fetchers mutations` prints (memcached 1.6), saved as it came —
by `tailtune capture memcached` or by hand (`nc`).

Every `item_get` line is one key access; the fetches of one multi-key `get`/`gets` are grouped into one request by
the heuristic of `ingest.mcwatch` (per connection, at most `watch_gap_us` µs apart, no key twice, no store in
between; docs/formats.md § memcached-watch). A request's ts is its first fetch's; value_size = `size` for a hit,
null otherwise; op = `get`; client_id = the connection (`cfd`, or `server/cfd` for a capture of several servers).
Stores are not requests: they close the connection's open request and remove the lookup they logged. Lines lost
by the watch (`skipped=N`, `dropped=N`) are counted in the notes: the trace misses their fetches.

memcached prints the lines of different worker threads out of time order, so the rows are sorted (as with
`--unsorted sort`); request ids are numbered in the order the requests close.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Final

import numpy as np
import pyarrow as pa

from ingest.formats.base import Chunk, TraceReader, open_text, text_lines, too_many_rows
from ingest.formats.head import Head
from ingest.mcwatch import DEFAULT_GAP_US, FETCH, Grouper, LineProblem, Request, parse_line
from ingest.schema import CANONICAL_SCHEMA

__all__ = ["MemcachedWatchReader", "watch_like"]

#: Rows per chunk handed to the pipeline.
_CHUNK_ROWS: Final = 65_536
#: Bad lines reported before the error policy is applied (memory stays bounded on a file of garbage).
_FLUSH_PROBLEMS: Final = 1024
_COLUMNS: Final = ("request_id", "ts", "key", "value_size", "op", "client_id")
_SCHEMA: Final = pa.schema([CANONICAL_SCHEMA.field(c) for c in _COLUMNS])


def watch_like(line: bytes) -> bool | None:
    """True for a memcached watch line, False for another line, None for one that says nothing (OK, #, blank)."""
    text = line.rstrip(b"\r")
    if not text.strip() or text.startswith(b"#") or text == b"OK":
        return None
    if text.startswith(b"server="):
        text = text.partition(b" ")[2]
    if text.startswith((b"skipped=", b"dropped=")):
        return text.partition(b"=")[2].isdigit()
    return text.startswith(b"ts=") and b" gid=" in text and b" type=" in text


class MemcachedWatchReader(TraceReader):
    """memcached's watch log: fetches grouped into multigets by connection and time (see the module doc)."""

    name: ClassVar[str] = "memcached-watch"
    sniff_rank: ClassVar[int | None] = 45
    ordered: ClassVar[bool] = False

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        seen = [watch_like(ln) for ln in head.lines]
        if not any(s is True for s in seen) or any(s is False for s in seen):
            return None
        return f"{head.where}memcached watch log (ts=… gid=… type=…)"

    @property
    def gap_us(self) -> int:
        gap = self.options.watch_gap_us
        return DEFAULT_GAP_US if gap is None else gap

    def id_options(self) -> dict[str, Any]:
        return {"watch_gap_us": self.gap_us}

    def columns(self) -> list[str]:
        return list(_COLUMNS)

    def chunks(self) -> Iterator[Chunk]:
        sink = self.sink
        limits = self.options.limits
        grouper = Grouper(self.gap_us)
        rows = _Rows()
        bad = 0
        with open_text(self.source, sink) as fh:
            for number, raw in text_lines(fh, limits=limits, sink=sink):
                try:
                    line = parse_line(raw)
                except LineProblem as exc:
                    sink.report(number, exc.field, exc.problem)
                    bad += 1
                    if bad >= _FLUSH_PROBLEMS:  # the error policy decides now, not after a chunk of rows
                        sink.flush(rows_dropped=bad)
                        bad = 0
                    continue
                if line.kind == FETCH and limits.max_rows and grouper.fetches >= limits.max_rows:
                    raise too_many_rows(sink, limits, number)
                for request in grouper.add(line, number):
                    rows.add(request)
                if rows.n >= _CHUNK_ROWS:
                    sink.flush(rows_dropped=bad)
                    bad = 0
                    yield rows.chunk()
            for request in grouper.finish():
                rows.add(request)
        sink.flush(rows_dropped=bad)
        if rows.n:
            yield rows.chunk()
        self._note(grouper)

    def _note(self, g: Grouper) -> None:
        self.notes.append(
            f"requests grouped from fetches: per connection, at most {self.gap_us} µs apart, no key twice, no store "
            "in between (a heuristic: docs/formats.md § memcached-watch)"
        )
        if g.stores:
            self.notes.append(f"{g.stores:,} store line(s) and the {g.lookups:,} lookup(s) they logged left out")
        if g.other:
            shown = ", ".join(f"{t}: {n:,}" for t, n in sorted(g.other.items()))
            self.notes.append(f"lines of other types skipped ({shown})")
        if g.lost:
            self.notes.append(
                f"LOST: the watch lost {g.lost:,} line(s) (memcached skipped {g.skipped:,}, its worker threads "
                f"dropped {g.dropped:,}): the trace misses their fetches"
            )


class _Rows:
    """Closed requests accumulated as columns until a chunk is full."""

    def __init__(self) -> None:
        self.next_id = 0
        self._clear()

    def _clear(self) -> None:
        self.n = 0
        self.ids: list[int] = []
        self.ts: list[float] = []
        self.keys: list[str] = []
        self.sizes: list[int | None] = []
        self.clients: list[str] = []
        self.lines: list[int] = []

    def add(self, request: Request) -> None:
        rid, ts = self.next_id, request.us / 1e6
        self.next_id += 1
        server, cfd = request.conn
        client = f"{server}/{cfd}" if server else str(cfd)
        for f in request.fetches:
            self.ids.append(rid)
            self.ts.append(ts)
            self.keys.append(f.key)
            self.sizes.append(f.size)
            self.clients.append(client)
            self.lines.append(f.line)
        self.n += len(request.fetches)

    def chunk(self) -> Chunk:
        n = self.n
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.ids, type=pa.int64()),
                pa.array(self.ts, type=pa.float64()),
                pa.array(self.keys, type=pa.string()),
                pa.array(self.sizes, type=pa.int64()),
                pa.array(["get"] * n, type=pa.string()),
                pa.array(self.clients, type=pa.string()),
            ],
            schema=_SCHEMA,
        )
        chunk = Chunk(batch, np.asarray(self.lines, dtype=np.int64))
        self._clear()
        return chunk
