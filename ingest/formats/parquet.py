"""`parquet`: the canonical long format in Parquet (columns renamed with `--map column=field`).

Errors name the 1-based row number in place of a line.

Caps (ingest.limits), checked from the footer before any row is read: columns (the schema), rows (`num_rows`),
decompressed bytes and compression ratio (the row groups' uncompressed size against the file's). While reading
under a decompressed-bytes or ratio cap (uploads), text columns come as dictionaries first, so the bytes they
expand to are counted (and checked against those caps, and each value against the line cap) before they are
materialized, in slices of at most one block: a tiny dictionary repeated a million times cannot expand unchecked.
Without those caps (a local file by default) values are read as stored and checked against the line cap.
Unsupported column types
(lists, structs, maps, timestamps, ...) and corrupt data are BadInputError, never an Arrow exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ingest.formats.base import Chunk, TraceReader, check_columns, convert_canonical, map_header, require
from ingest.formats.head import Head

__all__ = ["ParquetReader"]

REQUIRED: tuple[str, ...] = ("ts", "key")
#: Rows per batch (read as dictionaries, a batch stays compact until sliced and decoded one block at a time).
_ROWS_PER_BATCH = 1 << 20
_NUMERIC_FIELDS = frozenset(["request_id", "ts", "value_size", "latency_us"])


def _texty(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
    )


def _accepted(t: pa.DataType, field: str) -> bool:
    """Whether a column of type `t` can feed canonical `field` (text is parsed like CSV; numbers are checked)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if _texty(t) or pa.types.is_integer(t) or pa.types.is_null(t):
        return True
    if field in _NUMERIC_FIELDS:
        return bool(pa.types.is_floating(t) or pa.types.is_decimal(t))
    return False


class ParquetReader(TraceReader):
    """Canonical rows from a Parquet file; typed columns are checked, text columns parsed like CSV."""

    name: ClassVar[str] = "parquet"
    sniff_rank: ClassVar[int | None] = 10

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        return "Parquet magic bytes" if head.raw.startswith(b"PAR1") else None

    _fields: dict[str, str] | None = None

    def _file(self, read_dictionary: list[str] | None = None) -> pq.ParquetFile:
        if self.source.compression != "none":
            raise self.fatal(None, None, f"a {self.source.compression}-compressed Parquet file is not supported")
        try:
            # pre_buffer=False: with pre-buffering, iter_batches keeps every column chunk it has read cached until
            # the file is closed, so reading a file costs its whole compressed size in memory
            return pq.ParquetFile(self.source.path, read_dictionary=read_dictionary, pre_buffer=False)
        except Exception as exc:  # pyarrow raises several types for a corrupt footer
            raise self.fatal(None, None, f"not a readable Parquet file: {_short(exc)}") from None

    def columns(self) -> list[str]:
        if self._fields is None:
            pf = self._file()
            limits = self.options.limits
            schema = pf.schema_arrow
            check_columns(len(schema.names), limits, self.sink, None, what="the Parquet schema")
            names = list(schema.names)
            self._fields = map_header(names, self.options.mapping, self.sink)
            require(set(self._fields.values()), REQUIRED, names, self.sink)
            for column, fld in self._fields.items():
                t = schema.field(column).type
                if not _accepted(t, fld):
                    want = "numbers or text" if fld in _NUMERIC_FIELDS else "text or integers"
                    raise self.fatal(None, fld, f"column '{column}' has type {t}; expected {want}")
            self._check_footer(pf)
        return list(self._fields.values())

    def _check_footer(self, pf: pq.ParquetFile) -> None:
        """The caps that the footer already answers: rows, decompressed bytes, compression ratio."""
        limits = self.options.limits
        meta = pf.metadata
        if limits.max_rows and meta.num_rows > limits.max_rows:
            raise limits.exceeded(self.sink.file_label, "max_rows", f"the file has {meta.num_rows:,} rows")
        expanded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        self._check_bytes(expanded, "its row groups hold")

    def _check_bytes(self, expanded: int, what: str) -> None:
        limits = self.options.limits
        label = self.sink.file_label
        if limits.max_decompressed_bytes and expanded > limits.max_decompressed_bytes:
            raise limits.exceeded(
                label, "max_decompressed_bytes", f"{what} {expanded:,} bytes of data uncompressed (or more)"
            )
        ratio = expanded / max(1, self.source.size)
        checked = limits.max_compression_ratio and expanded > limits.ratio_check_after_bytes
        if checked and ratio > limits.max_compression_ratio:
            raise limits.exceeded(
                label,
                "max_compression_ratio",
                f"compression ratio above {limits.max_compression_ratio:g}:1: {what} {expanded:,} bytes of "
                f"data in a file of {self.source.size:,} bytes",
            )

    def chunks(self) -> Iterator[Chunk]:
        self.columns()
        assert self._fields is not None
        schema = self._file().schema_arrow
        limits = self.options.limits
        # With a cap on decompressed bytes or ratio (uploads), text columns are read as dictionaries so that what
        # they expand to is counted before it exists; that costs Arrow a hash of every plainly encoded value
        # (about 2x the read time of a key column), so without those caps (a local file) they are read as they are.
        count_first = bool(limits.max_decompressed_bytes or limits.max_compression_ratio)
        as_dict = [c for c in self._fields if _texty(schema.field(c).type)] if count_first else []
        pf = self._file(read_dictionary=as_dict or None)
        row = 0
        expanded = 0
        total = max(1, pf.metadata.num_rows)
        batches = pf.iter_batches(batch_size=_ROWS_PER_BATCH, columns=list(self._fields))
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except Exception as exc:  # pyarrow raises several types for corrupt pages
                raise self.fatal(
                    row + 1, None, f"corrupt Parquet data after row {row:,}: {_short(exc)}"
                ) from None
            n = batch.num_rows
            row_bytes = self._row_bytes(batch, row)
            expanded += int(row_bytes.sum())
            self._check_bytes(expanded, "the rows read so far hold")
            self.source.report_progress(self.source.size * (row + n) // total)
            for start, stop in _slices(row_bytes, self.options.block_bytes):
                part = batch.slice(start, stop - start)
                lines = np.arange(row + start + 1, row + stop + 1, dtype=np.int64)
                raw = {f: _dense(part.column(c)) for c, f in self._fields.items()}
                chunk = convert_canonical(raw, lines, self.sink)
                if chunk is not None:
                    yield chunk
            row += n

    def _row_bytes(self, batch: pa.RecordBatch, row: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Bytes each row takes once its text is materialized (8 per non-text value); values within the line cap."""
        out = np.zeros(batch.num_rows, dtype=np.int64)
        cap = self.options.limits.max_line_bytes
        for i in range(batch.num_columns):
            col = batch.column(i)
            if pa.types.is_dictionary(col.type):
                lengths = pc.binary_length(col.dictionary).take(col.indices)
                sizes = np.asarray(pc.fill_null(lengths, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
            elif _texty(col.type):
                sizes = np.asarray(pc.fill_null(pc.binary_length(col), 0).to_numpy(zero_copy_only=False), np.int64)
            else:
                out += 8
                continue
            if cap and len(sizes) and int(sizes.max()) > cap:
                at = int(np.argmax(sizes > cap))
                limits = self.options.limits
                raise limits.exceeded(
                    self.sink.file_label,
                    "max_line_bytes",
                    f"a value of {int(sizes[at]):,} bytes, longer than the line cap of {cap:,}",
                    line=row + at + 1,
                    field=self._fields_by_index(i),
                )
            out += sizes
        return out

    def _fields_by_index(self, i: int) -> str:
        assert self._fields is not None
        return list(self._fields.values())[i]


def _dense(arr: pa.Array) -> pa.Array:
    return arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr


def _slices(row_bytes: np.ndarray[Any, np.dtype[np.int64]], budget: int) -> Iterator[tuple[int, int]]:
    """[start, stop) row ranges whose bytes stay within `budget` (a single larger row is a slice of its own)."""
    n = len(row_bytes)
    if n == 0:
        return
    if int(row_bytes.sum()) <= budget:
        yield 0, n
        return
    cum = np.cumsum(row_bytes)
    start = 0
    while start < n:
        base = int(cum[start - 1]) if start else 0
        stop = int(np.searchsorted(cum, base + budget, side="right"))
        stop = max(stop, start + 1)
        yield start, stop
        start = stop


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
