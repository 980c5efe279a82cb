"""Format and compression detection for `--format auto`; says what it chose and why.

Compression comes from magic bytes (gzip, zstd, xz, bz2), never only from the extension. The format comes from
the first decompressed 64 KiB: Parquet magic; binary content → keys-bin; a JSON object per line (with `keys` →
requests); a header naming Meta KV columns, `keys`, or canonical fields; else the header-less layouts of
Twitter (7+ comma fields, op in the 6th-from-the-end place) and Tencent photo (8 space-separated fields,
14-digit timestamp).
"""

from __future__ import annotations

import codecs
import csv
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ingest.formats.base import encoding_problem
from ingest.formats.meta_kv import meta_kv_layout
from ingest.formats.source import Source
from ingest.limits import Limits
from ingest.schema import CANONICAL_SCHEMA
from tailtune.base.errors import BadInputError

__all__ = ["Sniffed", "sniff", "sniff_source"]

_HEAD_BYTES: Final = 1 << 16
#: How far a first line longer than the head is read for detection when there is no line cap.
_UNCAPPED_FIRST_LINE: Final = 16 << 20
_TWITTER_OPS: Final = frozenset(
    ["get", "gets", "set", "add", "replace", "cas", "append", "prepend", "delete", "incr", "decr"]
)
_TENCENT_LINE: Final = re.compile(rb"^[0-9]{14} \S+ \S+ \S+ [0-9]+ [0-9]+ \S+ [0-9.]+\r?$")
_CANONICAL: Final = frozenset(f.name for f in CANONICAL_SCHEMA)


@dataclass(frozen=True)
class Sniffed:
    """What `--format auto` chose: the format, the compression and a one-line reason."""

    format: str
    compression: str
    reason: str


def _is_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    sample = head[:4096]
    printable = sum(1 for b in sample if b in (9, 10, 13) or 32 <= b < 127 or b >= 128)
    try:
        sample.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        if exc.start >= len(sample) - 4:  # cut in the middle of a character
            return False
    return printable / len(sample) < 0.9


def _lines(head: bytes, n: int = 20) -> list[bytes]:
    lines = head.split(b"\n")
    if len(head) >= _HEAD_BYTES:
        lines = lines[:-1]  # the last one may be cut
    return [ln.rstrip(b"\r") for ln in lines if ln.strip()][:n]


def sniff_source(source: Source, mapping: Mapping[str, str] | None = None) -> Sniffed:
    """Detect the format of an opened source; `mapping` (--map) renames header columns before matching."""
    head = source.head(_HEAD_BYTES)
    comp = source.compression
    label = source.label
    where = "" if comp == "none" else f"{comp}-compressed "
    if not head:
        raise BadInputError.single(label, "file is empty", line=1)
    if head.startswith(b"PAR1"):
        return Sniffed("parquet", comp, "Parquet magic bytes")
    _refuse_non_traces(head, label, where)
    if head.startswith(codecs.BOM_UTF8):
        head = head[len(codecs.BOM_UTF8) :]
    if _is_binary(head):
        return Sniffed("keys-bin", comp, f"{where}binary content: big-endian int64 keys")
    lines = _lines(head)
    if not lines and len(head) >= _HEAD_BYTES - len(codecs.BOM_UTF8) and head.strip():
        lines = _long_first_line(source, label)
    if not lines:
        if len(head) >= _HEAD_BYTES - len(codecs.BOM_UTF8):
            raise BadInputError.single(label, f"no data in the first {_HEAD_BYTES:,} bytes: only blank lines", line=1)
        raise BadInputError.single(label, "no data: only blank lines", line=1)
    first = lines[0].decode("utf-8", errors="replace")
    if first.lstrip().startswith("{"):
        try:
            obj = json.loads(lines[0])
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            if "keys" in obj:
                return Sniffed("requests", comp, f"{where}JSON lines with a 'keys' list: one row per request")
            return Sniffed("jsonl", comp, f"{where}JSON lines")
    delim = "\t" if "\t" in first else ","
    try:
        names = [n.strip() for n in next(csv.reader([first], delimiter=delim))]
    except csv.Error:  # a field longer than the csv module's limit (128 KiB): no header of ours
        names = first.split(delim)
    names = [(mapping or {}).get(n, n) for n in names]
    layout = meta_kv_layout(names)
    if layout is not None:
        return Sniffed("meta-kv", comp, f"{where}CSV header of the Meta KV {layout} layout")
    if "keys" in names:
        return Sniffed("requests", comp, f"{where}CSV header with a 'keys' column: one row per request")
    if {"ts", "key"} <= set(names) or len(set(names) & _CANONICAL) >= 3:
        fmt = "tsv" if delim == "\t" else "csv"
        return Sniffed(fmt, comp, f"{where}{fmt.upper()} header with canonical columns")
    if all(_TENCENT_LINE.match(ln) for ln in lines):
        return Sniffed("tencent-photo", comp, f"{where}8 space-separated fields with a YYYYMMDDHHMMSS timestamp")
    if all(_twitter_like(ln) for ln in lines):
        return Sniffed("twitter", comp, f"{where}header-less CSV: timestamp,key,key_size,value_size,client,op,ttl")
    raise BadInputError.single(
        label,
        "cannot detect the format from the first lines",
        line=1,
        hint="pass --format (csv, tsv, jsonl, parquet, requests, twitter, meta-kv, keys-bin, tencent-photo)",
    )


def _long_first_line(source: Source, label: str) -> list[bytes]:
    """The first line when it is longer than the sniffed head: read on up to the line cap (or fail with it)."""
    limits = source.limits
    cap = limits.max_line_bytes or _UNCAPPED_FIRST_LINE
    fh: Any
    with source.open() as fh:
        if fh.peek(3)[:3] == codecs.BOM_UTF8:
            fh.read(3)
        line = bytes(fh.readline(cap + 1))
    if len(line) > cap and not line.endswith(b"\n"):
        if limits.max_line_bytes:
            raise limits.exceeded(label, "max_line_bytes", f"line longer than {cap:,} bytes", line=1)
        raise BadInputError.single(
            label,
            f"cannot detect the format: the first line is longer than {cap:,} bytes",
            line=1,
            hint="pass --format",
        )
    line = line.rstrip(b"\r\n")
    return [line] if line.strip() else []


#: Magic bytes of files that are no trace (archives, documents, images, executables) → what to say about them.
_NOT_TRACES: Final = (
    (b"PK\x03\x04", "a ZIP archive: unpack it and ingest the trace file inside"),
    (b"PK\x05\x06", "an empty ZIP archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive: unpack it and ingest the trace file inside"),
    (b"Rar!\x1a\x07", "a RAR archive: unpack it and ingest the trace file inside"),
    (b"\x04\x22\x4d\x18", "LZ4-compressed (not supported: gzip, zstd, xz, bz2 are)"),
    (b"\x89\x4c\x5a\x4f", "LZO-compressed (not supported: gzip, zstd, xz, bz2 are)"),
    (b"\xff\x06\x00\x00sNaPpY", "Snappy-compressed (not supported: gzip, zstd, xz, bz2 are)"),
    (b"%PDF-", "a PDF document"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x7fELF", "an ELF executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"ORC", "an ORC file (not supported: Parquet is)"),
    (b"Obj\x01", "an Avro file (not supported: Parquet is)"),
    (b"ARROW1", "an Arrow IPC file (not supported: Parquet is)"),
)


def _refuse_non_traces(head: bytes, label: str, where: str) -> None:
    """Files that are clearly not a trace (or text in an unsupported encoding) fail here with what they are."""
    for magic, what in _NOT_TRACES:
        if head.startswith(magic):
            raise BadInputError.single(label, f"this is {where}{what}, not a trace", hint="see docs/formats.md")
    if len(head) >= 512 and head[257:262] == b"ustar":
        raise BadInputError.single(label, f"this is {where}a tar archive: unpack it and ingest the trace file inside")
    problem = encoding_problem(head)
    if problem is not None:
        raise BadInputError.single(label, problem, line=1)


def _twitter_like(line: bytes) -> bool:
    parts = line.split(b",")
    if len(parts) < 7:
        return False
    ts, key_size, value_size, op, ttl = parts[0], parts[-5], parts[-4], parts[-2], parts[-1]
    return (
        ts.isdigit()
        and key_size.isdigit()
        and value_size.isdigit()
        and ttl.isdigit()
        and op.decode("ascii", errors="replace") in _TWITTER_OPS
    )


def sniff(path: Path, mapping: Mapping[str, str] | None = None, limits: Limits | None = None) -> Sniffed:
    """Detect the format and compression of a trace file (raises BadInputError when unsure)."""
    return sniff_source(Source.of(path, limits), mapping)
