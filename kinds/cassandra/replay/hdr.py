"""HDR histograms of the generators' latencies and lag, in HdrHistogram 2.2's bucket layout.

Both generators record microseconds from 1 µs to one hour at 3 significant decimal digits (`LOWEST`, `HIGHEST`,
`DIGITS`): the Java generator into `org.HdrHistogram.Histogram(1, 3_600_000_000, 3)`, printed as the library's
compressed V2 encoding in base64; the Python generator into `Histogram` here, the same buckets. A run's per-block
histograms (one per arm and block of `block_s`, what the live replay's block bootstrap resamples) are kept at 2
digits (`BLOCK_DIGITS`, `Histogram(BLOCK_DIGITS)`: buckets 1 % wide, an eighth of the 3-digit layout's memory).
`Histogram.decode` reads the Java encoding as hostile input (sizes capped, the layout required to be this one, every
count checked), and `value_at_percentile`, `max`, `min` and `mean` are the library's own definitions (a value is
reported as the highest value equivalent to its bucket; the 0th percentile as the lowest), so a decoded histogram
gives the very figures the JVM printed.

The encoding (big-endian): the compressed form is a cookie (0x1c849304 with the word size in bits 4-7), the
length of what follows, and a zlib stream of the plain form: a cookie (0x1c849303, same word-size bits), the
payload's length, the normalizing index offset (0 here), the significant digits, the lowest discernible value
(int64), the highest trackable value (int64), the integer-to-double ratio (a double, 1.0 here), then the counts in
index order, each a ZigZag LEB128 integer (at most 9 bytes), a negative one -n standing for n empty buckets.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Iterator
from typing import Final

__all__ = ["BLOCK_DIGITS", "DIGITS", "HIGHEST", "LOWEST", "HdrDecodeError", "Histogram", "bucket_table", "encode"]

LOWEST: Final = 1
HIGHEST: Final = 3_600_000_000
DIGITS: Final = 3
#: The per-block histograms' significant digits.
BLOCK_DIGITS: Final = 2

_V2_COOKIE: Final = 0x1C849303
_V2_COMPRESSED_COOKIE: Final = 0x1C849304
_HEADER: Final = struct.Struct(">iiiiqqd")
#: Longest base64 text of one encoded histogram accepted (its counts compress to a few kilobytes).
MAX_ENCODED_CHARS: Final = 1 << 20


class HdrDecodeError(ValueError):
    """An encoded histogram that is not one of this layout, or not well formed."""


class _Layout:
    """HdrHistogram's index arithmetic for (lowest 1, highest, digits)."""

    def __init__(self, highest: int, digits: int) -> None:
        largest_single_unit = 2 * 10**digits
        self.unit_magnitude = 0  # floor(log2(lowest)) with lowest 1
        sub_bucket_count_magnitude = math.ceil(math.log2(largest_single_unit))
        self.sub_bucket_half_count_magnitude = max(sub_bucket_count_magnitude, 1) - 1
        self.sub_bucket_count = 1 << (self.sub_bucket_half_count_magnitude + 1)
        self.sub_bucket_half_count = self.sub_bucket_count // 2
        self.sub_bucket_mask = (self.sub_bucket_count - 1) << self.unit_magnitude
        smallest_untrackable = self.sub_bucket_count << self.unit_magnitude
        buckets = 1
        while smallest_untrackable <= highest:
            if smallest_untrackable > (1 << 62):
                buckets += 1
                break
            smallest_untrackable <<= 1
            buckets += 1
        self.bucket_count = buckets
        self.length = (buckets + 1) * (self.sub_bucket_count // 2)
        self.leading_zero_count_base = 64 - self.unit_magnitude - self.sub_bucket_half_count_magnitude - 1

    def bucket_index(self, value: int) -> int:
        v = value | self.sub_bucket_mask
        return self.leading_zero_count_base - (64 - v.bit_length())

    def index(self, value: int) -> int:
        b = self.bucket_index(value)
        sub = value >> (b + self.unit_magnitude)
        return ((b + 1) << self.sub_bucket_half_count_magnitude) + (sub - self.sub_bucket_half_count)

    def value_from_index(self, index: int) -> int:
        b = (index >> self.sub_bucket_half_count_magnitude) - 1
        sub = (index & (self.sub_bucket_half_count - 1)) + self.sub_bucket_half_count
        if b < 0:
            sub -= self.sub_bucket_half_count
            b = 0
        return sub << (b + self.unit_magnitude)

    def range_size(self, value: int) -> int:
        b = self.bucket_index(value)
        sub = value >> (b + self.unit_magnitude)
        return 1 << (self.unit_magnitude + (b + 1 if sub >= self.sub_bucket_count else b))

    def lowest_equivalent(self, value: int) -> int:
        b = self.bucket_index(value)
        sub = value >> (b + self.unit_magnitude)
        return sub << (b + self.unit_magnitude)

    def highest_equivalent(self, value: int) -> int:
        return self.lowest_equivalent(value) + self.range_size(value) - 1

    def median_equivalent(self, value: int) -> int:
        return self.lowest_equivalent(value) + (self.range_size(value) >> 1)


_LAYOUTS: Final = {d: _Layout(HIGHEST, d) for d in (DIGITS, BLOCK_DIGITS)}
_LAYOUT: Final = _LAYOUTS[DIGITS]


def _zigzag_values(data: bytes, start: int, end: int) -> Iterator[int]:
    pos = start
    while pos < end:
        value = 0
        shift = 0
        for k in range(9):
            if pos >= end:
                raise HdrDecodeError("a count is cut short")
            byte = data[pos]
            pos += 1
            if k == 8:
                value |= byte << 56
                break
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        yield (value >> 1) ^ -(value & 1)


class Histogram:
    """Counts of microsecond values in the shared layout of `digits` significant digits (`DIGITS`, or
    `BLOCK_DIGITS` for a block's) — `record` for the Python generator, `decode` for the Java one's output. Values
    above `HIGHEST` are recorded as `HIGHEST`, below 0 as 0."""

    __slots__ = ("_counts", "_layout", "digits", "total")

    def __init__(self, digits: int = DIGITS) -> None:
        if digits not in _LAYOUTS:
            raise ValueError(f"a histogram of {digits} significant digits is not one of {sorted(_LAYOUTS)}")
        self.digits = digits
        self._layout = _LAYOUTS[digits]
        self._counts: list[int] = [0] * self._layout.length
        self.total = 0

    def record(self, value_us: int) -> None:
        v = min(max(int(value_us), 0), HIGHEST)
        self._counts[self._layout.index(v)] += 1
        self.total += 1

    def add(self, other: Histogram) -> None:
        if other.digits != self.digits:
            raise ValueError("histograms of different layouts cannot be added")
        for i, c in enumerate(other._counts):
            if c:
                self._counts[i] += c
        self.total += other.total

    def buckets(self) -> list[tuple[int, int]]:
        """(highest value equivalent to the bucket, count) of every non-empty bucket, in value order."""
        lay = self._layout
        return [(lay.highest_equivalent(lay.value_from_index(i)), c) for i, c in enumerate(self._counts) if c]

    def indexed(self) -> dict[int, int]:
        """Bucket index → count of every non-empty bucket."""
        return {i: c for i, c in enumerate(self._counts) if c}

    @property
    def max(self) -> int:
        for i in range(len(self._counts) - 1, -1, -1):
            if self._counts[i]:
                v = self._layout.value_from_index(i)
                return 0 if v == 0 else self._layout.highest_equivalent(v)
        return 0

    @property
    def min(self) -> int:
        if self.total == 0 or self._counts[0]:
            return 0
        for i, c in enumerate(self._counts):
            if c:
                return self._layout.lowest_equivalent(self._layout.value_from_index(i))
        return 0

    @property
    def mean(self) -> float:
        if self.total == 0:
            return 0.0
        lay = self._layout
        s = sum(lay.median_equivalent(lay.value_from_index(i)) * c for i, c in enumerate(self._counts) if c)
        return s / self.total

    def value_at_percentile(self, percentile: float) -> int:
        """HdrHistogram's `getValueAtPercentile`: the highest value equivalent to the bucket holding the first
        recorded value at or above `percentile` (0..100) of the count; 0 for an empty histogram."""
        requested = min(max(math.nextafter(percentile, -math.inf), 0.0), 100.0)
        at = max(math.ceil(requested * self.total / 100.0), 1)
        running = 0
        for i, c in enumerate(self._counts):
            running += c
            if running >= at:
                v = self._layout.value_from_index(i)
                return self._layout.lowest_equivalent(v) if percentile == 0.0 else self._layout.highest_equivalent(v)
        return 0

    @classmethod
    def decode(cls, text: str, digits: int = DIGITS) -> Histogram:
        """A histogram from the base64 of HdrHistogram's compressed encoding, refused (HdrDecodeError) unless it
        is the layout of `digits` significant digits and well formed."""
        import base64
        import binascii

        if not isinstance(text, str) or len(text) > MAX_ENCODED_CHARS:
            raise HdrDecodeError("an encoded histogram is not text of at most 1 MiB")
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise HdrDecodeError("an encoded histogram is not base64") from None
        if len(raw) < 8:
            raise HdrDecodeError("an encoded histogram is cut short")
        cookie, length = struct.unpack_from(">ii", raw)
        if cookie & ~0xF0 != _V2_COMPRESSED_COOKIE:
            raise HdrDecodeError(f"an encoded histogram has cookie {cookie:#x}, not a compressed V2 histogram's")
        if length != len(raw) - 8:
            raise HdrDecodeError("an encoded histogram's length does not match its bytes")
        layout = _LAYOUTS[digits]
        limit = _HEADER.size + 9 * layout.length
        inflater = zlib.decompressobj()
        try:
            plain = inflater.decompress(raw[8:], limit + 1)
        except zlib.error:
            raise HdrDecodeError("an encoded histogram's zlib stream is damaged") from None
        if len(plain) > limit or inflater.unconsumed_tail:
            raise HdrDecodeError("an encoded histogram inflates past its layout's size")
        if len(plain) < _HEADER.size:
            raise HdrDecodeError("an encoded histogram's header is cut short")
        cookie, payload, offset, found_digits, lowest, highest, ratio = _HEADER.unpack_from(plain)
        if cookie & ~0xF0 != _V2_COOKIE:
            raise HdrDecodeError(f"an encoded histogram's inner cookie {cookie:#x} is not a V2 histogram's")
        if (found_digits, lowest, highest, offset, ratio) != (digits, LOWEST, HIGHEST, 0, 1.0):
            raise HdrDecodeError(
                f"an encoded histogram of layout (digits {found_digits}, lowest {lowest}, highest {highest}, offset "
                f"{offset}, ratio {ratio}), not ({digits}, {LOWEST}, {HIGHEST}, 0, 1.0)"
            )
        if payload != len(plain) - _HEADER.size:
            raise HdrDecodeError("an encoded histogram's payload length does not match its bytes")
        h = cls(digits)
        index = 0
        for count in _zigzag_values(plain, _HEADER.size, len(plain)):
            if count < 0:
                index -= count
                if index > layout.length:
                    raise HdrDecodeError("an encoded histogram's counts run past its layout")
                continue
            if index >= layout.length:
                raise HdrDecodeError("an encoded histogram's counts run past its layout")
            if count > (1 << 53):
                raise HdrDecodeError("an encoded histogram holds an implausible count")
            h._counts[index] = count
            h.total += count
            index += 1
        return h


def _zigzag(value: int) -> bytes:
    v = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    for _ in range(8):
        if v < 0x80:
            out.append(v)
            return bytes(out)
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v & 0xFF)
    return bytes(out)


def encode(h: Histogram) -> str:
    """`h` in HdrHistogram's compressed V2 encoding, base64 (what the Java generator prints; `Histogram.decode`
    reads it back)."""
    import base64

    counts = h._counts
    last = max((i for i, c in enumerate(counts) if c), default=-1)
    payload = bytearray()
    i = 0
    while i <= last:
        if counts[i] == 0:
            j = i
            while j <= last and counts[j] == 0:
                j += 1
            payload += _zigzag(-(j - i)) if j - i > 1 else _zigzag(0)
            i = j
            continue
        payload += _zigzag(counts[i])
        i += 1
    plain = _HEADER.pack(_V2_COOKIE | 0x90, len(payload), 0, h.digits, LOWEST, HIGHEST, 1.0) + bytes(payload)
    packed = zlib.compress(plain)
    return base64.b64encode(struct.pack(">ii", _V2_COMPRESSED_COOKIE | 0x90, len(packed)) + packed).decode()


def bucket_table(rows: list[list[Histogram]]) -> tuple[list[float], list[list[list[int]]]]:
    """Histograms of one layout as bucket bounds and counts (`tuner.fidelity.BlockHistograms`' form):
    `rows[a][b]` is arm a's histogram of block b. Returns (upper bounds in µs, counts[a][b][j]) over the buckets
    any of them holds, each bucket j being (upper[j-1], upper[j]] µs: a non-empty HDR bucket is
    (its lowest equivalent value - 1, its highest], so an empty bucket of bound (lowest - 1) is put before each
    one whose neighbour below is not in the table (the interpolation inside a bucket keeps its true width)."""
    digits = {h.digits for row in rows for h in row}
    if len(digits) > 1:
        raise ValueError("histograms of different layouts")
    if not digits:
        return [], [[] for _ in rows]
    lay = _LAYOUTS[digits.pop()]
    one = lay.index(1)

    def at(i: int) -> int:  # a value of 0 µs (none is recorded: every latency is at least 1) counts as 1 µs
        return one if i < one else i

    used = sorted({at(i) for row in rows for h in row for i in h.indexed()})
    upper: list[float] = []
    index_of: dict[int, int] = {}
    previous_hi: int | None = None
    for i in used:
        value = lay.value_from_index(i)
        lo, hi = lay.lowest_equivalent(value), lay.highest_equivalent(value)
        if lo - 1 > 0 and previous_hi != lo - 1:
            upper.append(float(lo - 1))
        index_of[i] = len(upper)
        upper.append(float(hi))
        previous_hi = hi
    counts = []
    for row in rows:
        arm_counts = []
        for h in row:
            line = [0] * len(upper)
            for i, c in h.indexed().items():
                line[index_of[at(i)]] += c
            arm_counts.append(line)
        counts.append(arm_counts)
    return upper, counts
