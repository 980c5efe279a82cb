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
import pyarrow as pa
import pyarrow.compute as pc

from ingest.formats.base import Chunk, TraceReader, assemble, csv_chunks, read_header, require
from ingest.validate import to_float, to_int, to_key, to_text

__all__ = ["MetaKvReader", "meta_kv_layout"]

REQUIRED: tuple[str, ...] = ("key", "op", "op_count", "size")


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

    _names: list[str] | None = None

    def columns(self) -> list[str]:
        if self._names is None:
            with self.source.open() as fh:
                names, raw = read_header(fh, delimiter=",")
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
        with self.source.open() as fh:
            read_header(fh, delimiter=",")
            for raw, lines in csv_chunks(
                fh,
                names=self._names,
                delimiter=",",
                sink=sink,
                first_line=2,
                block_bytes=self.options.block_bytes,
                quoting=False,
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
                take = pa.array(np.repeat(np.arange(len(lines), dtype=np.int64), reps))
                n = len(take)
                if "op_time" not in raw:
                    ts = pa.array(np.arange(index, index + n, dtype=np.int64) / rate)
                else:
                    ts = ts.take(take)
                index += n
                sizes = size.take(take)
                cols = {
                    "ts": ts,
                    "key": key.take(take),
                    "value_size": pc.if_else(pc.greater(sizes, 0), sizes, pa.scalar(None, pa.int64())),
                    "op": pc.utf8_lower(op.take(take)),
                }
                chunk = assemble(cols, np.repeat(lines, reps), np.zeros(n, dtype=np.bool_), sink)
                if chunk is not None:
                    yield chunk
