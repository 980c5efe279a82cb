"""Trace formats: one reader per format, each yielding canonical Arrow chunks (see docs/formats.md)."""

from __future__ import annotations

from typing import Final

from ingest.formats.base import Chunk, ReaderOptions, TraceReader
from ingest.formats.delimited import CsvReader, TsvReader
from ingest.formats.jsonl import JsonlReader
from ingest.formats.keys_bin import KeysBinReader
from ingest.formats.meta_kv import MetaKvReader
from ingest.formats.parquet import ParquetReader
from ingest.formats.requests import RequestsReader
from ingest.formats.source import Source
from ingest.formats.tencent_photo import TencentPhotoReader
from ingest.formats.twitter import TwitterReader

__all__ = ["FORMATS", "Chunk", "ReaderOptions", "Source", "TraceReader"]

#: Format name (as given to `--format`) → reader class.
FORMATS: Final[dict[str, type[TraceReader]]] = {
    r.name: r
    for r in (
        CsvReader,
        TsvReader,
        JsonlReader,
        ParquetReader,
        RequestsReader,
        TwitterReader,
        MetaKvReader,
        KeysBinReader,
        TencentPhotoReader,
    )
}
