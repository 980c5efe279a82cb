"""The ingest caps: decompressed bytes, compression ratio, rows, line length, columns (ingest/limits.py).

The service path (`ingest_file` without limits) uses the TAILTUNE_INGEST_MAX_* settings; `tailtune ingest` of a
local file uses only the shape caps unless given --max-* or --upload-limits. Every failure names the cap and the
knob that raises it, and leaves nothing behind.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from base.errors import BadInputError
from base.settings import Settings, get_settings
from ingest.pipeline import ingest_file
from tests.ingest.conftest import snapshot


@pytest.fixture
def caps(tailtune_home: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Settings]:
    """caps(MAX_ROWS=10, ...) → settings with those TAILTUNE_INGEST_* variables set."""

    def _caps(**env: int | float) -> Settings:
        for name, value in env.items():
            monkeypatch.setenv(f"TAILTUNE_INGEST_{name}", str(value))
        get_settings.cache_clear()
        return get_settings()

    return _caps


def _rejected(path: Path, settings: Settings, home: Path, *needles: str) -> BadInputError:
    with pytest.raises(BadInputError) as exc:
        ingest_file(path, settings=settings)
    for needle in needles:
        assert needle in str(exc.value), str(exc.value)
    assert snapshot(home) == []
    return exc.value


def _csv(rows: int) -> bytes:
    return b"ts,key,value_size\n" + b"".join(b"%d,key%d,%d\n" % (i, i, i % 500) for i in range(rows))


# --- decompression bombs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["zstd", "gzip"])
def test_a_decompression_bomb_stops_at_the_ratio_cap(write, settings, tailtune_home, codec):
    zeros = bytes(64 << 20)  # 64 MiB of zeros: 8 M keys-bin records from a few KB
    data = zstandard.ZstdCompressor().compress(zeros) if codec == "zstd" else gzip.compress(zeros, 9)
    p = write(f"bomb.{codec}", data)
    err = _rejected(
        p,
        settings,
        tailtune_home,
        "compression ratio above 100:1",
        "(limit TAILTUNE_INGEST_MAX_COMPRESSION_RATIO = 100)",
    )
    assert "TAILTUNE_INGEST_MAX_COMPRESSION_RATIO" in (err.hint or "")


def test_decompressed_bytes_cap(write, caps, tailtune_home):
    settings = caps(MAX_DECOMPRESSED_BYTES=1_000_000)
    gz = write("t.csv.gz", gzip.compress(_csv(100_000)))
    _rejected(
        gz, settings, tailtune_home, "decompresses to more than 1,000,000 bytes", "TAILTUNE_INGEST_MAX_DECOMPRESSED"
    )
    plain = write("t.csv", _csv(100_000))
    _rejected(plain, settings, tailtune_home, f"{plain}: the file has {plain.stat().st_size:,} bytes")


# --- rows ---------------------------------------------------------------------------------------------------


def test_rows_cap_names_the_first_line_beyond_it(write, caps, tailtune_home):
    settings = caps(MAX_ROWS=100)
    p = write("t.csv", _csv(1000))
    _rejected(p, settings, tailtune_home, f"{p}:102: more than 100 rows (limit TAILTUNE_INGEST_MAX_ROWS = 100)")
    assert ingest_file(write("ok.csv", _csv(100)), settings=settings).manifest["rows"] == 100


def test_rows_cap_applies_before_a_sort(write, caps, tailtune_home):
    settings = caps(MAX_ROWS=10)
    p = write("t.csv", b"ts,key\n" + b"".join(b"%d,k%d\n" % (100 - i, i) for i in range(50)))
    with pytest.raises(BadInputError, match="more than 10 rows"):
        ingest_file(p, settings=settings, unsorted="sort")
    assert snapshot(tailtune_home) == []


def test_rows_cap_counts_expanded_rows(write, caps, tailtune_home):
    settings = caps(MAX_ROWS=1000)
    meta = write("meta.csv", "key,op,size,op_count,key_size\na,GET,10,3,1\nb,GET,10,1000000000000000,1\n")
    _rejected(meta, settings, tailtune_home, f"{meta}:3: more than 1,000 rows")
    req = write(
        "req.jsonl", "".join(json.dumps({"ts": i, "keys": [f"k{j}" for j in range(30)]}) + "\n" for i in range(50))
    )
    _rejected(req, settings, tailtune_home, f"{req}:34: more than 1,000 rows")  # 33 requests of 30 keys fit
    keys = write("k.bin", b"".join(i.to_bytes(8, "big") for i in range(2000)))
    _rejected(keys, settings, tailtune_home, f"{keys}:1001: more than 1,000 rows")
    pq_path = tailtune_home.parent / "in" / "t.parquet"
    pq.write_table(pa.table({"ts": list(range(2000)), "key": [f"k{i}" for i in range(2000)]}), pq_path)
    _rejected(pq_path, settings, tailtune_home, f"{pq_path}: the file has 2,000 rows")


def test_meta_kv_op_count_never_expands_into_one_huge_array(write, tailtune_home):
    """Without a row cap (0), a row of op_count 10^18 is refused before numpy would try to allocate it."""
    p = write("meta.csv", "key,op,size,op_count,key_size\na,GET,10,3,1\nb,GET,10,9000000000000000000,1\n")
    from ingest.limits import Limits

    with pytest.raises(BadInputError, match="op_count adds up to more than"):
        ingest_file(p, limits=Limits())
    assert snapshot(tailtune_home) == []


# --- line length --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "head", "line"),
    [
        ("csv", b"ts,key\n1,a\n", b"2,"),
        ("jsonl", b'{"ts": 1, "key": "a"}\n', b'{"ts": 2, "key": "'),
        ("twitter", b"1,a,1,1,c,get,0\n", b"2,"),
        ("tencent-photo", b"20160201164604 a 5 m 1 1 PHONE 3\n", b"20160201164605 "),
        ("meta-kv", b"key,op,size,op_count\na,GET,1,1\n", b"b"),
        ("requests", b"ts,keys\n1,a b\n", b"2,"),
    ],
)
def test_a_line_over_the_cap_fails_as_soon_as_it_is_seen(write, settings, tailtune_home, fmt, head, line):
    p = write(f"long.{fmt}", head + line + b"x" * (3 << 20) + b"\n3,b\n")
    n = head.count(b"\n") + 1
    _rejected(p, settings, tailtune_home, f"{p}:{n}: line longer than 1,048,576 bytes", "TAILTUNE_INGEST_MAX_LINE")


def test_first_line_over_64_kib_is_the_line_cap_not_blank_lines(cli, write, tailtune_home):
    p = write("one-line.csv", b"ts,key," + b"c" * (2 << 20))
    r = cli("ingest", str(p))
    assert r.exit_code == 2
    assert "blank lines" not in r.stderr
    assert f"{p}:1: line longer than 1,048,576 bytes (limit --max-line-bytes = 1,048,576)" in r.stderr
    r = cli("ingest", str(p), "--format", "csv")
    assert f"{p}:1: line longer than 1,048,576 bytes" in r.stderr


def test_first_line_over_64_kib_within_the_cap_is_detected(write, settings):
    p = write("wide.jsonl", json.dumps({"ts": 1, "key": "k" * 100_000}) + "\n" + json.dumps({"ts": 2, "key": "b"}))
    info = ingest_file(p, settings=settings)
    assert info.manifest["source"]["format"] == "jsonl" and info.manifest["rows"] == 2


def test_parquet_values_count_as_lines_and_bytes(tmp_path, caps, tailtune_home):
    """A tiny dictionary repeated many times is counted before it is materialized."""
    settings = caps(MAX_DECOMPRESSED_BYTES=8 << 20)
    big = "v" * (512 << 10)
    p = tmp_path / "in" / "dict.parquet"
    p.parent.mkdir(parents=True)
    pq.write_table(pa.table({"ts": list(range(200)), "key": [big] * 200}), p)
    assert p.stat().st_size < 200_000
    _rejected(p, settings, tailtune_home, "the rows read so far hold", "TAILTUNE_INGEST_MAX_DECOMPRESSED_BYTES")
    long = tmp_path / "in" / "long.parquet"
    pq.write_table(pa.table({"ts": [1, 2], "key": ["a", "v" * (2 << 20)]}), long)
    _rejected(long, settings, tailtune_home, f"{long}:2: field 'key': a value of 2,097,152 bytes")


# --- columns ------------------------------------------------------------------------------------------------


def test_columns_cap(write, settings, tailtune_home, tmp_path):
    wide = b"ts,key," + b",".join(b"c%d" % i for i in range(20_000)) + b"\n1,a" + b",0" * 20_000 + b"\n"
    p = write("wide.csv", wide)
    _rejected(
        p, settings, tailtune_home, f"{p}:1: the header has 20,002 columns", "TAILTUNE_INGEST_MAX_COLUMNS = 1,024"
    )
    obj = {"ts": 1, "key": "a", **{f"c{i}": i for i in range(2000)}}
    j = write("wide.jsonl", json.dumps(obj) + "\n")
    _rejected(j, settings, tailtune_home, f"{j}:1: the first object has 2,002 columns")
    pq_path = tmp_path / "in" / "wide.parquet"
    pq.write_table(pa.table({"ts": [1.0], "key": ["a"], **{f"c{i}": [i] for i in range(1100)}}), pq_path)
    _rejected(pq_path, settings, tailtune_home, f"{pq_path}: the Parquet schema has 1,102 columns")


# --- the command line ---------------------------------------------------------------------------------------


def test_cli_local_file_has_no_amount_caps_by_default(cli, write, caps, tailtune_home):
    """A local file is the operator's own: the upload caps on rows, bytes and ratio do not apply to it."""
    caps(MAX_ROWS=10, MAX_DECOMPRESSED_BYTES=100, MAX_COMPRESSION_RATIO=1.5)
    p = write("t.csv.gz", gzip.compress(_csv(1000)))
    r = cli("ingest", str(p), "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == 1000


def test_cli_caps_and_upload_limits(cli, write, caps, tailtune_home):
    caps(MAX_ROWS=10)
    p = write("t.csv", _csv(100))
    r = cli("ingest", str(p), "--upload-limits")
    assert r.exit_code == 2 and f"{p}:12: more than 10 rows (limit --max-rows = 10)" in r.stderr
    r = cli("ingest", str(p), "--max-rows", "50")
    assert r.exit_code == 2 and f"{p}:52: more than 50 rows (limit --max-rows = 50)" in r.stderr
    assert "raise it with --max-rows N (0: no limit)" in r.stderr
    r = cli("ingest", str(p), "--upload-limits", "--max-rows", "0")
    assert r.exit_code == 0, r.stderr
    assert snapshot(tailtune_home)  # a dataset now


def test_cli_size_options(cli, write, tailtune_home):
    p = write("t.csv.gz", gzip.compress(_csv(10_000)))
    r = cli("ingest", str(p), "--max-decompressed-bytes", "64K")
    assert r.exit_code == 2 and "decompresses to more than 65,536 bytes" in r.stderr
    assert "(limit --max-decompressed-bytes = 65,536)" in r.stderr
    r = cli("ingest", str(p), "--max-line-bytes", "12Q")
    assert r.exit_code == 2 and "field '--max-line-bytes': expected a size in bytes" in r.stderr
    r = cli("ingest", str(p), "--max-rows", "-1")
    assert r.exit_code == 2 and "must be >= 0" in r.stderr
    assert snapshot(tailtune_home) == []


@pytest.mark.parametrize(
    ("text", "value"), [("1048576", 1 << 20), ("64K", 64 << 10), ("16GiB", 16 << 30), ("1.5g", 3 << 29), ("0", 0)]
)
def test_parse_size(text: str, value: int) -> None:
    from ingest.limits import parse_size

    assert parse_size(text, "--x") == value


def test_limits_from_settings_defaults() -> None:
    from ingest.limits import Limits

    lim = Limits.from_settings(Settings())
    assert (lim.max_decompressed_bytes, lim.max_compression_ratio, lim.max_rows) == (16 << 30, 100.0, 100_000_000)
    assert (lim.max_line_bytes, lim.max_columns) == (1 << 20, 1024)
    local = Limits.local(Settings())
    assert (local.max_decompressed_bytes, local.max_compression_ratio, local.max_rows) == (0, 0, 0)
    assert (local.max_line_bytes, local.max_columns) == (1 << 20, 1024)
