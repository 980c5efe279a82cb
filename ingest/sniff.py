"""Format and compression detection for `--format auto`; says what it chose and why.

Compression comes from magic bytes (gzip, zstd, xz, bz2), never only from the extension. The format comes from
the first decompressed 64 KiB: Parquet magic; binary content → keys-bin; a JSON object per line (with `keys` →
requests); a header naming Meta KV columns, `keys`, or canonical fields; else the header-less layouts of
Twitter (7+ comma fields, op in the 6th-from-the-end place) and Tencent photo (8 space-separated fields,
14-digit timestamp).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ingest.formats.meta_kv import meta_kv_layout
from ingest.formats.source import Source
from ingest.schema import CANONICAL_SCHEMA
from tailtune.base.errors import BadInputError

__all__ = ["Sniffed", "sniff", "sniff_source"]

_HEAD_BYTES: Final = 1 << 16
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
    if _is_binary(head):
        return Sniffed("keys-bin", comp, f"{where}binary content: big-endian int64 keys")
    lines = _lines(head)
    if not lines:
        raise BadInputError.single(label, "no data: only blank lines", line=1)
    first = lines[0].decode("utf-8", errors="replace")
    if first.lstrip().startswith("{"):
        try:
            obj = json.loads(lines[0])
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            if "keys" in obj:
                return Sniffed("requests", comp, f"{where}JSON lines with a 'keys' list: one row per request")
            return Sniffed("jsonl", comp, f"{where}JSON lines")
    delim = "\t" if "\t" in first else ","
    names = [n.strip() for n in next(csv.reader([first], delimiter=delim))]
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


def sniff(path: Path, mapping: Mapping[str, str] | None = None) -> Sniffed:
    """Detect the format and compression of a trace file (raises BadInputError when unsure)."""
    return sniff_source(Source.of(path), mapping)
