"""`jsonl`: the canonical long format as one JSON object per line (names mapped with `--map column=field`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from ingest.formats.base import (
    BLOCK_BYTES,
    Chunk,
    Lines,
    TraceReader,
    check_columns,
    convert_canonical,
    open_text,
    require,
    text_lines,
)
from ingest.formats.head import Head
from ingest.limits import Limits
from ingest.schema import CANONICAL_SCHEMA
from ingest.validate import ErrorSink

__all__ = ["JsonlReader", "first_object_keys", "jsonl_chunks", "parse_json_line"]

REQUIRED: tuple[str, ...] = ("ts", "key")
_ROWS_PER_CHUNK = 65_536


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return repr(value) if isinstance(value, float) else str(value)


def parse_json_line(raw: bytes) -> tuple[Any, str | None]:
    """A JSON value from one line, or (None, problem): never an exception, whatever the bytes.

    Besides syntax errors: invalid UTF-8, nesting too deep for the parser (RecursionError) and integers too long to
    convert (ValueError) are problems of that line.
    """
    try:
        return json.loads(raw), None
    except UnicodeDecodeError as exc:
        return None, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} at column {exc.colno}"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        return None, f"invalid JSON: {str(exc)[:100]}"


def jsonl_chunks(
    stream: Any,
    *,
    sink: ErrorSink,
    names: Mapping[str, str],
    limits: Limits | None = None,
    rows: int = _ROWS_PER_CHUNK,
    block_bytes: int = BLOCK_BYTES,
) -> Iterator[tuple[dict[str, pa.Array], Lines]]:
    """JSON objects, one per line, as text columns named by `names` (source key → field); blank lines skipped.

    Values become text (lists as compact JSON) and are typed by the common converters, so messages match CSV.
    A chunk holds at most `rows` rows and about `block_bytes` bytes of source lines (lines within the line cap).
    """
    cols: dict[str, list[str | None]] = {f: [] for f in dict.fromkeys(names.values())}
    lines: list[int] = []
    held = 0
    for number, raw in text_lines(stream, limits=limits or Limits(), sink=sink):
        if not raw.strip():
            continue
        obj, problem = parse_json_line(raw)
        if problem is None and not isinstance(obj, dict):
            problem = f"expected a JSON object, got {type(obj).__name__}"
        if problem is None:
            try:
                values = [(fld, _as_text(obj.get(source_name))) for source_name, fld in names.items()]
            except (RecursionError, ValueError):
                problem = "a value is nested too deeply or too long to convert"
        if problem is not None:
            sink.report_dropped(number, None, problem)
            continue
        lines.append(number)
        for fld, value in values:
            cols[fld].append(value)
        held += len(raw)
        if len(lines) >= rows or held >= block_bytes:
            yield (
                {f: pa.array(v, type=pa.string()) for f, v in cols.items()},
                np.asarray(lines, dtype=np.int64),
            )
            cols = {f: [] for f in cols}
            lines = []
            held = 0
    if lines:
        yield {f: pa.array(v, type=pa.string()) for f, v in cols.items()}, np.asarray(lines, dtype=np.int64)
    else:
        sink.flush(rows_dropped=0)


def first_object_keys(stream: Any, sink: ErrorSink, limits: Limits | None = None) -> tuple[list[str], int]:
    """Keys of the first JSON object (and its line), used as the 'header' of a JSONL file (column cap applies)."""
    limits = limits or Limits()
    for number, raw in text_lines(stream, limits=limits, sink=sink):
        if not raw.strip():
            continue
        obj, problem = parse_json_line(raw)
        if problem is not None:
            raise sink.fatal(number, None, f"{problem} (the first object names the columns)")
        keys = list(obj) if isinstance(obj, dict) else []
        check_columns(len(keys), limits, sink, number, what="the first object")
        return keys, number
    raise sink.fatal(1, None, "file is empty")


class JsonlReader(TraceReader):
    """Canonical rows as JSON objects. Required keys: ts, key; request_id absent → one key per request.

    The first object decides which optional columns the dataset has (value_size is always one).
    """

    name: ClassVar[str] = "jsonl"
    sniff_rank: ClassVar[int | None] = 30

    @classmethod
    def sniff(cls, head: Head) -> str | None:
        obj = head.first_object
        return f"{head.where}JSON lines" if obj is not None and "keys" not in obj else None

    _fields: dict[str, str] | None = None

    def columns(self) -> list[str]:
        if self._fields is None:
            with open_text(self.source, self.sink) as fh:
                keys, _ = first_object_keys(fh, self.sink, self.options.limits)
            known = {f.name for f in CANONICAL_SCHEMA}
            mapping = self.options.mapping
            fields = {k: mapping.get(k, k) for k in keys}
            for source_name, fld in mapping.items():
                if fld not in known:
                    raise self.fatal(None, fld, f"--map {source_name}={fld}: unknown field")
                fields.setdefault(source_name, fld)
            self._fields = {k: f for k, f in fields.items() if f in known}
            if "value_size" not in self._fields.values():
                self._fields["value_size"] = "value_size"  # always a column; null where a line lacks it
            require(set(self._fields.values()), REQUIRED, keys, self.sink)
        return list(dict.fromkeys(self._fields.values()))

    def chunks(self) -> Iterator[Chunk]:
        self.columns()
        assert self._fields is not None
        with open_text(self.source, self.sink) as fh:
            for raw, lines in jsonl_chunks(
                fh, sink=self.sink, names=self._fields, limits=self.options.limits, block_bytes=self.options.block_bytes
            ):
                chunk = convert_canonical(raw, lines, self.sink)
                if chunk is not None:
                    yield chunk
