"""`keys-bin`: keys only, big-endian signed int64 per access (Java DataInputStream.readLong; e.g. Scarab).

No time and no sizes in the file: ts is synthesized as access index / rate (`--rate`, default 1000 accesses/s),
value_size is null, the key is the decimal integer. Errors name the 1-based record number in place of a line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pyarrow as pa

from ingest.formats.base import Chunk, TraceReader
from ingest.formats.head import Head

__all__ = ["KeysBinReader"]

_RECORDS_PER_CHUNK = 1 << 20


class KeysBinReader(TraceReader):
    """Binary int64 keys, one access each (single-key; multigets only via --group-window-s)."""

    name: ClassVar[str] = "keys-bin"
    synthesizes_ts: ClassVar[bool] = True
    sniff_rank: ClassVar[int | None] = 20

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        return f"{head.where}binary content: big-endian int64 keys" if head.binary else None

    def columns(self) -> list[str]:
        return ["ts", "key", "value_size"]

    def chunks(self) -> Iterator[Chunk]:
        rate = self.options.rate
        index = 0
        with self.source.open() as fh:
            while True:
                data = fh.read(8 * _RECORDS_PER_CHUNK)
                if not data:
                    break
                while len(data) % 8:
                    more = fh.read(8 - len(data) % 8)
                    if not more:
                        break
                    data += more
                whole = len(data) - len(data) % 8
                if whole < len(data):
                    raise self.fatal(
                        index + whole // 8 + 1,
                        "key",
                        f"truncated record: {len(data) - whole} trailing byte(s) (file length is not a multiple of 8)",
                    )
                keys = np.frombuffer(data, dtype=">i8").astype(np.int64)
                n = len(keys)
                idx = np.arange(index, index + n, dtype=np.int64)
                batch = pa.RecordBatch.from_pydict(
                    {
                        "ts": pa.array(idx / rate, type=pa.float64()),
                        "key": pa.array(keys).cast(pa.string()),
                        "value_size": pa.nulls(n, pa.int64()),
                    }
                )
                index += n
                yield Chunk(batch, idx + 1)
        if index == 0:
            raise self.fatal(1, None, "file is empty")
