"""`csv` and `tsv`: the canonical long format with a header row (columns renamed with `--map column=field`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Final

from ingest.formats.base import (
    Chunk,
    TraceReader,
    convert_canonical,
    csv_chunks,
    map_header,
    open_text,
    read_header,
    require,
)
from ingest.formats.head import Head
from ingest.schema import CANONICAL_SCHEMA

__all__ = ["CsvReader", "TsvReader"]

REQUIRED: tuple[str, ...] = ("ts", "key")
_CANONICAL: Final = frozenset(f.name for f in CANONICAL_SCHEMA)


class CsvReader(TraceReader):
    """Comma-separated canonical rows. Required columns: ts, key; request_id absent → one key per request."""

    name: ClassVar[str] = "csv"
    delimiter: ClassVar[str] = ","
    sniff_rank: ClassVar[int | None] = 60

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        names = set(head.header)
        if head.delimiter != cls.delimiter or not ({"ts", "key"} <= names or len(names & _CANONICAL) >= 3):
            return None
        return f"{head.where}{cls.name.upper()} header with canonical columns"

    _stream: Any = None
    _names: list[str]
    _fields: dict[str, str]

    def columns(self) -> list[str]:
        if self._stream is None:
            stream = open_text(self.source, self.sink)
            try:
                names, raw = read_header(stream, delimiter=self.delimiter, sink=self.sink, limits=self.options.limits)
                if not raw:
                    raise self.fatal(1, None, "file is empty")
                fields = map_header(names, self.options.mapping, self.sink)
                require(set(fields.values()), REQUIRED, names, self.sink)
            except BaseException:
                stream.close()
                raise
            self._stream, self._names, self._fields = stream, names, fields
            ignored = [n for n in names if n not in fields]
            if ignored:
                self.notes.append(f"ignored columns: {', '.join(ignored)}")
        return list(self._fields.values())

    def chunks(self) -> Iterator[Chunk]:
        self.columns()
        try:
            for raw, lines in csv_chunks(
                self._stream,
                names=self._names,
                delimiter=self.delimiter,
                sink=self.sink,
                first_line=2,
                block_bytes=self.options.block_bytes,
                limits=self.options.limits,
            ):
                chunk = convert_canonical({f: raw[c] for c, f in self._fields.items()}, lines, self.sink)
                if chunk is not None:
                    yield chunk
        finally:
            self._stream.close()


class TsvReader(CsvReader):
    """Tab-separated canonical rows (same columns as `csv`)."""

    name: ClassVar[str] = "tsv"
    delimiter: ClassVar[str] = "\t"
