"""Trace formats: one reader per format, each yielding canonical Arrow chunks (see docs/formats.md).

`READERS` is the one list of formats. `tailtune ingest --format` (its help and its check), the service's upload
`format` field, `--format auto` (which asks each reader's `sniff`, in `sniff_rank` order) and the errors that
name the formats all read it. A reader module imports Arrow, so the list names each reader by where it lives and
imports it on first use: listing the formats stays light (the CLI's help).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ingest.formats.base import TraceReader

__all__ = ["AUTO", "READERS", "format_choices", "format_names", "reader_class", "readers"]

#: `--format auto`: detect the format (`ingest.sniff`).
AUTO: Final = "auto"

#: Format name (as given to `--format`) → its reader, `module:Class` (a `TraceReader` whose `name` is the key),
#: in the order help and errors list the formats.
READERS: Final[dict[str, str]] = {
    "csv": "ingest.formats.delimited:CsvReader",
    "tsv": "ingest.formats.delimited:TsvReader",
    "jsonl": "ingest.formats.jsonl:JsonlReader",
    "parquet": "ingest.formats.parquet:ParquetReader",
    "requests": "ingest.formats.requests:RequestsReader",
    "twitter": "ingest.formats.twitter:TwitterReader",
    "meta-kv": "ingest.formats.meta_kv:MetaKvReader",
    "keys-bin": "ingest.formats.keys_bin:KeysBinReader",
    "tencent-photo": "ingest.formats.tencent_photo:TencentPhotoReader",
    "cassandra-fql": "ingest.formats.cassandra_fql.binlog:CassandraFqlReader",
    "cassandra-fql-dump": "ingest.formats.cassandra_fql.dump:CassandraFqlDumpReader",
    "memcached-watch": "ingest.formats.memcached_watch:MemcachedWatchReader",
    "tailtune-client": "ingest.formats.tailtune_client:TailtuneClientReader",
}


def format_names() -> tuple[str, ...]:
    """The formats, in the registry's order."""
    return tuple(READERS)


def format_choices() -> tuple[str, ...]:
    """What `--format` (and the service's `format` field) accepts: `auto` and every format."""
    return (AUTO, *READERS)


def reader_class(name: str) -> type[TraceReader]:
    """The reader of format `name` (KeyError for a name not in `READERS`)."""
    from ingest.formats.base import TraceReader

    module, _, attr = READERS[name].partition(":")
    reader = getattr(importlib.import_module(module), attr)
    if not (isinstance(reader, type) and issubclass(reader, TraceReader) and reader.name == name):
        raise TypeError(f"READERS[{name!r}] = {READERS[name]!r} is not a TraceReader named {name!r}")
    return reader


def readers() -> dict[str, type[TraceReader]]:
    """Every format's reader, in the registry's order."""
    return {name: reader_class(name) for name in READERS}
