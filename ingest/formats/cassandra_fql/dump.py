"""`cassandra-fql-dump`: the text `fqltool dump DIR` prints for a full query log (docs/formats.md).

The layout is the one of Cassandra's `Dump.java` (tools/fqltool, Cassandra 4.1 and 5.0): per record

    Type: single-query                       (or: batch)
    Query start time: 1700000000123          (milliseconds since the epoch)
    Protocol version: 5
    Generated timestamp:-9223372036854775808
    Generated nowInSeconds:1700000000
    Query: SELECT * FROM ks.t WHERE k = ?    (the text may run over several lines)
    Values:
    00000000 61 62 63                                         abc
    -----
    (a blank line)

A batch has `Batch type: LOGGED` after the generated fields, then `Query:` / `Values:` per statement. Each value is
a hex dump (16 bytes a row: an 8-digit offset, the bytes, their ASCII; a row equal to the one before it is left
out and a `........` line stands for the rows left out; a value longer than 1,024 bytes is cut there and
followed by `... truncated`), or `null`, and is closed by `-----` (an empty value is the `-----` alone). Log lines
the tool printed between records (`WARN  [main] ...`) are skipped. The dump does not show the session's
keyspace: statements on unqualified tables need the binary log (`cassandra-fql`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import ClassVar, Final

from ingest.formats.base import open_text, text_lines
from ingest.formats.cassandra_fql.records import TRUNCATED, QueryLogReader, Record, Statement, Value
from ingest.formats.head import Head

__all__ = ["CassandraFqlDumpReader"]

_LOG_LINE: Final = re.compile(r"^\s*(?:\S+\s+){0,3}(TRACE|DEBUG|INFO|WARN|WARNING|ERROR)\b")
_ROW: Final = re.compile(r"^([0-9a-f]{8})((?: (?:[0-9A-F]{2}|  )){8} (?: (?:[0-9A-F]{2}|  )){8}) ")
_TYPES: Final = ("single-query", "batch")
_HEADER: Final = (
    ("Query start time: ", "start_ms"),
    ("Protocol version: ", None),
    ("Generated timestamp:", None),
    ("Generated nowInSeconds:", None),
)


def _is_type(line: str) -> bool:
    return line.startswith("Type: ")


class _Lines:
    """The dump's lines (1-based numbers, line breaks dropped) with one line of look-ahead."""

    def __init__(self, it: Iterator[tuple[int, bytes]], reader: CassandraFqlDumpReader) -> None:
        self._it = it
        self._reader = reader
        self._peeked: tuple[int, str] | None = None
        self.last = 0

    def peek(self) -> tuple[int, str] | None:
        if self._peeked is None:
            try:
                number, raw = next(self._it)
            except StopIteration:
                return None
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self._reader.fatal(
                    number, None, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
                ) from None
            self._peeked = (number, text.rstrip("\r\n"))
        return self._peeked

    def next(self) -> tuple[int, str] | None:
        item = self.peek()
        self._peeked = None
        if item is not None:
            self.last = item[0]
        return item


class CassandraFqlDumpReader(QueryLogReader):
    """The text of `fqltool dump` (see the module doc)."""

    name: ClassVar[str] = "cassandra-fql-dump"
    sniff_rank: ClassVar[int | None] = 35

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        if head.binary:
            return None
        lines = [ln.decode("utf-8", errors="replace") for ln in head.lines]
        lines = [ln for ln in lines if not _LOG_LINE.match(ln)]
        if (
            len(lines) >= 2
            and lines[0] in ("Type: single-query", "Type: batch")
            and lines[1].startswith("Query start time: ")
        ):
            return "'Type: ...' and 'Query start time: ...' lines of fqltool dump"
        return None

    def records_of(self) -> Iterator[Record]:
        with open_text(self.source, self.sink) as fh:
            lines = _Lines(text_lines(fh, limits=self.options.limits, sink=self.sink), self)
            while True:
                item = lines.next()
                if item is None:
                    return
                number, text = item
                if not text.strip() or (not _is_type(text) and _LOG_LINE.match(text)):
                    continue
                if not _is_type(text):
                    raise self.fatal(number, None, f"expected a record's 'Type: ...' line, got {_shown(text)}")
                yield self._record(number, text[len("Type: ") :], lines)

    def _record(self, line: int, kind: str, lines: _Lines) -> Record:
        if kind not in _TYPES:
            raise self.fatal(line, "Type", f"expected single-query or batch, got {_shown(kind)}")
        start_ms = 0
        for label, key in _HEADER:
            number, text = self._expect(lines, label)
            if key is not None:
                value = text[len(label) :].strip()
                if not re.fullmatch(r"-?\d{1,19}", value):
                    raise self.fatal(number, label.rstrip(": "), f"expected an integer, got {_shown(value)}")
                start_ms = int(value)
        statements: list[Statement] = []
        if kind == "batch":
            self._expect(lines, "Batch type: ")
        while True:
            number, text = self._expect(lines, "Query: ")
            statements.append(self._statement(number, text[len("Query: ") :], lines))
            nxt = lines.peek()
            if kind == "batch" and nxt is not None and nxt[1].startswith("Query: "):
                continue
            break
        nxt = lines.next()
        if nxt is None:
            raise self.fatal(lines.last, None, "the dump ends inside a record (no blank line after it)")
        if nxt[1].strip():
            raise self.fatal(nxt[0], None, f"expected the blank line that ends the record, got {_shown(nxt[1])}")
        return Record(line, kind, start_ms, None, statements)

    def _expect(self, lines: _Lines, label: str) -> tuple[int, str]:
        item = lines.next()
        if item is None:
            raise self.fatal(lines.last, label.rstrip(": "), "the dump ends inside a record")
        if not item[1].startswith(label):
            raise self.fatal(item[0], label.rstrip(": "), f"expected '{label.strip()} ...', got {_shown(item[1])}")
        return item

    def _statement(self, line: int, first: str, lines: _Lines) -> Statement:
        text = [first]
        while True:
            item = lines.next()
            if item is None:
                raise self.fatal(lines.last, "Values", "the dump ends inside a query's text (no 'Values:' line)")
            if item[1].rstrip() == "Values:":
                break
            text.append(item[1])
        values: list[Value] = []
        value_lines: list[int] = []
        while True:
            item = lines.peek()
            if item is None or not item[1].strip() or item[1].startswith("Query: "):
                break
            number, value = self._value(lines)
            values.append(value)
            value_lines.append(number)
        return Statement("\n".join(text), values, line, value_lines)

    def _value(self, lines: _Lines) -> tuple[int, Value]:
        """One value up to its `-----` line: (its first line, the value)."""
        item = lines.next()
        assert item is not None
        first, text = item
        if text == "null":
            self._close(lines, first)
            return first, None
        data = bytearray()
        previous: bytes | None = None
        elided = False
        truncated = False
        number = first
        while True:
            if text == "-----":
                break
            if text == "........":
                if previous is None or elided:
                    raise self.fatal(number, "Values", "a '........' line that follows no hex row")
                elided = True
            elif text == "... truncated":
                truncated = True
                self._close(lines, first)
                break
            else:
                m = _ROW.match(text + " ")
                if m is None:
                    raise self.fatal(number, "Values", f"expected a hex dump row or '-----', got {_shown(text)}")
                offset = int(m.group(1), 16)
                row = bytes.fromhex("".join(m.group(2).split()))
                if offset % 16 or offset < len(data) or (offset > len(data) and not elided):
                    raise self.fatal(
                        number, "Values", f"hex dump row at offset {offset:#x} where offset {len(data):#x} is next"
                    )
                if offset > len(data):
                    assert previous is not None
                    if len(previous) != 16:
                        raise self.fatal(number, "Values", "rows left out after a short row")
                    data += previous * ((offset - len(data)) // 16)
                if not row:
                    raise self.fatal(number, "Values", "a hex dump row with no bytes")
                data += row
                previous, elided = row, False
            item = lines.next()
            if item is None:
                raise self.fatal(number, "Values", "the dump ends inside a value (no '-----' line)")
            number, text = item
        if elided:
            raise self.fatal(number, "Values", "a '........' line is not followed by the value's last row")
        return first, TRUNCATED if truncated else bytes(data)

    def _close(self, lines: _Lines, first: int) -> None:
        item = lines.next()
        if item is None or item[1] != "-----":
            at = item[0] if item is not None else lines.last
            got = _shown(item[1]) if item is not None else "the end of the dump"
            raise self.fatal(at, "Values", f"expected '-----' after the value of line {first}, got {got}")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")
