"""`twitter`: Twitter's cache-trace CSV (OSDI'20), no header.

Columns: timestamp,anonymized_key,key_size,value_size,client_id,op,ttl.

timestamp is in seconds. Keys may contain commas (the key is everything between the first field and the last
five). key_size and ttl are not part of the canonical format and are dropped; value_size is kept as recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.formats.base import Chunk, TraceReader, convert_canonical, line_chunks
from ingest.validate import to_text

__all__ = ["TwitterReader"]

_N = 7  # timestamp,anonymized_key,key_size,value_size,client_id,op,ttl
_TAKE = {"ts": 0, "key": 1, "value_size": 3, "client_id": 4, "op": 5}


class TwitterReader(TraceReader):
    """Twitter cache traces: one key access per line (single-key; multigets only via --group-window-s)."""

    name: ClassVar[str] = "twitter"

    def columns(self) -> list[str]:
        return list(_TAKE)

    def chunks(self) -> Iterator[Chunk]:
        sink = self.sink
        with self.source.open() as fh:
            for raw, lines in line_chunks(fh, sink=sink, block_bytes=self.options.block_bytes):
                text, bad = to_text(raw, None, lines, sink)
                parts = pc.split_pattern(text, ",")
                lens = np.asarray(pc.list_value_length(parts).to_numpy(zero_copy_only=False), dtype=np.int64)
                short = ~bad & (lens < _N)
                for i in np.flatnonzero(short):
                    sink.report(int(lines[i]), None, f"expected {_N} columns, got {lens[i]}")
                long = ~bad & (lens > _N)
                if long.any():
                    fixed = [
                        [*p[:1], ",".join(p[1 : len(p) - 5]), *p[-5:]] if p is not None and len(p) > _N else p
                        for p in parts.to_pylist()
                    ]
                    parts = pa.array(fixed, type=pa.list_(pa.string()))
                drop = bad | short
                sink.flush(rows_dropped=int(drop.sum()))
                if drop.any():
                    parts = parts.filter(pa.array(~drop))
                    lines = lines[~drop]
                if len(lines) == 0:
                    continue
                cols = {f: pc.list_element(parts, i) for f, i in _TAKE.items()}
                chunk = convert_canonical(cols, lines, sink)
                if chunk is not None:
                    yield chunk
