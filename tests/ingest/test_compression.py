"""Transparent decompression chosen by magic bytes, not by the file name."""

from __future__ import annotations

import bz2
import gzip
import lzma
from collections.abc import Callable

import pytest
import zstandard

from ingest.pipeline import ingest_file
from ingest.sniff import sniff

BODY = b"ts,key,value_size\n1,a,3\n2,b,4\n"
CODECS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
}


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compressed_csv_with_a_misleading_name(write, settings, codec):
    p = write("trace.csv", CODECS[codec](BODY))  # no compression suffix on purpose
    s = sniff(p)
    assert (s.format, s.compression) == ("csv", codec)
    info = ingest_file(p, settings=settings)
    assert info.manifest["source"]["compression"] == codec
    assert info.read_table().column("key").to_pylist() == ["a", "b"]
    assert info.name == "trace"


def test_compressed_error_lines_are_decompressed_lines(write, settings):
    from base.errors import BadInputError

    p = write("t.csv.gz", gzip.compress(b"ts,key,value_size\n1,a,3\n2,b,-3\n"))
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, settings=settings)
    assert str(exc.value) == f"""{p}:3: field 'value_size': expected non-negative integer, got "-3\""""


def test_same_content_other_compression_is_another_dataset(write, settings):
    a = ingest_file(write("a.csv", BODY), settings=settings)
    b = ingest_file(write("b.csv.gz", gzip.compress(BODY)), settings=settings)
    assert a.id != b.id  # the id is of the source bytes
    assert a.read_table().equals(b.read_table())


# --- every compressed input is read to its verified end ------------------------------------------------------

#: 16,948 rows, as in the report of a zstd upload cut at 35% that became a dataset of 3,231 rows.
ROWS = 16_948
OPS = ("get", "set", "delete")
TRACE = b"ts,key,value_size,op\n" + b"".join(
    b"%d.%03d,key-%d,%d,%s\n" % (i // 1000, i % 1000, i * 7919 % 100_003, 100 + i % 900, OPS[i % 3].encode())
    for i in range(ROWS)
)
STRICT: dict[str, Callable[[bytes], bytes]] = {
    **CODECS,
    "zstd": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
}


def _rejected(path, settings, tailtune_home, *needles: str) -> str:
    from base.errors import BadInputError
    from tests.ingest.conftest import snapshot

    with pytest.raises(BadInputError) as exc:
        ingest_file(path, settings=settings)
    message = str(exc.value)
    assert message.startswith(f"{path}"), message
    for needle in needles:
        assert needle in message, message
    assert snapshot(tailtune_home) == [], "a failed ingest must leave no dataset and no staging folder"
    return message


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("keep", [0.35, 0.9, -1])
def test_truncated_input_is_rejected_with_the_byte_offset(write, settings, tailtune_home, codec, keep):
    data = STRICT[codec](TRACE)
    cut = data[:-1] if keep == -1 else data[: int(len(data) * keep)]
    p = write(f"cut-{keep}.csv.{codec}", cut)
    message = _rejected(p, settings, tailtune_home, f"truncated {codec} data", f"the file ends at byte {len(cut):,}")
    assert "rows" not in message


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_truncated_input_through_the_cli(cli, write, tailtune_home, codec):
    data = STRICT[codec](TRACE)
    p = write(f"t.csv.{codec}", data[: len(data) // 3])
    r = cli("ingest", str(p))
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert f"{p}: truncated {codec} data: the file ends at byte {len(data) // 3:,}" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_trailing_garbage_after_the_last_stream_is_rejected(write, settings, tailtune_home, codec):
    data = STRICT[codec](TRACE)
    p = write(f"t.csv.{codec}", data + b"garbage!")
    _rejected(p, settings, tailtune_home, f"at byte {len(data):,}")


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_corrupt_input_is_rejected(write, settings, tailtune_home, codec):
    data = bytearray(STRICT[codec](TRACE))
    data[len(data) // 2] ^= 0x55
    p = write(f"t.csv.{codec}", bytes(data))
    _rejected(p, settings, tailtune_home, codec)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_concatenated_streams_are_read_in_full(write, settings, codec):
    half = TRACE.index(b"\n", len(TRACE) // 2) + 1
    p = write(f"two.csv.{codec}", STRICT[codec](TRACE[:half]) + STRICT[codec](TRACE[half:]))
    info = ingest_file(p, settings=settings)
    assert info.manifest["rows"] == ROWS


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_a_second_stream_cut_short_is_rejected(write, settings, tailtune_home, codec):
    half = TRACE.index(b"\n", len(TRACE) // 2) + 1
    first, second = STRICT[codec](TRACE[:half]), STRICT[codec](TRACE[half:])
    for keep in (3, len(second) // 2):  # inside the magic number; inside the data
        p = write(f"two-{keep}.csv.{codec}", first + second[:keep])
        _rejected(p, settings, tailtune_home, f"truncated {codec} data", f"starts at byte {len(first):,}")


def test_padding_that_the_formats_allow(write, settings):
    gz = write("pad.csv.gz", gzip.compress(BODY) + b"\0" * 7)  # gzip tools skip zero padding
    xz = write("pad.csv.xz", lzma.compress(BODY) + b"\0" * 8)  # xz stream padding: a multiple of 4 zeros
    for p in (gz, xz):
        assert ingest_file(p, settings=settings).manifest["rows"] == 2


def test_zstd_skippable_frames_and_frames_without_checksum(write, settings):
    skippable = (0x184D2A50).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"hello"
    plain = zstandard.ZstdCompressor(write_checksum=False, write_content_size=False).compress(BODY)
    p = write("skip.csv.zst", skippable + plain + skippable)
    assert ingest_file(p, settings=settings).manifest["rows"] == 2


def test_zstd_streamed_by_arrow_is_accepted(write, settings, tmp_path):
    import pyarrow as pa

    out = tmp_path / "arrow.csv.zst"
    with pa.CompressedOutputStream(str(out), "zstd") as fh:
        fh.write(TRACE)
    assert ingest_file(out, settings=settings).manifest["rows"] == ROWS


def test_a_failure_after_rows_were_written_leaves_nothing(write, settings, tailtune_home):
    """Rows reach the staging folder's Parquet parts before the cut is found; all of it goes."""
    body = b"ts,key\n" + b"".join(b"%d,k%d\n" % (i, i) for i in range(2_500_000))
    data = zstandard.ZstdCompressor(level=1).compress(body)
    p = write("big.csv.zst", data[: len(data) * 9 // 10])
    _rejected(p, settings, tailtune_home, "truncated zstd data")


def test_zstd_frame_asking_for_a_huge_window_is_refused(write, settings, tailtune_home):
    """A frame may declare a window of up to 2 GiB (zstd --long=31); decoding memory stays at 128 MiB at most."""
    import io

    params = zstandard.ZstdCompressionParameters(window_log=30, enable_ldm=True)
    buf = io.BytesIO()
    with zstandard.ZstdCompressor(compression_params=params).stream_writer(buf, closefd=False) as w:
        w.write(BODY * 100)
    p = write("win.csv.zst", buf.getvalue())
    _rejected(p, settings, tailtune_home, "asks for a window larger than 128 MiB")
