"""`requests`: one row per multiget — ts, keys (JSON array or space-separated), optional sizes — in CSV or JSONL.

Expanded into the long format: one row per key, all sharing the request's id and ts. `request_id` defaults to
the 0-based ordinal of the request in the file. Other columns (client_id, op, latency_us, table) are per request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from ingest.formats.base import (
    CONVERTERS,
    Chunk,
    Lines,
    TraceReader,
    assemble,
    csv_chunks,
    open_text,
    read_header,
    require,
)
from ingest.formats.head import Head
from ingest.formats.jsonl import first_object_keys, jsonl_chunks
from ingest.schema import CANONICAL_SCHEMA
from ingest.validate import to_text

__all__ = ["RequestsReader"]

REQUIRED: tuple[str, ...] = ("ts", "keys")
#: Source bytes per chunk: smaller than other formats' because keys are expanded one Python string each.
_BLOCK_BYTES = 2 << 20
_PER_REQUEST = ("request_id", "ts", "op", "client_id", "latency_us", "table")


def _split(text: str) -> list[Any]:
    text = text.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except RecursionError:
            raise ValueError("nested too deeply") from None
        if not isinstance(value, list):
            raise ValueError("not a list")
        return value
    return text.split()


class RequestsReader(TraceReader):
    """Per-request rows (CSV with a header, or JSONL: chosen by the first character)."""

    name: ClassVar[str] = "requests"
    sniff_rank: ClassVar[int | None] = 50

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        obj = head.first_object
        if obj is not None and "keys" in obj:
            return f"{head.where}JSON lines with a 'keys' list: one row per request"
        if "keys" in head.header:
            return f"{head.where}CSV header with a 'keys' column: one row per request"
        return None

    _fields: dict[str, str] | None = None
    _names: list[str]
    _delim: str = ","

    def columns(self) -> list[str]:
        if self._fields is None:
            limits = self.options.limits
            with open_text(self.source, self.sink) as fh:
                first = fh.read(4096).lstrip()
            if not first:
                raise self.fatal(1, None, "file is empty")
            self.layout = "jsonl" if first.startswith(b"{") else "csv"
            with open_text(self.source, self.sink) as fh:
                if self.layout == "jsonl":
                    self._names, _ = first_object_keys(fh, self.sink, limits)
                else:
                    self._delim = self._delimiter(first)
                    self._names, _ = read_header(fh, delimiter=self._delim, sink=self.sink, limits=limits)
            known = {f.name for f in CANONICAL_SCHEMA if f.name in _PER_REQUEST} | {"keys", "sizes"}
            mapping = dict(self.options.mapping)
            for column, fld in mapping.items():
                if fld not in known:
                    raise self.fatal(None, fld, f"--map {column}={fld}: not a field of the requests format")
            fields = {n: mapping.get(n, n) for n in self._names}
            self._fields = {n: f for n, f in fields.items() if f in known}
            require(set(self._fields.values()), REQUIRED, self._names, self.sink)
        cols = [f for f in self._fields.values() if f in _PER_REQUEST]
        return ["request_id", "key", "value_size", *[c for c in cols if c != "request_id"]]

    @staticmethod
    def _delimiter(head: bytes) -> str:
        first_line = head.split(b"\n", 1)[0]
        return "\t" if b"\t" in first_line else ","

    def chunks(self) -> Iterator[Chunk]:
        self.columns()
        assert self._fields is not None
        next_id = 0
        limits = self.options.limits
        block_bytes = min(self.options.block_bytes, _BLOCK_BYTES)
        with open_text(self.source, self.sink) as fh:
            if self.layout == "jsonl":
                raws: Iterator[tuple[dict[str, pa.Array], Lines]] = jsonl_chunks(
                    fh, sink=self.sink, names=self._fields, limits=limits, block_bytes=block_bytes
                )
            else:
                names, _ = read_header(fh, delimiter=self._delim, sink=self.sink, limits=limits)
                fields = self._fields
                raws = (
                    ({fields[c]: a for c, a in raw.items() if c in fields}, lines)
                    for raw, lines in csv_chunks(
                        fh,
                        names=names,
                        delimiter=self._delim,
                        sink=self.sink,
                        first_line=2,
                        block_bytes=block_bytes,
                        limits=limits,
                    )
                )
            for raw, lines in raws:
                chunk = self._expand(raw, lines, next_id)
                next_id += len(lines)
                if chunk is not None:
                    yield chunk

    def _expand(self, raw: dict[str, pa.Array], lines: Lines, first_id: int) -> Chunk | None:
        sink = self.sink
        n = len(lines)
        bad = np.zeros(n, dtype=np.bool_)
        per: dict[str, pa.Array] = {}
        for fld in _PER_REQUEST:
            if fld in raw:
                per[fld], b = CONVERTERS[fld](raw[fld], fld, lines, sink)
                bad |= b
        if "request_id" not in per:
            per["request_id"] = pa.array(np.arange(first_id, first_id + n, dtype=np.int64))
        keys_text, b = to_text(raw["keys"], "keys", lines, sink)
        bad |= b
        sizes_text = to_text(raw["sizes"], "sizes", lines, sink)[0].to_pylist() if "sizes" in raw else None
        counts = np.zeros(n, dtype=np.int64)
        flat_keys: list[str] = []
        flat_sizes: list[int | None] = []
        for i, text in enumerate(keys_text.to_pylist()):
            line = int(lines[i])
            if bad[i]:
                continue
            try:
                keys = [str(k) for k in _split(text or "")]
            except ValueError:
                sink.report(line, "keys", f"expected a JSON array or space-separated keys, got {text!r}")
                bad[i] = True
                continue
            if not keys or any(k == "" for k in keys):
                sink.report(line, "keys", "missing value" if not keys else "empty key in the list")
                bad[i] = True
                continue
            sizes: list[int | None] = [None] * len(keys)
            stext = sizes_text[i] if sizes_text is not None else None
            if stext:
                try:
                    parsed = _split(stext)
                except ValueError:
                    parsed = [stext]
                if len(parsed) != len(keys):
                    sink.report(line, "sizes", f"{len(parsed)} sizes for {len(keys)} keys")
                    bad[i] = True
                    continue
                wrong = [v for v in parsed if not _is_size(v)]
                if wrong:
                    sink.report(line, "sizes", f'expected non-negative integer, got "{wrong[0]}"')
                    bad[i] = True
                    continue
                sizes = [int(v) for v in parsed]
            counts[i] = len(keys)
            flat_keys.extend(keys)
            flat_sizes.extend(sizes)
        counts[bad] = 0
        sink.flush(rows_dropped=int(bad.sum()))
        take = pa.array(np.repeat(np.arange(n, dtype=np.int64), counts))
        out = {f: a.take(take) for f, a in per.items()}
        out["key"] = pa.array(flat_keys, type=pa.string())
        out["value_size"] = pa.array(flat_sizes, type=pa.int64())
        return assemble(out, np.repeat(lines, counts), np.zeros(len(flat_keys), dtype=np.bool_), sink)


def _is_size(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return 0 <= v < 2**63
    # ASCII digits only ("²".isdigit() is true), and within int64 (no int() of thousands of digits)
    return isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= 19
