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
    from tailtune.base.errors import BadInputError

    p = write("t.csv.gz", gzip.compress(b"ts,key,value_size\n1,a,3\n2,b,-3\n"))
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, settings=settings)
    assert str(exc.value) == f"""{p}:3: field 'value_size': expected non-negative integer, got "-3\""""


def test_same_content_other_compression_is_another_dataset(write, settings):
    a = ingest_file(write("a.csv", BODY), settings=settings)
    b = ingest_file(write("b.csv.gz", gzip.compress(BODY)), settings=settings)
    assert a.id != b.id  # the id is of the source bytes
    assert a.read_table().equals(b.read_table())
