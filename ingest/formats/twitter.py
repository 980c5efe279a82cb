"""`twitter`: Twitter's cache-trace CSV (OSDI'20), no header.

Columns: timestamp,anonymized_key,key_size,value_size,client_id,op,ttl.

timestamp is in seconds. Keys may contain commas (the key is everything between the first field and the last
five). key_size and ttl are not part of the canonical format and are dropped; value_size is kept as recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.formats.base import Chunk, TraceReader, convert_canonical, line_chunks, open_text
from ingest.formats.head import Head
from ingest.validate import to_text

__all__ = ["TwitterReader"]

_N = 7  # timestamp,anonymized_key,key_size,value_size,client_id,op,ttl
_TAKE = {"ts": 0, "key": 1, "value_size": 3, "client_id": 4, "op": 5}


#: What detection takes for a Twitter line: 7+ comma fields, numeric ts, key_size, value_size and ttl, and a
#: memcached op second from the end.
_OPS: Final = frozenset(["get", "gets", "set", "add", "replace", "cas", "append", "prepend", "delete", "incr", "decr"])


def _twitter_like(line: bytes) -> bool:
    parts = line.split(b",")
    if len(parts) < 7:
        return False
    ts, key_size, value_size, op, ttl = parts[0], parts[-5], parts[-4], parts[-2], parts[-1]
    return (
        ts.isdigit()
        and key_size.isdigit()
        and value_size.isdigit()
        and ttl.isdigit()
        and op.decode("ascii", errors="replace") in _OPS
    )


#: The seven fields; the key takes everything between the first field and the last five (it may hold commas).
_LINE = r"^(?P<ts>[^,]*),(?P<key>.*),(?P<ks>[^,]*),(?P<vs>[^,]*),(?P<cl>[^,]*),(?P<op>[^,]*),(?P<ttl>[^,]*)$"


class TwitterReader(TraceReader):
    """Twitter cache traces: one key access per line (single-key; multigets only via --group-window-s).

    Lines are split by one vectorized regular expression (no Python object per field), so a line of a million
    commas costs what its bytes cost.
    """

    name: ClassVar[str] = "twitter"
    sniff_rank: ClassVar[int | None] = 80

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        if not all(_twitter_like(ln) for ln in head.lines):
            return None
        return f"{head.where}header-less CSV: timestamp,key,key_size,value_size,client,op,ttl"

    def columns(self) -> list[str]:
        return list(_TAKE)

    def chunks(self) -> Iterator[Chunk]:
        sink = self.sink
        with open_text(self.source, sink) as fh:
            for raw, lines in line_chunks(
                fh, sink=sink, block_bytes=self.options.block_bytes, limits=self.options.limits
            ):
                text, bad = to_text(raw, None, lines, sink)
                parts = pc.extract_regex(text, _LINE)
                matched = np.asarray(pc.fill_null(parts.is_valid(), False).to_numpy(zero_copy_only=False))
                short = ~bad & ~matched
                if short.any():
                    idx = np.flatnonzero(short)
                    commas = pc.count_substring(text.take(pa.array(idx)), ",").to_pylist()
                    for i, c in zip(idx.tolist(), commas, strict=True):
                        sink.report(int(lines[i]), None, f"expected {_N} columns, got {int(c or 0) + 1}")
                drop = bad | short
                sink.flush(rows_dropped=int(drop.sum()))
                if drop.any():
                    parts = parts.filter(pa.array(~drop))
                    lines = lines[~drop]
                if len(lines) == 0:
                    continue
                cols = {f: pc.struct_field(parts, [i]) for f, i in _TAKE.items()}
                chunk = convert_canonical(cols, lines, sink)
                if chunk is not None:
                    yield chunk
