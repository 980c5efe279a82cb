"""`jsonl`: the canonical long format as one JSON object per line (names mapped with `--map column=field`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from ingest.formats.base import Chunk, Lines, TraceReader, convert_canonical, require
from ingest.schema import CANONICAL_SCHEMA
from ingest.validate import ErrorSink

__all__ = ["JsonlReader", "jsonl_chunks"]

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


def jsonl_chunks(
    stream: Any, *, sink: ErrorSink, names: Mapping[str, str], rows: int = _ROWS_PER_CHUNK
) -> Iterator[tuple[dict[str, pa.Array], Lines]]:
    """JSON objects, one per line, as text columns named by `names` (source key → field); blank lines skipped.

    Values become text (lists as compact JSON) and are typed by the common converters, so messages match CSV.
    """
    cols: dict[str, list[str | None]] = {f: [] for f in dict.fromkeys(names.values())}
    lines: list[int] = []
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except UnicodeDecodeError as exc:
            sink.report_dropped(number, None, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})")
            continue
        except json.JSONDecodeError as exc:
            sink.report_dropped(number, None, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(obj, dict):
            sink.report_dropped(number, None, f"expected a JSON object, got {type(obj).__name__}")
            continue
        lines.append(number)
        for source_name, fld in names.items():
            cols[fld].append(_as_text(obj.get(source_name)))
        if len(lines) >= rows:
            yield (
                {f: pa.array(v, type=pa.string()) for f, v in cols.items()},
                np.asarray(lines, dtype=np.int64),
            )
            cols = {f: [] for f in cols}
            lines = []
    if lines:
        yield {f: pa.array(v, type=pa.string()) for f, v in cols.items()}, np.asarray(lines, dtype=np.int64)
    else:
        sink.flush(rows_dropped=0)


def first_object_keys(stream: Any, sink: ErrorSink) -> tuple[list[str], int]:
    """Keys of the first JSON object (and its line), used as the 'header' of a JSONL file."""
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return [], number
        return (list(obj) if isinstance(obj, dict) else []), number
    raise sink.fatal(1, None, "file is empty")


class JsonlReader(TraceReader):
    """Canonical rows as JSON objects. Required keys: ts, key; request_id absent → one key per request.

    The first object decides which optional columns the dataset has (value_size is always one).
    """

    name: ClassVar[str] = "jsonl"

    _fields: dict[str, str] | None = None

    def columns(self) -> list[str]:
        if self._fields is None:
            with self.source.open() as fh:
                keys, _ = first_object_keys(fh, self.sink)
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
        with self.source.open() as fh:
            for raw, lines in jsonl_chunks(fh, sink=self.sink, names=self._fields):
                chunk = convert_canonical(raw, lines, self.sink)
                if chunk is not None:
                    yield chunk
