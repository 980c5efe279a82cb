"""The HDR histograms: the Java library's encoding decoded to its own figures, the Python recording in the same
buckets, and encodings that are not this layout's refused."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from kinds.cassandra.replay.hdr import HIGHEST, HdrDecodeError, Histogram, encode

#: org.HdrHistogram.Histogram(1, 3_600_000_000, 3) of HdrHistogram 2.2.2, encodeIntoCompressedByteBuffer, base64,
#: after recording VALUES (and 777 300 times more); its getTotalCount/getMinValue/getMaxValue/getMean and
#: getValueAtPercentile for PERCENTILES as the library printed them.
JAVA = (
    "HISTFAAAAF14nJNpmSzMwMBexQABzFCaEURcm7yEwf4DRICJiekgIxP3EIfsN1gYKDSClYl5wL0xdCATMLxBITaKRzGlGFgGMYDhcKVYBoMjRqlBQ"
    "W11YlprwLR4DyMTALlmIjs="
)
VALUES = [0, 1, 2, 1000, 2047, 2048, 2049, 5000, 123456, 999999, 3_600_000_000] + [100 + i * 7 for i in range(1000)]
PERCENTILES = [0, 1, 25, 50, 90, 95, 99, 99.9, 99.99, 100]
JAVA_AT = [0, 170, 777, 2537, 6199, 6659, 7023, 1000447, 3600809983, 3600809983]


def _recorded() -> Histogram:
    h = Histogram()
    for v in [*VALUES, *[777] * 300]:
        h.record(v)
    return h


def test_the_java_encoding_decodes_to_the_libraries_figures():
    h = Histogram.decode(JAVA)
    assert (h.total, h.min, h.max) == (1311, 0, 3600809983)
    assert h.mean == pytest.approx(2749601.219679634, rel=1e-12)
    assert [h.value_at_percentile(p) for p in PERCENTILES] == JAVA_AT


def test_python_recording_fills_the_same_buckets_and_encodes_back():
    h = _recorded()
    assert h.buckets() == Histogram.decode(JAVA).buckets()
    assert Histogram.decode(encode(h)).buckets() == h.buckets()
    assert encode(Histogram.decode(encode(Histogram()))) == encode(Histogram())


def test_values_past_the_range_are_clamped():
    h = Histogram()
    h.record(-5)
    h.record(HIGHEST * 10)
    assert h.total == 2 and h.min == 0 and h.max >= HIGHEST


def _plain(digits: int = 3, lowest: int = 1, highest: int = HIGHEST, payload: bytes = b"\x02") -> str:
    plain = struct.pack(">iiiiqqd", 0x1C849393, len(payload), 0, digits, lowest, highest, 1.0) + payload
    packed = zlib.compress(plain)
    return base64.b64encode(struct.pack(">ii", 0x1C849394, len(packed)) + packed).decode()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not base64!", "base64"),
        (base64.b64encode(b"\x00" * 4).decode(), "short"),
        (base64.b64encode(struct.pack(">ii", 0x12345678, 0)).decode(), "cookie"),
        (_plain(digits=2), "layout"),
        (_plain(highest=1 << 40), "layout"),
        (_plain(payload=b"\x80"), "cut short"),
        (_plain(payload=b"\x00" * 300_000), "inflates past"),  # a zlib bomb: far more than the layout holds
        (_plain(payload=b"\x02" * 30_000), "past its layout"),
    ],
)
def test_malformed_encodings_are_refused(text, why):
    with pytest.raises(HdrDecodeError, match=why):
        Histogram.decode(text)


def test_counts_running_past_the_layout_are_refused():
    run = -(1 << 20)  # a run of a million empty buckets: past the ~23,552 of the layout
    zz = ((run << 1) ^ (run >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    with pytest.raises(HdrDecodeError, match="past its layout"):
        Histogram.decode(_plain(payload=bytes(out) + b"\x02"))


def test_a_length_that_lies_is_refused():
    raw = bytearray(base64.b64decode(JAVA))
    raw[4:8] = struct.pack(">i", len(raw))
    with pytest.raises(HdrDecodeError, match="length"):
        Histogram.decode(base64.b64encode(bytes(raw)).decode())
