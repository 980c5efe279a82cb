"""`pipe-kv`: one key access per line, `TS|KEY|SIZE`, no header (a scratch format).

ts in seconds, the key as written (it may not hold `|`), the value size in bytes (empty: unknown).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import ClassVar, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.formats.base import Chunk, TraceReader, convert_canonical, line_chunks, open_text
from ingest.formats.head import Head
from ingest.validate import to_text

__all__ = ["PipeKvReader"]

_LINE: Final = r"^(?P<ts>[^|]*)\|(?P<key>[^|]*)\|(?P<vs>[^|]*)$"
_TAKE: Final = {"ts": 0, "key": 1, "value_size": 2}
_SNIFF_LINE: Final = re.compile(rb"^[0-9.]+\|[^|]+\|[0-9]*\r?$")


class PipeKvReader(TraceReader):
    """`TS|KEY|SIZE` lines: one access each (single-key; multigets only via --group-window-s)."""

    name: ClassVar[str] = "pipe-kv"
    sniff_rank: ClassVar[int | None] = 75

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        if not all(_SNIFF_LINE.match(ln) for ln in head.lines):
            return None
        return f"{head.where}header-less lines TS|KEY|SIZE"

    def columns(self) -> list[str]:
        return list(_TAKE)

    def chunks(self) -> Iterator[Chunk]:
        sink = self.sink
        with open_text(self.source, sink) as fh:
            for raw, lines in line_chunks(
                fh, sink=sink, block_bytes=self.options.block_bytes, limits=self.options.limits
            ):
                text, bad = to_text(raw, None, lines, sink)
                parts = pc.extract_regex(pc.utf8_rtrim(text, characters="\r"), _LINE)
                matched = np.asarray(pc.fill_null(parts.is_valid(), False).to_numpy(zero_copy_only=False))
                short = ~bad & ~matched
                for i in np.flatnonzero(short).tolist():
                    sink.report(int(lines[i]), None, "expected 3 fields TS|KEY|SIZE")
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
