"""Request ids for single-key traces: one request per row (default) or grouping by client and time window.

`--group-window-s W`: rows of the same client_id whose ts lies within W seconds of the first row of the
client's open group join that group (one multigets); the next row after the window opens a new group. All rows
of a group get the group's first ts (the request's arrival). A trace without client_id groups all rows as one
client. Groups are numbered from 0 in order of their first row; rows are emitted group by group. Grouping needs
time-ordered rows (use `--unsorted sort` for unsorted files).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ingest.formats.base import Chunk
from ingest.validate import ErrorSink

__all__ = ["OnePerRow", "RequestIds", "WindowGrouper", "with_column"]


def with_column(batch: pa.RecordBatch, name: str, values: pa.Array) -> pa.RecordBatch:
    """The batch with column `name` set (replaced, or added in front)."""
    names = batch.schema.names
    if name in names:
        return batch.set_column(names.index(name), name, values)
    return pa.RecordBatch.from_arrays([values, *batch.columns], names=[name, *names])


class RequestIds(ABC):
    """Assigns `request_id` to chunks of a single-key trace."""

    @abstractmethod
    def assign(self, chunk: Chunk) -> Iterator[Chunk]: ...

    def finish(self) -> Iterator[Chunk]:
        return iter(())


class OnePerRow(RequestIds):
    """Each row is its own request; ids count rows from 0 in stream order."""

    def __init__(self) -> None:
        self._next = 0

    def assign(self, chunk: Chunk) -> Iterator[Chunk]:
        n = chunk.batch.num_rows
        ids = pa.array(np.arange(self._next, self._next + n, dtype=np.int64))
        self._next += n
        yield Chunk(with_column(chunk.batch, "request_id", ids), chunk.lines)


class WindowGrouper(RequestIds):
    """Same client within `window_s` seconds of its group's first row → one request (see module doc)."""

    def __init__(self, window_s: float, sink: ErrorSink, *, unsorted_hint: str | None = None) -> None:
        if not window_s >= 0:
            raise ValueError("window must be >= 0")
        self.window_s = window_s
        self.sink = sink
        self.unsorted_hint = unsorted_hint
        self._next = 0
        self._open: dict[str | None, tuple[int, float]] = {}
        self._starts: dict[int, float] = {}
        self._carry: list[tuple[pa.RecordBatch, np.ndarray, np.ndarray]] = []
        self._last: tuple[float, int] | None = None

    def assign(self, chunk: Chunk) -> Iterator[Chunk]:
        batch, lines = chunk.batch, chunk.lines
        ts = batch.column("ts").to_numpy(zero_copy_only=False)
        clients = batch.column("client_id").to_pylist() if "client_id" in batch.schema.names else [None] * len(ts)
        gids = np.empty(len(ts), dtype=np.int64)
        w = self.window_s
        last_t, last_line = self._last if self._last is not None else (-np.inf, 0)
        for i, (t, c) in enumerate(zip(ts.tolist(), clients, strict=True)):
            if t < last_t:
                raise self.sink.fatal(
                    int(lines[i]),
                    "ts",
                    f"not sorted: ts {t!r} comes after ts {last_t!r} (line {last_line}); grouping needs time order",
                    hint=self.unsorted_hint,
                )
            last_t, last_line = t, int(lines[i])
            g = self._open.get(c)
            if g is None or t - g[1] > w:
                g = (self._next, t)
                self._open[c] = g
                self._starts[self._next] = t
                self._next += 1
            gids[i] = g[0]
        self._last = (last_t, last_line)
        self._carry.append((batch, lines, gids))
        # groups whose window ended before the latest ts can get no more rows
        closed_below = self._next
        for gid in sorted(g for g, _ in self._open.values()):
            if self._starts[gid] + w >= last_t:
                closed_below = gid
                break
        self._open = {c: g for c, g in self._open.items() if self._starts[g[0]] + w >= last_t}
        yield from self._emit(closed_below)

    def _emit(self, below: int) -> Iterator[Chunk]:
        if not self._carry:
            return
        batch = pa.Table.from_batches([b for b, _, _ in self._carry]).combine_chunks().to_batches()
        table_batch = batch[0] if batch else None
        lines = np.concatenate([ln for _, ln, _ in self._carry])
        gids = np.concatenate([g for _, _, g in self._carry])
        self._carry = []
        if table_batch is None:
            return
        done = gids < below
        if (~done).any():
            keep = ~done
            self._carry.append((table_batch.filter(pa.array(keep)), lines[keep], gids[keep]))
        if done.any():
            sel = np.flatnonzero(done)
            order = sel[np.argsort(gids[sel], kind="stable")]
            out = table_batch.take(pa.array(order))
            g = gids[order]
            starts = np.asarray([self._starts[x] for x in g.tolist()], dtype=np.float64)
            for x in set(g.tolist()):
                self._starts.pop(x, None)
            out = with_column(out, "ts", pa.array(starts))
            out = with_column(out, "request_id", pa.array(g))
            yield Chunk(out, lines[order])

    def finish(self) -> Iterator[Chunk]:
        yield from self._emit(self._next)


#: Rounding of ts (float seconds since the epoch) in a window's test: a read whose start is the window's length
#: after its group's first (to the µs) still joins it.
_SLACK_S = 1e-6


class StatementGrouper(WindowGrouper):
    """Request ids for a full query log's rows (`cassandra-fql` formats, docs/formats.md § Grouping).

    Rows come sorted by (ts, request_id, source line). A row with a request id belongs to a request the log holds
    whole (an IN read, a write, a batch): it keeps its rows together under a new id. A row without one is a
    single-partition read: with a window W (seconds), it joins the open group of its `_group` (the table and
    the statement text) when its ts is within W of the group's first row and its key is not in the group yet;
    otherwise it opens a new group. Without a window (`--no-grouping`) each is its own request. Ids are numbered
    from 0 by first row; every row of a group gets the group's first ts; `_group` is dropped.
    """

    def __init__(self, window_s: float | None, sink: ErrorSink, *, unsorted_hint: str | None = None) -> None:
        super().__init__(0.0 if window_s is None else window_s, sink, unsorted_hint=unsorted_hint)
        self.grouping = window_s is not None
        self._keys: dict[int, set[str]] = {}
        self._fixed: tuple[int, int] | None = None  # (the reader's id, our id) of the request being read

    def assign(self, chunk: Chunk) -> Iterator[Chunk]:
        batch, lines = chunk.batch, chunk.lines
        ts = batch.column("ts").to_numpy(zero_copy_only=False)
        given = batch.column("request_id").to_pylist()
        groups = batch.column("_group").to_pylist()
        keys = batch.column("key").to_pylist()
        gids = np.empty(len(ts), dtype=np.int64)
        w = self.window_s
        last_t, last_line = self._last if self._last is not None else (-np.inf, 0)
        for i, (t, rid, g, k) in enumerate(zip(ts.tolist(), given, groups, keys, strict=True)):
            if t < last_t:
                raise self.sink.fatal(
                    int(lines[i]), "ts", f"not sorted: ts {t!r} comes after ts {last_t!r} (line {last_line})"
                )
            last_t, last_line = t, int(lines[i])
            if rid is not None:
                if self._fixed is None or self._fixed[0] != rid:
                    self._fixed = (rid, self._next)
                    self._starts[self._next] = t
                    self._next += 1
                gids[i] = self._fixed[1]
                continue
            open_group = self._open.get(g) if self.grouping else None
            if open_group is None or t - open_group[1] > w + _SLACK_S or k in self._keys[open_group[0]]:
                if open_group is not None:
                    self._keys.pop(open_group[0], None)
                open_group = (self._next, t)
                if self.grouping:
                    self._open[g] = open_group
                    self._keys[self._next] = set()
                self._starts[self._next] = t
                self._next += 1
            if self.grouping:
                self._keys[open_group[0]].add(k)
            gids[i] = open_group[0]
        self._last = (last_t, last_line)
        self._carry.append((batch, lines, gids))
        closed_below = self._next
        for gid in sorted(g for g, _ in self._open.values()):
            if self._starts[gid] + w + _SLACK_S >= last_t:
                closed_below = gid
                break
        if self._fixed is not None:  # the request being read may go on in the next chunk
            closed_below = min(closed_below, self._fixed[1])
        still = {c: g for c, g in self._open.items() if self._starts[g[0]] + w + _SLACK_S >= last_t}
        for c, g in self._open.items():
            if c not in still:
                self._keys.pop(g[0], None)
        self._open = still
        yield from self._emit_clean(closed_below)

    def _emit_clean(self, below: int) -> Iterator[Chunk]:
        for out in self._emit(below):
            yield Chunk(out.batch.drop_columns(["_group"]), out.lines)

    def finish(self) -> Iterator[Chunk]:
        yield from self._emit_clean(self._next)
