"""Inputs that can never succeed fail with BadInputError (exit 2, file/line/field), never an internal exception.

One class per format family: typed Parquet columns of the wrong kind and corrupt pages, JSON nested too deep or
with numbers too long to convert, CSV rows Arrow cannot split (unterminated quotes, stray carriage returns, bad
rows in invalid UTF-8), binary garbage given as a text format, text in encodings other than UTF-8, archives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.ingest.conftest import snapshot

FORMATS = ("csv", "tsv", "jsonl", "requests", "twitter", "meta-kv", "tencent-photo")


def _fails(cli: Any, home: Path, path: Path, *args: str) -> str:
    before = snapshot(home)
    r = cli("ingest", str(path), *args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert snapshot(home) == before
    return str(r.stderr)


def _parquet(path: Path, table: pa.Table, **kwargs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)
    return path


# --- Parquet ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "values", "kind"),
    [
        ("ts", pa.array([[1.0], [2.0]]), "list<"),
        ("key", pa.array([{"a": 1}, {"a": 2}]), "struct<"),
        ("ts", pa.array([0, 1], type=pa.timestamp("s")), "timestamp"),  # the CLI shows "[s]" as markup
        ("value_size", pa.array([True, False]), "bool"),
        ("key", pa.array([1.5, 2.5]), "double"),
    ],
)
def test_parquet_column_of_an_unsupported_type(cli, tmp_path, tailtune_home, column, values, kind):
    cols = {"ts": pa.array([1.0, 2.0]), "key": pa.array(["a", "b"])}
    cols[column] = values
    p = _parquet(tmp_path / "in" / "t.parquet", pa.table(cols))
    err = _fails(cli, tailtune_home, p)
    assert f"{p}: field '{column}': column '{column}' has type {kind}" in err


def test_parquet_with_a_corrupt_page(cli, tmp_path, tailtune_home):
    n = 50_000
    table = pa.table({"ts": pa.array(range(n), pa.float64()), "key": pa.array([f"k{i}" for i in range(n)])})
    p = _parquet(tmp_path / "in" / "t.parquet", table, compression="zstd", use_dictionary=False)
    data = bytearray(p.read_bytes())
    for i in range(200, len(data) // 2, 997):  # data pages, not the footer
        data[i] ^= 0xA5
    p.write_bytes(bytes(data))
    err = _fails(cli, tailtune_home, p)
    assert f"{p}:" in err and "Parquet" in err


# --- JSON ---------------------------------------------------------------------------------------------------


def test_jsonl_nested_100000_deep_on_the_first_line(cli, write, tailtune_home):
    p = write("deep.jsonl", '{"ts": 1, "key": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    err = _fails(cli, tailtune_home, p, "--format", "jsonl")
    assert f"{p}:1: invalid JSON: nested too deeply" in err
    _fails(cli, tailtune_home, p)  # format detection too


def test_jsonl_nested_100000_deep_on_a_later_line(cli, write, tailtune_home):
    p = write("deep.jsonl", '{"ts": 1, "key": "a"}\n{"ts": 2, "key": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    assert f"{p}:2: invalid JSON: nested too deeply" in _fails(cli, tailtune_home, p)


def test_jsonl_integer_too_long_to_convert(cli, write, tailtune_home):
    p = write("long.jsonl", '{"ts": 1, "key": "a"}\n{"ts": 2, "key": "b", "value_size": ' + "9" * 5000 + "}\n")
    assert f"{p}:3:" not in (err := _fails(cli, tailtune_home, p))
    assert f"{p}:2: invalid JSON" in err


def test_requests_with_keys_nested_too_deep_and_odd_sizes(cli, write, tailtune_home):
    deep = "[" * 100_000 + "]" * 100_000
    lines = [
        json.dumps({"ts": 1, "keys": ["a", "b"], "sizes": [1, 2]}),
        '{"ts": 2, "keys": ' + json.dumps(deep) + "}",
        json.dumps({"ts": 3, "keys": ["a"], "sizes": ["²"]}),
        json.dumps({"ts": 4, "keys": ["a"], "sizes": ["9" * 5000]}),
        json.dumps({"ts": 5, "keys": ["a"], "sizes": [2**70]}),
    ]
    p = write("r.jsonl", "\n".join(lines) + "\n")
    err = _fails(cli, tailtune_home, p, "--format", "requests")
    assert f"{p}:2: field 'keys': expected a JSON array or space-separated keys" in err
    for line in (3, 4, 5):
        assert f"{p}:{line}: field 'sizes': expected non-negative integer" in err


def test_csv_integer_too_long_to_convert(cli, write, tailtune_home):
    p = write("long.csv", "ts,key,value_size\n1,a,3\n2,b," + "9" * 5000 + "\n")
    assert f"{p}:3: field 'value_size': expected non-negative integer" in _fails(cli, tailtune_home, p)


# --- rows Arrow cannot split one per line -------------------------------------------------------------------


def test_unterminated_quote_is_reported_not_merged_with_the_next_lines(cli, write, tailtune_home):
    p = write("q.csv", 'ts,key\n1,a\n2,"b\n3,c\n4,d\n')
    err = _fails(cli, tailtune_home, p)
    assert f"{p}:3: unterminated quoted value" in err
    r = cli("ingest", str(p), "--on-error", "skip", "--json")
    assert r.exit_code == 0, r.stderr
    from ingest.store import DatasetStore

    info = DatasetStore().get(json.loads(r.stdout)["id"])
    assert info.read_table().column("key").to_pylist() == ["a", "c", "d"]


def test_carriage_return_inside_a_line(cli, write, tailtune_home):
    p = write("cr.csv", b"ts,key\n1,a\n2,b\r3,c\n4,d\r\n")
    assert f"{p}:3: carriage return" in _fails(cli, tailtune_home, p)


def test_bad_row_in_invalid_utf8(cli, write, tailtune_home):
    p = write("bad.csv", b"ts,key,value_size\n1,a,1\n2,\xff\xfe,3,4\n3,c,1\n")
    assert f"{p}:3: expected 3 columns, got 4" in _fails(cli, tailtune_home, p)


@pytest.mark.parametrize("fmt", FORMATS)
def test_binary_garbage_given_as_a_text_format(cli, write, tailtune_home, fmt):
    import random

    rng = random.Random(7)
    garbage = bytes(rng.getrandbits(8) for _ in range(200_000))
    header = {"csv": b"ts,key\n", "tsv": b"ts\tkey\n", "meta-kv": b"key,op,size,op_count\n"}.get(fmt, b"")
    p = write(f"garbage.{fmt}", header + garbage)
    err = _fails(cli, tailtune_home, p, "--format", fmt)
    assert f"{p}" in err


# --- encodings and files that are no trace ------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_text_in_another_encoding_is_refused_clearly(cli, write, tailtune_home, encoding):
    body = "ts,key,value_size\n" + "".join(f"{i},key{i},{i}\n" for i in range(50))
    p = write("wide.csv", body.encode(encoding))
    err = _fails(cli, tailtune_home, p)
    assert "UTF-16" in err or "UTF-32" in err
    assert "convert" in err or "use UTF-8" in err
    assert "UTF-" in _fails(cli, tailtune_home, p, "--format", "csv")


def test_utf8_byte_order_mark_is_accepted(cli, write, tailtune_home):
    p = write("bom.csv", "\ufeffts,key,value_size\n1,a,3\n".encode())
    r = cli("ingest", str(p), "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["format"] == "csv"


def test_archives_and_other_files_are_named(cli, write, tailtune_home, tmp_path):
    import zipfile

    z = tmp_path / "in" / "trace.zip"
    z.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("trace.csv", "ts,key\n" + "".join(f"{i},k{i}\n" for i in range(1000)))
    assert "this is a ZIP archive: unpack it" in _fails(cli, tailtune_home, z)
    png = write("x.png", b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert "this is a PNG image, not a trace" in _fails(cli, tailtune_home, png)


# --- nothing half-written -----------------------------------------------------------------------------------


def test_a_failure_during_a_sort_leaves_no_staging_folder_while_the_error_is_alive(write, settings, tailtune_home):
    """The sort's staging folder goes when the ingest fails, not when the traceback is garbage-collected."""
    from base.errors import BadInputError
    from ingest.pipeline import ingest_file

    p = write("again.csv", "request_id,ts,key\n0,1,a\n1,2,b\n0,3,c\n")
    with pytest.raises(BadInputError, match="appears again") as exc:
        ingest_file(p, settings=settings, unsorted="sort")
    assert exc.value.__traceback__ is not None  # still referenced here
    assert snapshot(tailtune_home) == []
