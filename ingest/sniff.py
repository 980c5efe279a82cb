"""Format and compression detection for `--format auto`; says what it chose and why.

Compression comes from magic bytes (gzip, zstd, xz, bz2), never only from the extension. The format comes from
the first decompressed 64 KiB (`ingest.formats.head.Head`): every format of the registry (`ingest.formats`)
that declares a `sniff_rank` is asked in rank order, and the first whose `sniff` gives a reason wins. The
order and each format's test: docs/formats.md § Formats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from base.errors import BadInputError
from ingest.formats import format_names, readers
from ingest.formats.head import Head
from ingest.formats.source import Source
from ingest.limits import Limits

__all__ = ["Sniffed", "sniff", "sniff_directory", "sniff_source"]


@dataclass(frozen=True)
class Sniffed:
    """What `--format auto` chose: the format, the compression and a one-line reason."""

    format: str
    compression: str
    reason: str


def sniff_source(source: Source, mapping: Mapping[str, str] | None = None) -> Sniffed:
    """Detect the format of an opened source; `mapping` (--map) renames header columns before matching."""
    head = Head(source, mapping)
    ranked = sorted(
        ((r.sniff_rank, i, name, r) for i, (name, r) in enumerate(readers().items()) if r.sniff_rank is not None),
        key=lambda t: (t[0], t[1]),
    )
    for _, _, name, reader in ranked:
        reason = reader.sniff(head)
        if reason is not None:
            return Sniffed(name, head.compression, reason)
    raise BadInputError.single(
        source.label,
        "cannot detect the format from the first lines",
        line=1,
        hint=f"pass --format ({', '.join(format_names())})",
    )


def sniff_directory(path: Path) -> tuple[str, str]:
    """(format, reason) of an input directory: the first reader of directories that recognises it."""
    for name, reader in readers().items():
        if reader.reads_directory:
            reason = reader.sniff_directory(path)
            if reason is not None:
                return name, reason
    known = [n for n, r in readers().items() if r.reads_directory]
    raise BadInputError.single(
        str(path),
        f"is a directory, and none that a format reads ({', '.join(known)})",
        hint="pass a trace file, or the directory of a full query log (nodetool enablefullquerylog --path DIR)",
    )


def sniff(path: Path, mapping: Mapping[str, str] | None = None, limits: Limits | None = None) -> Sniffed:
    """Detect the format and compression of a trace file or directory (raises BadInputError when unsure)."""
    if path.is_dir():
        fmt, reason = sniff_directory(path)
        return Sniffed(fmt, "none", reason)
    return sniff_source(Source.of(path, limits), mapping)
