"""The reader base class and the text-chunking helpers that every text format shares.

A reader turns one `Source` into `Chunk`s: canonical Arrow record batches (without `request_id` for
single-key formats: ids are assigned downstream) plus the 1-based source line of every row, so that
every later problem can still name its line.
"""

from __future__ import annotations

import codecs
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from base.errors import BadInputError
from ingest.formats.head import Head, encoding_problem
from ingest.formats.source import Source
from ingest.limits import Limits
from ingest.schema import CANONICAL_SCHEMA
from ingest.validate import ErrorSink, Mask, to_float, to_int, to_key, to_text

__all__ = [
    "BLOCK_BYTES",
    "CONVERTERS",
    "Chunk",
    "ReaderOptions",
    "TraceReader",
    "assemble",
    "check_columns",
    "convert_canonical",
    "csv_chunks",
    "encoding_problem",
    "line_chunks",
    "line_too_long",
    "map_header",
    "open_text",
    "read_header",
    "read_line",
    "require",
    "text_lines",
    "too_many_rows",
]

#: Bytes of decompressed text parsed per chunk (one chunk ≈ one Parquet row-group slice).
BLOCK_BYTES = 16 << 20

Lines = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ReaderOptions:
    """Options a reader may use. `rate` synthesizes ts (row index / rate) for formats that have no time;
    `watch_gap_us` is the memcached-watch grouping's gap (None: its default)."""

    mapping: Mapping[str, str] = field(default_factory=dict)
    rate: float = 1000.0
    watch_gap_us: int | None = None
    block_bytes: int = BLOCK_BYTES
    limits: Limits = field(default_factory=Limits)
    #: Query logs (`query_log` readers): the schema file (`--schema`), the tables kept (`--table`), and the
    #: folder of the Cassandra jars the binary log is read with (`TAILTUNE_CASSANDRA_LIB`).
    schema: Path | None = None
    tables: tuple[str, ...] = ()
    cassandra_lib: Path | None = None


@dataclass
class Chunk:
    """Canonical rows of one chunk and the source line (or row number) of each."""

    batch: pa.RecordBatch
    lines: Lines


class TraceReader(ABC):
    """One input format. Subclasses set `name` (their key in `ingest.formats.READERS`) and implement `columns`
    and `chunks`; a format `--format auto` can recognise sets `sniff_rank` and implements `sniff`."""

    name: ClassVar[str]
    #: True when ts is synthesized from the row index and `rate` (so `rate` changes the result).
    synthesizes_ts: ClassVar[bool] = False
    #: Where `--format auto` tries this format: lower ranks first, the first whose `sniff` answers wins (None:
    #: never detected, only given). The order, with each format's test: docs/formats.md § Formats.
    sniff_rank: ClassVar[int | None] = None
    #: A query log (`cassandra-fql` formats): it takes `--schema` and `--table`; its chunks carry `request_id` for
    #: the requests it reads whole and null for single accesses the pipeline groups (`--group-window-us`, on by
    #: default; `ingest.grouping.StatementGrouper`, by the extra `_group` column); its rows are always sorted.
    query_log: ClassVar[bool] = False
    #: Its input is a directory (detected by `sniff_directory`), not a file.
    reads_directory: ClassVar[bool] = False
    #: False when the rows come out of time order whatever the file: the pipeline sorts them (as `--unsorted sort`).
    ordered: ClassVar[bool] = True

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        """Why `head` is this format (the one-line reason `--format auto` prints), or None when it is not."""
        return None

    @classmethod
    def sniff_directory(cls, path: Path) -> str | None:
        """Why the directory `path` is this format, or None (readers of directories only)."""
        return None

    @classmethod
    def hash_directory(cls, path: Path) -> tuple[str, int]:
        """(sha256, bytes) of the input directory `path`, for the dataset id (readers of directories only)."""
        raise NotImplementedError(f"the {cls.name} format reads no directory")

    def __init__(self, source: Source, options: ReaderOptions, sink: ErrorSink) -> None:
        self.source = source
        self.options = options
        self.sink = sink
        self.layout: str | None = None  # a variant detected inside the format (e.g. Meta KV 202401)
        self.notes: list[str] = []
        #: What the user must know about the dataset (a log ingested only up to where its writer was): the manifest's
        #: `warnings`, printed by `tailtune ingest`.
        self.warnings: list[str] = []

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

    def id_options(self) -> dict[str, Any]:
        """The reader's own options that change the result (they enter `ingest_options` and the dataset id)."""
        return {}

    def fatal(
        self, line: int | None, field: str | None, problem: str, *, hint: str | None = None, file: str | None = None
    ) -> Exception:
        return self.sink.fatal(line, field, problem, hint=hint, file=file)


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
            shown = ", ".join(n if len(n) <= 40 else n[:37] + "..." for n in names[:20]) if names else "(empty)"
            if len(names) > 20:
                shown += f", ... ({len(names):,} in all)"
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


def open_text(source: Source, sink: ErrorSink) -> Any:
    """The decompressed stream of a text format: a UTF-8 byte-order mark skipped, UTF-16/32 text refused."""
    fh: Any = source.open()
    try:
        problem = encoding_problem(bytes(fh.peek(4096)[:4096]))
        if problem is not None:
            raise sink.fatal(1, None, problem)
        if bytes(fh.peek(3)[:3]) == codecs.BOM_UTF8:
            fh.read(len(codecs.BOM_UTF8))
    except BaseException:
        fh.close()
        raise
    return fh


def line_too_long(sink: ErrorSink, limits: Limits, line: int) -> BadInputError:
    return limits.exceeded(
        sink.file_label, "max_line_bytes", f"line longer than {limits.max_line_bytes:,} bytes", line=line
    )


def read_line(stream: Any, *, limits: Limits, sink: ErrorSink, line: int) -> bytes:
    """One line (with its line break), never more than the line cap: a longer one is BadInputError."""
    cap = limits.max_line_bytes
    if not cap:
        return bytes(stream.readline())
    raw = bytes(stream.readline(cap + 1))
    if len(raw) > cap and not raw.endswith(b"\n"):
        raise line_too_long(sink, limits, line)
    return raw


def text_lines(stream: Any, *, limits: Limits, sink: ErrorSink) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw line) for every line of a text stream, each within the line cap."""
    number = 0
    while True:
        number += 1
        raw = read_line(stream, limits=limits, sink=sink, line=number)
        if not raw:
            return
        yield number, raw


def too_many_rows(sink: ErrorSink, limits: Limits, line: int | None) -> BadInputError:
    """The row cap was passed at `line` (the line of the first row beyond it)."""
    return limits.exceeded(sink.file_label, "max_rows", f"more than {limits.max_rows:,} rows", line=line)


def check_columns(n: int, limits: Limits, sink: ErrorSink, line: int | None, what: str = "the header") -> None:
    """The column cap: `what` (at `line`) has `n` columns."""
    if limits.max_columns and n > limits.max_columns:
        raise limits.exceeded(sink.file_label, "max_columns", f"{what} has {n:,} columns", line=line)


def read_header(
    stream: Any, *, delimiter: str, sink: ErrorSink, limits: Limits, skip_rows: int = 0
) -> tuple[list[str], bytes]:
    """Read (and consume) the header line; returns its column names and the raw line (caps: line, columns)."""
    import csv

    for i in range(skip_rows):
        read_line(stream, limits=limits, sink=sink, line=i + 1)
    raw = read_line(stream, limits=limits, sink=sink, line=skip_rows + 1)
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    check_columns(_fields(text, delimiter, True)[0] if text else 0, limits, sink, skip_rows + 1)
    try:
        names = next(csv.reader([text], delimiter=delimiter)) if text else []
    except csv.Error as exc:  # e.g. a name longer than the csv module's field limit (128 KiB)
        raise sink.fatal(skip_rows + 1, None, f"cannot read the header: {exc}") from None
    return [n.strip() for n in names], raw


def _first_long_line(data: bytes, cap: int) -> int | None:
    """Offset of the start of the first line longer than `cap` bytes in `data` (which starts at a line start).

    Steps from line break to line break at most `cap + 1` bytes apart (one `rfind` per window), so a block is
    checked in about len/cap steps; the unfinished last line counts only once it is already too long.
    """
    p, n = 0, len(data)
    while n - p > cap:
        q = data.rfind(b"\n", p, p + cap + 1)
        if q < 0:
            return p
        p = q + 1
    return None


def _line_blocks(
    stream: Any, block_bytes: int, *, cap: int = 0, too_long: Callable[[int], Exception] | None = None
) -> Iterator[tuple[bytes, int]]:
    """The stream in blocks of about `block_bytes` that end at a line break (the last one may not), each with its
    number of line breaks. With `cap`, a line longer than `cap` bytes raises `too_long(index of the line)` as
    soon as it is seen: memory stays one block plus one line however long the line is.
    """
    carry = b""
    lines = 0
    while True:
        data = stream.read(block_bytes)
        if not data:
            if carry:
                yield carry, 0
            return
        data = carry + bytes(data)
        if cap:
            long_at = _first_long_line(data, cap)
            if long_at is not None:
                assert too_long is not None
                raise too_long(lines + data.count(b"\n", 0, long_at))
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        block = data[: cut + 1]
        n = block.count(b"\n")
        lines += n
        yield block, n
        carry = data[cut + 1 :]


def _fields(text: str, delimiter: str, quoting: bool) -> tuple[int, bool]:
    """(number of fields, whether a quoted value is left open) of one line, split the way Arrow splits it.

    A quote opens a quoted value only at the start of a field; `""` inside one is a quote; after the closing
    quote the field runs on to the next delimiter. Jumps with `str.find`, so long fields cost little.
    """
    if not quoting or '"' not in text:
        return text.count(delimiter) + 1, False
    n, i, size = 1, 0, len(text)
    while i < size:
        start = i
        if text[i] == '"':
            j = i + 1
            while True:
                q = text.find('"', j)
                if q < 0:
                    return n, True
                if q + 1 < size and text[q + 1] == '"':
                    j = q + 2
                    continue
                break
            start = q + 1
        k = text.find(delimiter, start)
        if k < 0:
            return n, False
        n += 1
        i = k + 1
    return n, False


def _careful(
    block: bytes, *, n_lines: int, columns: int, delimiter: str, quoting: bool
) -> tuple[bytes, dict[int, str]]:
    """The slow, line-by-line look at a block Arrow cannot split into one row per line (or report on).

    Finds the lines that break the one-row-per-line rule or Arrow's bad-row reporting — an unterminated quoted
    value (Arrow would run it on into the next lines), a carriage return inside a line (Arrow splits rows there),
    a row of the wrong column count in invalid UTF-8 (Arrow cannot hand such a row to the bad-row handler) — and
    replaces each with a row that is rejected cleanly (one delimiter more than the header has columns). Lines in
    invalid UTF-8 with the right column count stay: their fields are reported one by one later. Returns the new
    block and {0-based line index: problem}.
    """
    lines = block.split(b"\n")
    problems: dict[int, str] = {}
    filler = delimiter.encode() * columns
    for i in range(n_lines):
        ln = lines[i]
        body = ln[:-1] if ln.endswith(b"\r") else ln
        problem = None
        if b"\r" in body:
            problem = "carriage return (\\r) inside the line; line breaks must be \\n or \\r\\n"
        else:
            try:
                text, utf8 = body.decode("utf-8"), True
            except UnicodeDecodeError:
                text, utf8 = body.decode("utf-8", errors="surrogateescape"), False
            count, open_quote = _fields(text, delimiter, quoting)
            if open_quote:
                problem = "unterminated quoted value (a quoted value cannot span lines)"
            elif not utf8 and count != columns:
                problem = f"expected {columns} columns, got {count}"
        if problem is not None:
            problems[i] = problem
            lines[i] = filler
    return b"\n".join(lines), problems


def _valid_utf8(block: bytes) -> bool:
    if block.isascii():
        return True
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _parse_block(
    block: bytes,
    *,
    base: int,
    n_lines: int,
    names: list[str],
    delimiter: str,
    quoting: bool,
    bad_row: Callable[[Any], str],
    sink: ErrorSink,
    cap: int,
) -> tuple[pa.Table, list[int]]:
    """One line-aligned block → a table with exactly one row per line, less the bad lines (reported, returned).

    Parsed with threads; a block with invalid rows is parsed again single-threaded, which is when Arrow reports
    their row numbers. If Arrow fails on the block or its rows do not match its lines one to one, `_careful`
    finds and replaces the offending lines and the block is parsed once more (single-threaded, one Arrow block).
    """
    convert = pacsv.ConvertOptions(
        column_types={n: pa.binary() for n in names},
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    pre: dict[int, str] = {}
    failure = ""
    # Arrow cannot hand a bad row in invalid UTF-8 to the handler (it fails the whole read): such blocks go
    # straight to the careful pass
    for careful in (False, True) if _valid_utf8(block) else (True,):
        if careful:
            block, pre = _careful(block, n_lines=n_lines, columns=len(names), delimiter=delimiter, quoting=quoting)
        skipped: list[int] = []
        reported: list[tuple[int, str]] = []
        unnumbered: list[bool] = []

        def handler(
            row: Any,
            skipped: list[int] = skipped,
            reported: list[tuple[int, str]] = reported,
            unnumbered: list[bool] = unnumbered,
            pre: dict[int, str] = pre,
        ) -> str:
            if row.number is None:
                unnumbered.append(True)
                return "skip"
            line = base + int(row.number) - 1
            skipped.append(line)
            if line - base not in pre:
                reported.append((line, bad_row(row)))
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
        for threads in (False,) if careful else (True, False):
            skipped.clear()
            reported.clear()
            unnumbered.clear()
            whole = len(block) + 1
            read = pacsv.ReadOptions(
                use_threads=threads,
                block_size=max(1 << 20, len(block) // 2 + 1, cap + 2 if cap else 0) if threads else whole,
                column_names=names,
                autogenerate_column_names=False,
            )
            try:
                table = pacsv.read_csv(
                    pa.BufferReader(block), read_options=read, parse_options=parse, convert_options=convert
                )
            except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
                table, failure = None, str(exc).splitlines()[0][:200]
                break
            if not unnumbered:
                break
        if table is not None and not unnumbered and table.num_rows + len(skipped) == n_lines:
            for i, problem in sorted(pre.items()):
                sink.report_dropped(base + i, None, problem)
            for bad_line, problem in reported:
                sink.report_dropped(bad_line, None, problem)
            return table, sorted(skipped)
        if table is not None:
            failure = f"{table.num_rows + len(skipped)} rows for {n_lines} lines"
    raise sink.fatal(
        base, None, f"cannot split lines {base:,}..{base + n_lines - 1:,} into one row per line ({failure})"
    )


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
    limits: Limits,
) -> Iterator[tuple[pa.RecordBatch, Lines]]:
    """Parse line-aligned blocks one at a time (memory: one block), every column as bytes, one row per line.

    A line longer than the line cap fails the ingest as soon as it is seen.
    """
    cap = limits.max_line_bytes
    line = first_line
    for block, newlines in _line_blocks(
        stream, block_bytes, cap=cap, too_long=lambda index: line_too_long(sink, limits, first_line + index)
    ):
        n_lines = newlines + (0 if block.endswith(b"\n") else 1)
        base = line
        table, skipped = _parse_block(
            block,
            base=base,
            n_lines=n_lines,
            names=names,
            delimiter=delimiter,
            quoting=quoting,
            bad_row=bad_row,
            sink=sink,
            cap=cap,
        )
        n = table.num_rows
        data_lines = np.arange(base, base + n_lines, dtype=np.int64)
        if skipped:
            data_lines = np.setdiff1d(data_lines, np.asarray(skipped, dtype=np.int64), assume_unique=True)
        line += n_lines
        if n:
            yield table.combine_chunks().to_batches()[0], data_lines


def csv_chunks(
    stream: Any,
    *,
    names: list[str],
    delimiter: str,
    sink: ErrorSink,
    first_line: int,
    block_bytes: int,
    quoting: bool = True,
    limits: Limits | None = None,
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
        limits=limits or Limits(),
    ):
        yield {name: batch.column(i) for i, name in enumerate(batch.schema.names)}, lines


def line_chunks(
    stream: Any, *, sink: ErrorSink, block_bytes: int, limits: Limits | None = None
) -> Iterator[tuple[pa.Array, Lines]]:
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
        limits=limits or Limits(),
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
    "node": _optional_text,
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
