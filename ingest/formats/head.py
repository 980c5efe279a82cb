"""What `--format auto` looks at: the first decompressed 64 KiB of a trace (`Head`), with the views each format's
`sniff` reads (the raw bytes, the text, whether it is binary, the first lines, the first line as a JSON object or
as a header). A view is computed when a format first asks for it; the refusals it makes on the way (a file that
is no trace, text in UTF-16/32, only blank lines) are the sniffer's errors.

Light on purpose (no Arrow): it holds the checks on raw bytes that the readers' text streams share
(`encoding_problem`).
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Final

from base.errors import BadInputError
from ingest.formats.source import Source

__all__ = ["HEAD_BYTES", "Head", "encoding_problem"]

#: Bytes (decompressed) that detection looks at.
HEAD_BYTES: Final = 1 << 16
#: How far a first line longer than the head is read for detection when there is no line cap.
_UNCAPPED_FIRST_LINE: Final = 16 << 20

_BOMS: Final = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def encoding_problem(head: bytes) -> str | None:
    """What is wrong with the text encoding of a file starting with `head`, if it is UTF-16/32 (with or without
    a byte-order mark); None for anything else."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return f"{name} text (byte-order mark {bom.hex()}) is not supported; convert the file to UTF-8"
    sample = head[:4096]
    if len(sample) >= 64:
        even, odd = sample[0::2], sample[1::2]
        for zeros, other, order in ((odd, even, "LE"), (even, odd, "BE")):
            texty = sum(32 <= b < 127 or b in (9, 10, 13) for b in other)
            if zeros.count(0) > 0.95 * len(zeros) and texty > 0.95 * len(other):
                return f"this looks like UTF-16{order} text, which is not supported; convert the file to UTF-8"
    return None


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


class Head:
    """The first `HEAD_BYTES` of an opened source (decompressed) and the views formats detect themselves by.

    `raw` is the bytes as they are (magic numbers); every other view first refuses what is clearly no trace and
    drops a UTF-8 byte-order mark. `where` is `"<compression>-compressed "` (or empty), for the reasons.
    """

    def __init__(self, source: Source, mapping: Mapping[str, str] | None = None) -> None:
        self.source = source
        self.mapping: Mapping[str, str] = mapping or {}
        self.label = source.label
        self.compression = source.compression
        self.where = "" if self.compression == "none" else f"{self.compression}-compressed "
        self.raw: bytes = source.head(HEAD_BYTES)
        if not self.raw:
            raise BadInputError.single(self.label, "file is empty", line=1)

    @cached_property
    def text(self) -> bytes:
        """The head after the refusals (archives, documents, images, UTF-16/32 text), without a UTF-8 BOM."""
        head = self.raw
        for magic, what in _NOT_TRACES:
            if head.startswith(magic):
                raise BadInputError.single(
                    self.label, f"this is {self.where}{what}, not a trace", hint="see docs/formats.md"
                )
        if len(head) >= 512 and head[257:262] == b"ustar":
            raise BadInputError.single(
                self.label, f"this is {self.where}a tar archive: unpack it and ingest the trace file inside"
            )
        problem = encoding_problem(head)
        if problem is not None:
            raise BadInputError.single(self.label, problem, line=1)
        return head[len(codecs.BOM_UTF8) :] if head.startswith(codecs.BOM_UTF8) else head

    @cached_property
    def binary(self) -> bool:
        """NUL bytes, or mostly bytes that are not text."""
        return _is_binary(self.text)

    @cached_property
    def lines(self) -> list[bytes]:
        """Up to the first 20 non-blank lines (a line cut by the end of the head left out; a first line longer
        than the head read on up to the line cap). Raises BadInputError when there are none."""
        head = self.text
        lines = head.split(b"\n")
        if len(head) >= HEAD_BYTES:
            lines = lines[:-1]  # the last one may be cut
        out = [ln.rstrip(b"\r") for ln in lines if ln.strip()][:20]
        if not out and len(head) >= HEAD_BYTES - len(codecs.BOM_UTF8) and head.strip():
            out = self._long_first_line()
        if not out:
            if len(head) >= HEAD_BYTES - len(codecs.BOM_UTF8):
                raise BadInputError.single(
                    self.label, f"no data in the first {HEAD_BYTES:,} bytes: only blank lines", line=1
                )
            raise BadInputError.single(self.label, "no data: only blank lines", line=1)
        return out

    @cached_property
    def first_object(self) -> dict[str, Any] | None:
        """The first line as a JSON object (None when it is not one)."""
        first = self.lines[0].decode("utf-8", errors="replace")
        if not first.lstrip().startswith("{"):
            return None
        try:
            obj = json.loads(self.lines[0])
        except (ValueError, RecursionError):
            return None
        return obj if isinstance(obj, dict) else None

    @cached_property
    def delimiter(self) -> str:
        """A tab when the first line has one, else a comma."""
        return "\t" if "\t" in self.lines[0].decode("utf-8", errors="replace") else ","

    @cached_property
    def header(self) -> list[str]:
        """The first line's fields as header names, renamed by `--map` (empty when it is a JSON object)."""
        if self.first_object is not None:
            return []
        first = self.lines[0].decode("utf-8", errors="replace")
        try:
            names = [n.strip() for n in next(csv.reader([first], delimiter=self.delimiter))]
        except csv.Error:  # a field longer than the csv module's limit (128 KiB): no header of ours
            names = first.split(self.delimiter)
        return [self.mapping.get(n, n) for n in names]

    def _long_first_line(self) -> list[bytes]:
        """The first line when it is longer than the head: read on up to the line cap (or fail with it)."""
        limits = self.source.limits
        cap = limits.max_line_bytes or _UNCAPPED_FIRST_LINE
        fh: Any
        with self.source.open() as fh:
            if fh.peek(3)[:3] == codecs.BOM_UTF8:
                fh.read(3)
            line = bytes(fh.readline(cap + 1))
        if len(line) > cap and not line.endswith(b"\n"):
            if limits.max_line_bytes:
                raise limits.exceeded(self.label, "max_line_bytes", f"line longer than {cap:,} bytes", line=1)
            raise BadInputError.single(
                self.label,
                f"cannot detect the format: the first line is longer than {cap:,} bytes",
                line=1,
                hint="pass --format",
            )
        line = line.rstrip(b"\r\n")
        return [line] if line.strip() else []
