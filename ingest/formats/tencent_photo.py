"""`tencent-photo`: Tencent QQPhoto CDN trace (SNIA IOTTA 27476), space-separated, no header:
`YYYYMMDDHHMMSS photo_id image_format size_category return_size cache_hit terminal_type response_time_ms`.

Mapping: ts = the timestamp read as UTC (1 s resolution); key = `photo_id:image_format` (the same photo in
another format is another object); value_size = return_size; client_id = terminal_type; op = "get";
latency_us = response_time_ms × 1000. size_category and cache_hit are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import ClassVar, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.formats.base import Chunk, TraceReader, assemble, line_chunks, open_text
from ingest.formats.head import Head
from ingest.validate import Lines, Mask, to_float, to_int, to_key, to_text

__all__ = ["TencentPhotoReader"]

_N = 8
#: What detection takes for a line of this trace: a 14-digit timestamp and 7 more space-separated fields.
_SNIFF_LINE: Final = re.compile(rb"^[0-9]{14} \S+ \S+ \S+ [0-9]+ [0-9]+ \S+ [0-9.]+\r?$")


def _parse_time(text: pa.Array, lines: Lines, reader: TraceReader) -> tuple[pa.Array, Mask]:
    try:
        stamps = pc.strptime(text, format="%Y%m%d%H%M%S", unit="s", error_is_null=False)
        secs = stamps.cast(pa.int64()).cast(pa.float64())
        ok = pc.match_substring_regex(text, r"^[0-9]{14}$")
        if pc.all(ok).as_py():
            return secs, np.zeros(len(text), dtype=np.bool_)
    except pa.ArrowInvalid:
        pass
    bad = np.zeros(len(text), dtype=np.bool_)
    out = np.zeros(len(text), dtype=np.float64)
    for i, v in enumerate(text.to_pylist()):
        try:
            if v is None or len(v) != 14 or not v.isdigit():
                raise ValueError(v)
            out[i] = datetime.strptime(v, "%Y%m%d%H%M%S").replace(tzinfo=UTC).timestamp()
        except ValueError:
            bad[i] = True
            reader.sink.report(int(lines[i]), "ts", f'expected a YYYYMMDDHHMMSS timestamp, got "{v}"')
    return pa.array(out), bad


class TencentPhotoReader(TraceReader):
    """Tencent photo-CDN accesses: one key per line (single-key; multigets only via --group-window-s)."""

    name: ClassVar[str] = "tencent-photo"
    sniff_rank: ClassVar[int | None] = 70

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        if not all(_SNIFF_LINE.match(ln) for ln in head.lines):
            return None
        return f"{head.where}8 space-separated fields with a YYYYMMDDHHMMSS timestamp"

    def columns(self) -> list[str]:
        return ["ts", "key", "value_size", "op", "client_id", "latency_us"]

    def chunks(self) -> Iterator[Chunk]:
        sink = self.sink
        with open_text(self.source, sink) as fh:
            for raw, lines in line_chunks(
                fh, sink=sink, block_bytes=self.options.block_bytes, limits=self.options.limits
            ):
                text, bad = to_text(raw, None, lines, sink)
                # count fields before splitting: a line of many spaces must not become as many strings
                lens = np.asarray(
                    pc.fill_null(pc.count_substring(text, " "), 0).to_numpy(zero_copy_only=False), dtype=np.int64
                ) + 1
                wrong = ~bad & (lens != _N)
                for i in np.flatnonzero(wrong):
                    sink.report(int(lines[i]), None, f"expected {_N} space-separated columns, got {lens[i]}")
                drop = bad | wrong
                if drop.any():
                    sink.flush(rows_dropped=int(drop.sum()))
                    text = text.filter(pa.array(~drop))
                    lines = lines[~drop]
                if len(lines) == 0:
                    continue
                parts = pc.split_pattern(text, " ")

                def col(i: int, parts: pa.Array = parts) -> pa.Array:
                    return pc.list_element(parts, i)

                ts, b0 = _parse_time(col(0), lines, self)
                key, b1 = to_key(pc.binary_join_element_wise(col(1), col(2), ":"), "key", lines, sink)
                size, b2 = to_int(col(4), "value_size", lines, sink, required=True)
                client, b3 = to_text(col(6), "client_id", lines, sink)
                lat, b4 = to_float(col(7), "latency_us", lines, sink, non_negative=True, scale=1000.0)
                op = pa.array(np.full(len(lines), "get", dtype=object), type=pa.string())
                cols = {
                    "ts": ts,
                    "key": key,
                    "value_size": size,
                    "op": op,
                    "client_id": client,
                    "latency_us": lat,
                }
                chunk = assemble(cols, lines, b0 | b1 | b2 | b3 | b4, sink)
                if chunk is not None:
                    yield chunk
