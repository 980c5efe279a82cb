"""Opening a trace file: transparent decompression (chosen by magic bytes) and a byte counter for progress."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final

__all__ = ["COMPRESSIONS", "CountingReader", "Source", "detect_compression"]

#: Compression name → magic bytes at the start of the file.
_MAGIC: Final[dict[str, bytes]] = {
    "gzip": b"\x1f\x8b",
    "zstd": b"\x28\xb5\x2f\xfd",
    "xz": b"\xfd7zXZ\x00",
    "bz2": b"BZh",
}
COMPRESSIONS: Final = ("none", *_MAGIC)


def detect_compression(head: bytes) -> str:
    """The compression of a file from its first bytes (`none` when no known magic matches)."""
    for name, magic in _MAGIC.items():
        if head.startswith(magic):
            return name
    return "none"


class CountingReader(io.RawIOBase):
    """A read-only raw stream that counts the bytes read from the underlying (compressed) file."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__()
        self._raw = raw
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.bytes_read += n
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


@dataclass
class Source:
    """One input file. `open()` yields the decompressed bytes; `bytes_read` tracks progress in the raw file."""

    path: Path
    compression: str
    size: int
    _counters: list[CountingReader] = field(default_factory=list, repr=False)

    @classmethod
    def of(cls, path: Path) -> Source:
        with path.open("rb") as fh:
            head = fh.read(8)
        return cls(path=path, compression=detect_compression(head), size=path.stat().st_size)

    @property
    def label(self) -> str:
        """How the file is named in error messages."""
        return str(self.path)

    _reported: int | None = field(default=None, repr=False)

    @property
    def bytes_read(self) -> int:
        if self._reported is not None:
            return self._reported
        return self._counters[-1].bytes_read if self._counters else 0

    def report_progress(self, done_bytes: int) -> None:
        """For readers that do not read through `open()` (Parquet): how far into the file they are."""
        self._reported = done_bytes

    def open(self) -> BinaryIO:
        """A buffered binary stream of the decompressed content (caller closes it)."""
        counter = CountingReader(self.path.open("rb"))
        self._counters.append(counter)
        raw: BinaryIO = io.BufferedReader(counter, buffer_size=1 << 20)
        if self.compression == "gzip":
            return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
        if self.compression == "bz2":
            return bz2.BZ2File(raw, mode="rb")  # type: ignore[return-value]
        if self.compression == "xz":
            return lzma.LZMAFile(raw, mode="rb")  # type: ignore[return-value]
        if self.compression == "zstd":
            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            return io.BufferedReader(reader, buffer_size=1 << 20)  # type: ignore[arg-type]
        return raw

    def head(self, n: int = 1 << 16) -> bytes:
        """The first `n` decompressed bytes (fewer if the file is shorter)."""
        with self.open() as fh:
            data = fh.read(n)
        return bytes(data)
