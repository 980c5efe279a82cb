"""Opening a trace file: verified, capped decompression (chosen by magic bytes) and a byte counter for progress.

Every compressed input is read to its verified end, or rejected with a `BadInputError` naming the file and the
byte offset: a stream cut before its end-of-stream marker (gzip, bz2, xz) or a zstd frame cut before its last
block (and checksum, when the frame has one), corrupt data, bad checksums (gzip CRC32 and length, bz2 block CRCs,
xz check, zstd content checksum) and bytes after the last stream that start no new one. Concatenated streams
(multi-member gzip, bz2 and xz streams, zstd frames, zstd skippable frames) are read in full; zero padding after
a gzip member, and xz stream padding (a multiple of 4 zero bytes), are accepted. A file cut exactly between two
streams is indistinguishable from a shorter valid file and cannot be detected.

The decoders hand out at most what the caller asks for per read, so memory stays bounded however much a few
bytes expand to; the caps of `ingest.limits.Limits` on decompressed bytes and compression ratio are checked on
every read, and the dictionary/window memory a stream may demand is bounded (`_WINDOW_LIMIT`).
"""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

from base.errors import BadInputError
from ingest.limits import Limits

__all__ = ["COMPRESSIONS", "CountingReader", "Source", "ZstdFrameCheck", "detect_compression"]

#: Compression name → magic bytes at the start of the file (and of every further stream in it).
_MAGIC: Final[dict[str, bytes]] = {
    "gzip": b"\x1f\x8b",
    "zstd": b"\x28\xb5\x2f\xfd",
    "xz": b"\xfd7zXZ\x00",
    "bz2": b"BZh",
}
COMPRESSIONS: Final = ("none", *_MAGIC)

#: Compressed bytes handed to a decoder per step.
_CHUNK: Final = 1 << 16
#: Most decompressed bytes produced per read, so that the caps are checked at least this often.
_OUT_CHUNK: Final = 1 << 20
#: Most memory a stream's dictionary/window may demand (xz: memlimit; zstd: libzstd's default window limit).
_WINDOW_LIMIT: Final = 128 << 20


def detect_compression(head: bytes) -> str:
    """The compression of a file from its first bytes (`none` when no known magic matches)."""
    for name, magic in _MAGIC.items():
        if head.startswith(magic):
            return name
    if len(head) >= 4 and 0x50 <= head[0] <= 0x5F and head[1:4] == b"\x2a\x4d\x18":
        return "zstd"  # a zstd file may start with a skippable frame (magic 0x184D2A50..5F)
    return "none"


class CountingReader(io.RawIOBase):
    """A read-only raw stream that counts the bytes read from the underlying (compressed) file.

    `watch`, when given, sees every block read (the zstd frame check follows the file's structure with it).
    """

    def __init__(self, raw: BinaryIO, watch: Callable[[bytes], None] | None = None) -> None:
        super().__init__()
        self._raw = raw
        self._watch = watch
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.bytes_read += n
        if self._watch is not None and n:
            self._watch(data)
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


# ------------------------------------------------------------------------------------------------ zstd frames

_ZSTD_MAGIC: Final = 0xFD2FB528
_FCS_BYTES: Final = (0, 2, 4, 8)
_DID_BYTES: Final = (0, 1, 2, 4)


class ZstdFrameCheck:
    """Follows the frame structure of a zstd file as its bytes go by; `finish` fails unless it ended cleanly.

    libzstd verifies what is inside a frame (block contents, the content checksum, the declared content size),
    but a stream cut between two blocks just stops producing output; this walk over frame and block headers
    (header bytes only: block contents are skipped over) knows whether the last frame reached its last block and
    checksum. Format: RFC 8878 §3.1 (frames, skippable frames, block headers).
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.offset = 0  # bytes seen
        self.frames = 0  # complete data frames
        self._state = "magic"
        self._need = 4
        self._buf = bytearray()
        self._skip = 0
        self._after_skip = "magic"
        self._frame_start = 0
        self._skippable = False
        self._checksum = False

    def _goto(self, state: str, need: int = 0) -> None:
        self._state, self._need = state, need

    def feed(self, data: bytes) -> None:
        pos, n = 0, len(data)
        while pos < n:
            if self._skip:
                k = min(self._skip, n - pos)
                self._skip -= k
                pos += k
                self.offset += k
                if not self._skip:
                    self._enter(self._after_skip)
                continue
            k = min(self._need - len(self._buf), n - pos)
            self._buf += data[pos : pos + k]
            pos += k
            self.offset += k
            if len(self._buf) == self._need:
                header = bytes(self._buf)
                self._buf.clear()
                self._step(header)

    def _enter(self, state: str) -> None:
        if state == "magic":
            self._goto("magic", 4)
        elif state == "block":
            self._goto("block", 3)
        elif state == "checksum":
            self._goto("checksum", 4)
        elif state == "frame-end":
            self.frames += 1
            self._goto("magic", 4)
        else:  # pragma: no cover - the states are the ones above
            raise AssertionError(state)

    def _skip_then(self, count: int, state: str) -> None:
        if count:
            self._skip, self._after_skip = count, state
        else:
            self._enter(state)

    def _step(self, header: bytes) -> None:
        start = self.offset - len(header)
        if self._state == "magic":
            magic = int.from_bytes(header, "little")
            self._frame_start = start
            self._skippable = magic != _ZSTD_MAGIC
            if magic == _ZSTD_MAGIC:
                self._goto("descriptor", 1)
            elif magic & 0xFFFFFFF0 == 0x184D2A50:
                self._goto("skippable-size", 4)
            else:
                where = "after the last frame" if self.frames else "at the start of the file"
                raise self._error(f"not a zstd frame at byte {start:,} ({where}): bytes {header.hex()}")
        elif self._state == "descriptor":
            d = header[0]
            if d & 0x08:
                raise self._error(f"corrupt zstd frame header at byte {start:,} (reserved bit set)")
            single_segment = (d >> 5) & 1
            self._checksum = bool((d >> 2) & 1)
            fcs = _FCS_BYTES[d >> 6] or (1 if single_segment else 0)
            rest = (0 if single_segment else 1) + _DID_BYTES[d & 3] + fcs
            if rest:
                self._goto("frame-header", rest)
            else:
                self._enter("block")
        elif self._state == "frame-header":
            self._enter("block")
        elif self._state == "block":
            h = int.from_bytes(header, "little")
            last, kind, size = h & 1, (h >> 1) & 3, h >> 3
            if kind == 3:
                raise self._error(f"corrupt zstd block header at byte {start:,} (reserved block type)")
            nxt = ("checksum" if self._checksum else "frame-end") if last else "block"
            self._skip_then(1 if kind == 1 else size, nxt)
        elif self._state == "checksum":
            self._enter("frame-end")
        elif self._state == "skippable-size":
            self._skip_then(int.from_bytes(header, "little"), "magic")

    def finish(self) -> None:
        """End of the file: it must end between two frames (and hold at least one byte)."""
        if self._state == "magic" and not self._buf and not self._skip:
            return
        if self._state == "magic":
            at = self.offset - len(self._buf)
            if _ZSTD_MAGIC.to_bytes(4, "little").startswith(bytes(self._buf)):
                raise self._error(f"truncated zstd data: the file ends at byte {self.offset:,} inside the magic "
                                  f"number of a frame that starts at byte {at:,}")
            raise self._error(f"not a zstd frame at byte {at:,} (trailing bytes {bytes(self._buf).hex()})")
        missing = {
            "descriptor": "its frame header",
            "frame-header": "its frame header",
            "block": "its last block",
            "checksum": "its content checksum",
            "skippable-size": "its size",
        }.get(self._state, "the rest of a block")
        if self._skip and self._skippable:
            missing = "the rest of its data"
        elif self._skip:
            missing = "the rest of a block" + {
                "block": " and its last block",
                "checksum": " and its content checksum",
            }.get(self._after_skip, "")
        kind = "skippable frame" if self._skippable else "frame"
        raise self._error(
            f"truncated zstd data: the file ends at byte {self.offset:,} inside the {kind} that starts at byte "
            f"{self._frame_start:,} (missing {missing})"
        )

    def _error(self, problem: str) -> BadInputError:
        return BadInputError.single(self.label, problem, hint="the file is damaged or incomplete; upload it again")


# ----------------------------------------------------------------------------------------- gzip, bz2, xz


class _Inflater:
    """zlib's gzip decoder (header, CRC32 and length checked) behind the bz2/lzma decompressor interface."""

    def __init__(self) -> None:
        self._d = zlib.decompressobj(wbits=31)
        self._tail = b""
        self._full = False

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data

    @property
    def needs_input(self) -> bool:
        return not self._tail and not self._full

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._tail:
            data = self._tail + data
        out = self._d.decompress(data, max_length)
        self._tail = self._d.unconsumed_tail
        self._full = len(out) >= max_length  # output may be pending inside zlib: ask again before more input
        return out


def _decompressor(codec: str) -> Any:
    if codec == "gzip":
        return _Inflater()
    if codec == "bz2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=_WINDOW_LIMIT)


class _StreamDecoder(io.RawIOBase):
    """gzip / bz2 / xz: every stream read to its end-of-stream marker, concatenated streams in full.

    Raises BadInputError for a truncated stream, corrupt data or a failed check, and bytes after the last stream
    that are neither a new stream nor allowed padding.
    """

    def __init__(self, raw: BinaryIO, codec: str, label: str) -> None:
        super().__init__()
        self._raw = raw
        self._codec = codec
        self._label = label
        self._dec = _decompressor(codec)
        self._pending = b""
        self._fed = 0  # compressed bytes read from the file
        self._start = 0  # where the current stream starts
        self._out = 0
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        size = min(len(buffer), _OUT_CHUNK)
        if self._done or size == 0:
            return 0
        while True:
            if self._dec.eof:
                if not self._next_stream():
                    self._done = True
                    return 0
                continue
            if self._dec.needs_input:
                data = self._pending or self._read()
                self._pending = b""
                if not data:
                    raise self._error(
                        f"truncated {self._codec} data: the file ends at byte {self._fed:,} inside the stream that "
                        f"starts at byte {self._start:,} (its end-of-stream marker is missing; "
                        f"{self._out:,} bytes decompressed)"
                    )
            else:
                data = b""
            try:
                out = self._dec.decompress(data, size)
            except lzma.LZMAError as exc:
                if "memory" in str(exc).lower():
                    raise BadInputError.single(
                        self._label,
                        f"an xz stream asks for more than {_WINDOW_LIMIT >> 20} MiB to decode (its dictionary)",
                        hint="recompress with a dictionary of 64 MiB at most (xz -9 or lower)",
                    ) from None
                raise self._error(f"corrupt xz data at or before byte {self._fed:,} of the file: {exc}") from None
            except (zlib.error, OSError, EOFError, ValueError) as exc:
                raise self._error(
                    f"corrupt {self._codec} data at or before byte {self._fed:,} of the file: {exc}"
                ) from None
            if out:
                n = len(out)
                buffer[:n] = out
                self._out += n
                return n

    def _read(self) -> bytes:
        data = self._raw.read(_CHUNK)
        self._fed += len(data)
        return bytes(data)

    def _next_stream(self) -> bool:
        """After an end-of-stream marker: start the next stream, accept padding to the end, or fail."""
        rest = bytes(self._dec.unused_data) + self._pending
        self._pending = b""
        end = self._fed - len(rest)
        magic = _MAGIC[self._codec]
        while len(rest) < len(magic) and (more := self._read()):
            rest += more
        if not rest:
            return False
        if rest.startswith(magic):
            self._dec, self._start, self._pending = _decompressor(self._codec), end, rest
            return True
        if magic.startswith(rest):  # the file ends inside the magic number of a next stream
            raise self._error(
                f"truncated {self._codec} data: the file ends at byte {self._fed:,} inside the header of a stream "
                f"that starts at byte {end:,}"
            )
        if self._codec in ("gzip", "xz") and not rest.strip(b"\0"):
            zeros = len(rest)
            while more := self._read():
                if more.strip(b"\0"):
                    break
                zeros += len(more)
            else:
                if self._codec == "gzip" or zeros % 4 == 0:
                    return False
        raise self._error(
            f"unexpected data at byte {end:,} of the file, after the end of the {self._codec} stream that starts at "
            f"byte {self._start:,}: bytes {rest[:8].hex()} start no new stream"
        )

    def _error(self, problem: str) -> BadInputError:
        return BadInputError.single(self._label, problem, hint="the file is damaged or incomplete; upload it again")

    def close(self) -> None:
        self._raw.close()
        super().close()


class _ZstdDecoder(io.RawIOBase):
    """zstd: libzstd checks the frames' contents; `ZstdFrameCheck` (watching the raw bytes) checks their ends."""

    def __init__(self, raw: BinaryIO, frames: ZstdFrameCheck, label: str) -> None:
        import zstandard

        super().__init__()
        self._raw = raw
        self._frames = frames
        self._label = label
        self._error_type = zstandard.ZstdError
        dctx = zstandard.ZstdDecompressor(max_window_size=_WINDOW_LIMIT)
        self._reader: Any = dctx.stream_reader(raw, read_across_frames=True, closefd=False)
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._done:
            return 0
        try:
            n = int(self._reader.readinto(memoryview(buffer)[:_OUT_CHUNK]))
        except self._error_type as exc:
            if "too much memory" in str(exc):
                raise BadInputError.single(
                    self._label,
                    f"a zstd frame asks for a window larger than {_WINDOW_LIMIT >> 20} MiB to decode",
                    hint="recompress without --long (or with --long=27 at most)",
                ) from None
            raise BadInputError.single(
                self._label,
                f"corrupt zstd data at or before byte {self._frames.offset:,} of the file: {exc}",
                hint="the file is damaged or incomplete; upload it again",
            ) from None
        if n == 0 and len(buffer):
            while self._raw.read(1 << 20):  # whatever the decoder left unread still goes through the frame check
                pass
            self._frames.finish()
            self._done = True
        return n

    def close(self) -> None:
        self._reader.close()
        self._raw.close()
        super().close()


class _Capped(io.RawIOBase):
    """Counts decompressed bytes and applies the decompressed-size and compression-ratio caps on every read."""

    def __init__(self, inner: io.RawIOBase, counter: CountingReader, limits: Limits, label: str) -> None:
        super().__init__()
        self._inner = inner
        self._counter = counter
        self._limits = limits
        self._label = label
        self.out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = self._inner.readinto(buffer) or 0
        self.out += n
        lim = self._limits
        if lim.max_decompressed_bytes and self.out > lim.max_decompressed_bytes:
            raise lim.exceeded(
                self._label,
                "max_decompressed_bytes",
                f"decompresses to more than {lim.max_decompressed_bytes:,} bytes, reached at byte "
                f"{self._counter.bytes_read:,} of the file",
            )
        if lim.max_compression_ratio and self.out > lim.ratio_check_after_bytes:
            ratio = self.out / max(1, self._counter.bytes_read)
            if ratio > lim.max_compression_ratio:
                raise lim.exceeded(
                    self._label,
                    "max_compression_ratio",
                    f"compression ratio above {lim.max_compression_ratio:g}:1: {self.out:,} bytes decompressed from "
                    f"the first {self._counter.bytes_read:,} bytes of the file",
                )
        return n

    def close(self) -> None:
        self._inner.close()
        super().close()


@dataclass
class Source:
    """One input file. `open()` yields the decompressed bytes; `bytes_read` tracks progress in the raw file."""

    path: Path
    compression: str
    size: int
    limits: Limits = field(default_factory=Limits)
    _counters: list[CountingReader] = field(default_factory=list, repr=False)

    @classmethod
    def of(cls, path: Path, limits: Limits | None = None) -> Source:
        with path.open("rb") as fh:
            head = fh.read(8)
        return cls(
            path=path, compression=detect_compression(head), size=path.stat().st_size, limits=limits or Limits()
        )

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

    def check_size(self) -> None:
        """The decompressed-bytes cap on an uncompressed file: its size (checked before anything is read)."""
        lim = self.limits
        if self.compression == "none" and lim.max_decompressed_bytes and self.size > lim.max_decompressed_bytes:
            raise lim.exceeded(self.label, "max_decompressed_bytes", f"the file has {self.size:,} bytes")

    def open(self) -> BinaryIO:
        """A buffered binary stream of the decompressed content (caller closes it).

        Reads raise BadInputError for damaged compressed data and past the decompressed-size and ratio caps.
        """
        lim = self.limits
        self.check_size()
        frames = ZstdFrameCheck(self.label) if self.compression == "zstd" else None
        counter = CountingReader(self.path.open("rb"), watch=frames.feed if frames is not None else None)
        self._counters.append(counter)
        raw: BinaryIO = io.BufferedReader(counter, buffer_size=1 << 20)  # type: ignore[assignment]
        if self.compression == "none":
            return raw
        decoder: io.RawIOBase
        if frames is not None:
            decoder = _ZstdDecoder(raw, frames, self.label)
        else:
            decoder = _StreamDecoder(raw, self.compression, self.label)
        capped = _Capped(decoder, counter, lim, self.label)
        return io.BufferedReader(capped, buffer_size=1 << 20)  # type: ignore[return-value]

    def head(self, n: int = 1 << 16) -> bytes:
        """The first `n` decompressed bytes (fewer if the file is shorter)."""
        with self.open() as fh:
            data = fh.read(n)
        return bytes(data)
