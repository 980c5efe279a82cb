"""The reader base class and the text-chunking helpers that every text format shares.

A reader turns one `Source` into `Chunk`s: canonical Arrow record batches (without `request_id` for
single-key formats: ids are assigned downstream) plus the 1-based source line of every row, so that
every later problem can still name its line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ingest.formats.source import Source
from ingest.schema import CANONICAL_SCHEMA
from ingest.validate import ErrorSink, Mask, to_float, to_int, to_key, to_text

__all__ = [
    "BLOCK_BYTES",
    "CONVERTERS",
    "Chunk",
    "ReaderOptions",
    "TraceReader",
    "assemble",
    "convert_canonical",
    "csv_chunks",
    "line_chunks",
    "map_header",
    "read_header",
    "require",
]

#: Bytes of decompressed text parsed per chunk (one chunk ≈ one Parquet row-group slice).
BLOCK_BYTES = 16 << 20

Lines = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ReaderOptions:
    """Options a reader may use. `rate` synthesizes ts (row index / rate) for formats that have no time."""

    mapping: Mapping[str, str] = field(default_factory=dict)
    rate: float = 1000.0
    block_bytes: int = BLOCK_BYTES


@dataclass
class Chunk:
    """Canonical rows of one chunk and the source line (or row number) of each."""

    batch: pa.RecordBatch
    lines: Lines


class TraceReader(ABC):
    """One input format. Subclasses set `name` and implement `columns` and `chunks`."""

    name: ClassVar[str]
    #: True when ts is synthesized from the row index and `rate` (so `rate` changes the result).
    synthesizes_ts: ClassVar[bool] = False

    def __init__(self, source: Source, options: ReaderOptions, sink: ErrorSink) -> None:
        self.source = source
        self.options = options
        self.sink = sink
        self.layout: str | None = None  # a variant detected inside the format (e.g. Meta KV 202401)
        self.notes: list[str] = []

    @abstractmethod
    def columns(self) -> list[str]:
        """Canonical fields the chunks carry (may read the header; call before `chunks`).

        Without `request_id` the trace is single-key: ids are assigned downstream (one per row, or grouped).
        """

    @abstractmethod
    def chunks(self) -> Iterator[Chunk]:
        """Canonical chunks in file order; bad rows are reported to the sink and left out."""

    def uses_rate(self) -> bool:
        """Whether `rate` changes the result (ts synthesized); decides whether it enters the dataset id."""
        return self.synthesizes_ts

    def fatal(self, line: int | None, field: str | None, problem: str, *, hint: str | None = None) -> Exception:
        return self.sink.fatal(line, field, problem, hint=hint)


def map_header(names: list[str], mapping: Mapping[str, str], sink: ErrorSink) -> dict[str, str]:
    """Source column → canonical field, after `--map column=field`; unknown columns are ignored."""
    known = {f.name for f in CANONICAL_SCHEMA}
    for column, fld in mapping.items():
        if fld not in known:
            raise sink.fatal(None, fld, f"--map {column}={fld}: unknown field (fields: {', '.join(sorted(known))})")
        if column not in names:
            raise sink.fatal(1, None, f"--map {column}={fld}: the header has no column '{column}'")
    out: dict[str, str] = {}
    for name in names:
        target = mapping.get(name, name if name not in mapping.values() else "")
        if target in known:
            if target in out.values():
                raise sink.fatal(1, target, "two columns map to this field")
            out[name] = target
    return out


def require(present: set[str] | list[str], needed: tuple[str, ...], names: list[str], sink: ErrorSink) -> None:
    """Fail (line 1, the header) when a required field has no column."""
    for fld in needed:
        if fld not in present:
            shown = ", ".join(names) if names else "(empty)"
            raise sink.fatal(1, fld, f"missing required column (header has: {shown}); map one with --map COLUMN={fld}")


def assemble(columns: dict[str, pa.Array], lines: Lines, bad: Mask, sink: ErrorSink) -> Chunk | None:
    """Build a canonical chunk from converted columns, dropping rows marked bad (after reporting them)."""
    sink.flush(rows_dropped=int(bad.sum()))
    fields = [f for f in CANONICAL_SCHEMA if f.name in columns]
    batch = pa.RecordBatch.from_arrays([columns[f.name] for f in fields], schema=pa.schema(fields))
    if bad.any():
        keep = ~bad
        batch = batch.filter(pa.array(keep))
        lines = lines[keep]
    if batch.num_rows == 0:
        return None
    return Chunk(batch, lines)


def read_header(stream: Any, *, delimiter: str, skip_rows: int = 0) -> tuple[list[str], bytes]:
    """Read (and consume) the header line; returns its column names and the raw line."""
    import csv

    for _ in range(skip_rows):
        stream.readline()
    raw = bytes(stream.readline())
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    names = next(csv.reader([text], delimiter=delimiter)) if text else []
    return [n.strip() for n in names], raw


def _line_blocks(stream: Any, block_bytes: int) -> Iterator[bytes]:
    """The stream in blocks of about `block_bytes` that end at a line break (the last one may not)."""
    carry = b""
    while True:
        data = stream.read(block_bytes)
        if not data:
            if carry:
                yield carry
            return
        data = carry + bytes(data)
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        yield data[: cut + 1]
        carry = data[cut + 1 :]


def _parse_blocks(
    stream: Any,
    *,
    names: list[str],
    delimiter: str,
    quoting: bool,
    sink: ErrorSink,
    first_line: int,
    block_bytes: int,
    bad_row: Callable[[Any], str],
) -> Iterator[tuple[pa.RecordBatch, Lines]]:
    """Parse line-aligned blocks one at a time (memory: one block), every column as bytes.

    Each block is parsed with threads; only a block with invalid rows is parsed again single-threaded, which is
    when Arrow reports the row numbers that make the line numbers exact.
    """
    convert = pacsv.ConvertOptions(
        column_types={n: pa.binary() for n in names},
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    line = first_line
    for block in _line_blocks(stream, block_bytes):
        n_lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        skipped: list[int] = []
        reported: list[tuple[int, str]] = []
        base = line

        unnumbered: list[bool] = []

        def handler(
            row: Any,
            base: int = base,
            skipped: list[int] = skipped,
            reported: list[tuple[int, str]] = reported,
            unnumbered: list[bool] = unnumbered,
        ) -> str:
            if row.number is None:
                unnumbered.append(True)
                return "skip"
            skipped.append(base + int(row.number) - 1)
            reported.append((base + int(row.number) - 1, bad_row(row)))
            return "skip"

        parse = pacsv.ParseOptions(
            delimiter=delimiter,
            quote_char='"' if quoting else False,
            escape_char=False,
            ignore_empty_lines=False,
            newlines_in_values=False,
            invalid_row_handler=handler,
        )
        table = None
        for threads in (True, False):
            read = pacsv.ReadOptions(
                use_threads=threads,
                block_size=max(1 << 20, len(block) // 2 + 1) if threads else len(block) + 1,
                column_names=names,
                autogenerate_column_names=False,
            )
            table = pacsv.read_csv(
                pa.BufferReader(block), read_options=read, parse_options=parse, convert_options=convert
            )
            if not unnumbered:
                break
            unnumbered.clear()
            skipped.clear()
            reported.clear()
        assert table is not None
        for bad_line, problem in reported:
            sink.report_dropped(bad_line, None, problem)
        n = table.num_rows
        data_lines = np.arange(base, base + n_lines, dtype=np.int64)
        if skipped:
            data_lines = np.setdiff1d(data_lines, np.asarray(skipped, dtype=np.int64), assume_unique=True)
        line += n_lines
        if n:
            yield table.combine_chunks().to_batches()[0], data_lines[:n]


def csv_chunks(
    stream: Any,
    *,
    names: list[str],
    delimiter: str,
    sink: ErrorSink,
    first_line: int,
    block_bytes: int,
    quoting: bool = True,
) -> Iterator[tuple[dict[str, pa.Array], Lines]]:
    """Stream delimited rows (header already consumed) as binary columns, with exact physical line numbers.

    Rows with the wrong column count are reported (no field) and left out; conversion to canonical types and
    its messages happen in `ingest.validate`. Newlines inside quoted values are not supported (row = line).
    """
    for batch, lines in _parse_blocks(
        stream,
        names=names,
        delimiter=delimiter,
        quoting=quoting,
        sink=sink,
        first_line=first_line,
        block_bytes=block_bytes,
        bad_row=lambda row: f"expected {row.expected_columns} columns, got {row.actual_columns}",
    ):
        yield {name: batch.column(i) for i, name in enumerate(batch.schema.names)}, lines


def line_chunks(stream: Any, *, sink: ErrorSink, block_bytes: int) -> Iterator[tuple[pa.Array, Lines]]:
    """Stream a text file as whole lines (binary), each with its 1-based line number."""
    for batch, lines in _parse_blocks(
        stream,
        names=["line"],
        delimiter="\x1f",
        quoting=False,
        sink=sink,
        first_line=1,
        block_bytes=block_bytes,
        bad_row=lambda row: "unexpected control byte 0x1f in a text line",
    ):
        yield batch.column(0), lines


def _optional_text(arr: pa.Array, name: str, lines: Lines, sink: ErrorSink) -> tuple[pa.Array, Mask]:
    text, bad = to_text(arr, name, lines, sink)
    return pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text), bad


_Converter = Callable[[pa.Array, str, Lines, ErrorSink], tuple[pa.Array, Mask]]

#: How each canonical field is converted from raw text (or a typed column) — one entry per field.
CONVERTERS: Final[dict[str, _Converter]] = {
    "request_id": partial(to_int, required=True),
    "ts": partial(to_float, required=True),
    "key": to_key,
    "value_size": to_int,
    "op": _optional_text,
    "client_id": _optional_text,
    "latency_us": partial(to_float, non_negative=True),
    "table": _optional_text,
}


def convert_canonical(raw: Mapping[str, pa.Array], lines: Lines, sink: ErrorSink) -> Chunk | None:
    """Raw columns named by canonical field → a canonical chunk; bad rows are reported and dropped."""
    n = len(lines)
    bad = np.zeros(n, dtype=np.bool_)
    out: dict[str, pa.Array] = {}
    for name, arr in raw.items():
        out[name], b = CONVERTERS[name](arr, name, lines, sink)
        bad |= b
    if "value_size" not in out:
        out["value_size"] = pa.nulls(n, pa.int64())
    return assemble(out, lines, bad, sink)
