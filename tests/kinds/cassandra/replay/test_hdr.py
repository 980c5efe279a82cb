"""The HDR histograms: the Java library's encoding decoded to its own figures, the Python recording in the same
buckets, and encodings that are not this layout's refused."""

from __future__ import annotations

import base64
import itertools
import struct
import zlib

import numpy as np
import pytest

from kinds.cassandra.replay.hdr import BLOCK_DIGITS, HIGHEST, HdrDecodeError, Histogram, bucket_table, encode
from tuner.fidelity import BlockHistograms, histogram_quantiles

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


#: The same values in org.HdrHistogram.Histogram(1, 3_600_000_000, 2) (the per-block layout), as the library printed
#: them.
JAVA_2 = (
    "HISTFAAAAGF4nJNpmSzMwMCUzAABTFCaEURcm7yEwf4DVIKJ6SAjEzcJkBUImamCgZYzgCG51C0WMjVC9LEwgcFAUSwcLGwsLCA8QBQXBxcQcWClePD"
    "IEUVxLOVgamZjOijOBABOcxIE"
)
JAVA_2_AT = [0, 170, 779, 2543, 6207, 6687, 7039, 1003519, 3607101439, 3607101439]


def _recorded(digits: int = 3) -> Histogram:
    h = Histogram(digits)
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


def test_the_block_layout_decodes_to_the_libraries_figures_and_records_into_the_same_buckets():
    h = Histogram.decode(JAVA_2, BLOCK_DIGITS)
    assert (h.total, h.min, h.max) == (1311, 0, 3607101439)
    assert h.mean == pytest.approx(2748802.848207475, rel=1e-12)
    assert [h.value_at_percentile(p) for p in PERCENTILES] == JAVA_2_AT
    assert _recorded(BLOCK_DIGITS).buckets() == h.buckets()
    assert Histogram.decode(encode(h), BLOCK_DIGITS).buckets() == h.buckets()
    with pytest.raises(HdrDecodeError, match="layout"):  # a block's encoding is not a whole run's, nor back
        Histogram.decode(JAVA_2)
    with pytest.raises(HdrDecodeError, match="layout"):
        Histogram.decode(JAVA, BLOCK_DIGITS)
    with pytest.raises(ValueError, match="layouts"):
        Histogram().add(h)


def test_a_bucket_table_keeps_each_buckets_true_width():
    """Blocks of two arms as bucket bounds and counts: every recorded value falls in its bucket's (lower, upper],
    and the interpolated quantile of a bucket stays inside its own HDR bucket."""
    a0, a1, b0 = Histogram(BLOCK_DIGITS), Histogram(BLOCK_DIGITS), Histogram(BLOCK_DIGITS)
    for v in (1, 2, 3, 100, 1000, 1001, 50_000):
        a0.record(v)
    a1.record(7)
    for v in (5, 70_000):
        b0.record(v)
    upper, counts = bucket_table([[a0, a1], [b0, Histogram(BLOCK_DIGITS)]])
    assert all(x < y for x, y in itertools.pairwise(upper)) and upper[0] >= 1
    assert [sum(map(sum, arm)) for arm in counts] == [8, 2]
    lower = [0.0, *upper[:-1]]
    for v, (arm, block) in ((1000, (0, 0)), (50_000, (0, 0)), (7, (0, 1)), (70_000, (1, 0))):
        j = next(j for j in range(len(upper)) if lower[j] < v <= upper[j])
        assert counts[arm][block][j] >= 1
    # 1000 and 1001 share HDR's bucket [1000, 1003]: bounds (999, 1003], not from the bucket below
    j = upper.index(1003.0)
    assert upper[j - 1] == 999.0 and counts[0][0][j] == 2
    hist = BlockHistograms(np.asarray(upper), np.asarray(counts[0]), 1.0)
    assert 999.0 < histogram_quantiles(hist.upper_us, hist.merged(), 0.7)[0] <= 1003.0
    assert bucket_table([]) == ([], [])


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
