"""`meta-kv`: Meta's KV cache traces (CacheLib kvcache releases), located by header names, not by position.

Layouts (detected from the header): 202206 `key,op,size,op_count,key_size`; 202312 the same plus `ttl`;
202210 `op_time,key,key_size,op,op_count,size,cache_hits,ttl`; 202401 the 202210 columns plus
`usecase,sub_usecase` (columns may come in any order). Each row stands for `op_count` accesses of the key in
that second: it is expanded into that many rows (one access each; ids assigned downstream). ts = op_time in
seconds; layouts without op_time get ts = access index / rate (`--rate`). op is lower-cased. value_size = size
when size > 0, else null: Meta records 0 when the size is unknown (a GET that missed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ingest.formats.base import (
    Chunk,
    TraceReader,
    assemble,
    csv_chunks,
    open_text,
    read_header,
    require,
    too_many_rows,
)
from ingest.formats.head import Head
from ingest.validate import Lines, to_float, to_int, to_key, to_text

__all__ = ["MetaKvReader", "meta_kv_layout"]

REQUIRED: tuple[str, ...] = ("key", "op", "op_count", "size")
#: Rows per expanded chunk.
_EXPAND_ROWS = 1 << 20
#: Expanded rows beyond this are refused even without a row cap (int64 arithmetic stays exact).
_MAX_EXPANDED = 1 << 62


def meta_kv_layout(names: list[str]) -> str | None:
    """The release whose layout this header matches, or None when it is not a Meta KV header."""
    cols = set(names)
    if not {"key", "op", "op_count"} <= cols:
        return None
    if "op_time" not in cols:
        return "202312" if "ttl" in cols else "202206"
    return "202401" if "usecase" in cols else "202210"


class MetaKvReader(TraceReader):
    """Meta KV cache accesses (single-key; multigets only via --group-window-s)."""

    name: ClassVar[str] = "meta-kv"
    synthesizes_ts: ClassVar[bool] = True  # only for the layouts without op_time
    sniff_rank: ClassVar[int | None] = 40

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        layout = meta_kv_layout(head.header)
        return None if layout is None else f"{head.where}CSV header of the Meta KV {layout} layout"

    _names: list[str] | None = None

    def columns(self) -> list[str]:
        if self._names is None:
            with open_text(self.source, self.sink) as fh:
                names, raw = read_header(fh, delimiter=",", sink=self.sink, limits=self.options.limits)
            if not raw:
                raise self.fatal(1, None, "file is empty")
            require(set(names), REQUIRED, names, self.sink)
            self.layout = meta_kv_layout(names)
            self._names = names
        return ["ts", "key", "value_size", "op"]

    def uses_rate(self) -> bool:
        self.columns()
        return self.layout in ("202206", "202312")

    def chunks(self) -> Iterator[Chunk]:
        self.columns()
        assert self._names is not None
        sink = self.sink
        rate = self.options.rate
        index = 0
        with open_text(self.source, sink) as fh:
            read_header(fh, delimiter=",", sink=sink, limits=self.options.limits)
            for raw, lines in csv_chunks(
                fh,
                names=self._names,
                delimiter=",",
                sink=sink,
                first_line=2,
                block_bytes=self.options.block_bytes,
                quoting=False,
                limits=self.options.limits,
            ):
                key, b1 = to_key(raw["key"], "key", lines, sink)
                op, b2 = to_text(raw["op"], "op", lines, sink)
                count, b3 = to_int(raw["op_count"], "op_count", lines, sink, required=True)
                size, b4 = to_int(raw["size"], "size", lines, sink, required=True)
                bad = b1 | b2 | b3 | b4
                zero = ~bad & np.asarray(pc.fill_null(pc.equal(count, 0), False).to_numpy(zero_copy_only=False))
                for i in np.flatnonzero(zero):
                    sink.report(int(lines[i]), "op_count", 'expected a positive integer, got "0"')
                bad |= zero
                if "op_time" in raw:
                    ts, b5 = to_float(raw["op_time"], "op_time", lines, sink, required=True)
                    bad |= b5
                sink.flush(rows_dropped=int(bad.sum()))
                reps = np.where(bad, 0, np.asarray(pc.fill_null(count, 0).to_numpy(zero_copy_only=False)))
                cum = self._expanded_rows(reps, lines, index)
                total = int(cum[-1]) if len(cum) else 0
                sizes_all = size
                ts_all = ts if "op_time" in raw else None
                # expand in slices of at most _EXPAND_ROWS rows: one row with a huge op_count never becomes one
                # huge array (the row cap stops it first, or it streams out slice by slice)
                for start in range(0, total, _EXPAND_ROWS):
                    stop = min(total, start + _EXPAND_ROWS)
                    src = np.searchsorted(cum, np.arange(start, stop, dtype=np.int64), side="right")
                    take = pa.array(src)
                    n = stop - start
                    if ts_all is None:
                        ts = pa.array(np.arange(index, index + n, dtype=np.int64) / rate)
                    else:
                        ts = ts_all.take(take)
                    index += n
                    sizes = sizes_all.take(take)
                    cols = {
                        "ts": ts,
                        "key": key.take(take),
                        "value_size": pc.if_else(pc.greater(sizes, 0), sizes, pa.scalar(None, pa.int64())),
                        "op": pc.utf8_lower(op.take(take)),
                    }
                    chunk = assemble(cols, lines[src], np.zeros(n, dtype=np.bool_), sink)
                    if chunk is not None:
                        yield chunk

    def _expanded_rows(self, reps: npt.NDArray[np.int64], lines: Lines, before: int) -> npt.NDArray[np.int64]:
        """Cumulative expanded rows of a chunk; the row cap (and int64) is checked before anything is expanded."""
        limits = self.options.limits
        budget = (limits.max_rows - before) if limits.max_rows else _MAX_EXPANDED
        wide = np.cumsum(reps, dtype=np.float64)
        if len(wide) and wide[-1] > min(budget, _MAX_EXPANDED):
            i = int(np.searchsorted(wide, min(budget, _MAX_EXPANDED), side="right"))
            if limits.max_rows and budget <= _MAX_EXPANDED:
                raise too_many_rows(self.sink, limits, int(lines[i]))
            raise self.fatal(int(lines[i]), "op_count", f"op_count adds up to more than {_MAX_EXPANDED:,} rows")
        return np.cumsum(reps, dtype=np.int64)
