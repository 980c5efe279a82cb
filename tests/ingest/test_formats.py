"""Each format on a small hand-worked file: exact canonical rows out."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ingest.pipeline import ingest_file
from ingest.sniff import sniff
from ingest.store import DatasetInfo


def rows(info: DatasetInfo, *cols: str) -> list[tuple[Any, ...]]:
    t = info.read_table()
    return list(zip(*(t.column(c).to_pylist() for c in cols), strict=True))


def test_csv_canonical_with_request_ids(write, settings):
    p = write("t.csv", "request_id,ts,key,value_size,op\n7,1.5,a,10,get\n7,1.5,b,,get\n9,2.0,a,10,set\n")
    info = ingest_file(p, settings=settings)
    assert rows(info, "request_id", "ts", "key", "value_size", "op") == [
        (7, 1.5, "a", 10, "get"),
        (7, 1.5, "b", None, "get"),
        (9, 2.0, "a", 10, "set"),
    ]
    m = info.manifest
    assert (m["rows"], m["requests"], m["distinct_keys"]) == (3, 2, 2)
    assert (m["ts_min"], m["ts_max"], m["multiget"]) == (1.5, 2.0, {"mean": 1.5, "max": 2})
    assert m["columns"] == ["request_id", "ts", "key", "value_size", "op"]
    assert m["has_value_size"] and not m["has_latency"]
    assert info.read_table().schema.field("request_id").type == pa.int64()


def test_csv_without_request_id_is_one_key_per_request(write, settings):
    info = ingest_file(write("t.csv", "ts,key\n1,a\n1,b\n2,a\n"), settings=settings)
    assert rows(info, "request_id", "ts", "key", "value_size") == [
        (0, 1.0, "a", None),
        (1, 1.0, "b", None),
        (2, 2.0, "a", None),
    ]
    assert info.manifest["has_value_size"] is False


def test_map_renames_columns_and_changes_the_id(write, settings):
    p = write("m.csv", "time,object,bytes,other\n1,a,5,x\n2,b,6,y\n")
    info = ingest_file(p, mapping={"time": "ts", "object": "key", "bytes": "value_size"}, settings=settings)
    assert rows(info, "ts", "key", "value_size") == [(1.0, "a", 5), (2.0, "b", 6)]
    assert info.manifest["notes"] == ["ignored columns: other"]
    assert info.manifest["ingest_options"]["mapping"] == {"bytes": "value_size", "object": "key", "time": "ts"}


def test_tsv(write, settings):
    p = write("t.tsv", "ts\tkey\tvalue_size\n1\ta b\t3\n")
    assert sniff(p).format == "tsv"
    assert rows(ingest_file(p, settings=settings), "key", "value_size") == [("a b", 3)]


def test_jsonl(write, settings):
    p = write(
        "t.jsonl",
        '{"request_id": 1, "ts": 0.5, "key": "a", "value_size": 4}\n\n{"request_id": 1, "ts": 0.5, "key": 5}\n',
    )
    assert sniff(p).format == "jsonl"
    assert rows(ingest_file(p, settings=settings), "request_id", "ts", "key", "value_size") == [
        (1, 0.5, "a", 4),
        (1, 0.5, "5", None),
    ]


def test_jsonl_error_names_the_physical_line(write, settings):
    from tailtune.base.errors import BadInputError

    p = write("t.jsonl", '{"ts": 1, "key": "a"}\n\n{"ts": 2, "key": "b", "value_size": -3}\n{oops\n')
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, settings=settings)
    assert [str(x) for x in exc.value.problems] == [
        f"""{p}:3: field 'value_size': expected non-negative integer, got "-3\"""",
        f"{p}:4: invalid JSON: Expecting property name enclosed in double quotes at column 2",
    ]


def test_parquet(tmp_path, settings):
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"ts": [1.0, 2.0], "k": ["a", "b"], "value_size": [3, None]}), p)
    assert sniff(p).format == "parquet"
    info = ingest_file(p, mapping={"k": "key"}, settings=settings)
    assert rows(info, "request_id", "key", "value_size") == [(0, "a", 3), (1, "b", None)]


def test_parquet_negative_size_names_the_row(tmp_path, settings):
    from tailtune.base.errors import BadInputError

    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"ts": [1.0, 2.0], "key": ["a", "b"], "value_size": [3, -3]}), p)
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, settings=settings)
    assert str(exc.value) == f"""{p}:2: field 'value_size': expected non-negative integer, got "-3\""""


def test_requests_csv_space_separated(write, settings):
    p = write("r.csv", "ts,keys,sizes,client_id\n1.0,a b c,1 2 3,x\n2.0,d,,y\n")
    assert sniff(p).format == "requests"
    info = ingest_file(p, settings=settings)
    assert rows(info, "request_id", "ts", "key", "value_size", "client_id") == [
        (0, 1.0, "a", 1, "x"),
        (0, 1.0, "b", 2, "x"),
        (0, 1.0, "c", 3, "x"),
        (1, 2.0, "d", None, "y"),
    ]
    assert info.manifest["multiget"] == {"mean": 2.0, "max": 3}


def test_requests_jsonl_arrays(write, settings):
    lines = [
        {"ts": 1, "keys": ["a", "b"], "sizes": [10, 20], "request_id": 5},
        {"ts": 2, "keys": [7], "request_id": 6},
    ]
    p = write("r.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    assert sniff(p).format == "requests"
    info = ingest_file(p, settings=settings)
    assert info.manifest["source"]["layout"] == "jsonl"
    assert rows(info, "request_id", "key", "value_size") == [(5, "a", 10), (5, "b", 20), (6, "7", None)]


def test_requests_size_count_mismatch(write, settings):
    from tailtune.base.errors import BadInputError

    p = write("r.csv", 'ts,keys,sizes\n1,"[""a"",""b""]",[1]\n')
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, settings=settings)
    assert str(exc.value) == f"{p}:2: field 'sizes': 1 sizes for 2 keys"


def test_twitter_key_with_commas(write, settings):
    p = write("tw.csv", "10,ns:a,5,100,3,get,0\n11,ns:b,c,6,0,4,set,3600\n")
    assert sniff(p).format == "twitter"
    info = ingest_file(p, settings=settings)
    assert rows(info, "request_id", "ts", "key", "value_size", "client_id", "op") == [
        (0, 10.0, "ns:a", 100, "3", "get"),
        (1, 11.0, "ns:b,c", 0, "4", "set"),
    ]


def test_meta_kv_202206_synthesizes_ts_and_expands_op_count(write, settings):
    p = write("kv.csv", "key,op,size,op_count,key_size\n11,GET,0,2,40\n12,SET,82,1,40\n")
    assert sniff(p).format == "meta-kv"
    info = ingest_file(p, rate=100.0, settings=settings)
    assert info.manifest["source"]["layout"] == "202206"
    assert info.manifest["ingest_options"]["rate"] == 100.0
    assert rows(info, "request_id", "ts", "key", "value_size", "op") == [
        (0, 0.0, "11", None, "get"),
        (1, 0.01, "11", None, "get"),
        (2, 0.02, "12", 82, "set"),
    ]


def test_meta_kv_202210_uses_op_time(write, settings):
    p = write("kv.csv", "op_time,key,key_size,op,op_count,size,cache_hits,ttl\n5,k,8,GET,3,9,3,0\n")
    info = ingest_file(p, settings=settings)
    assert info.manifest["source"]["layout"] == "202210"
    assert "rate" not in info.manifest["ingest_options"]
    assert rows(info, "request_id", "ts", "value_size") == [(0, 5.0, 9), (1, 5.0, 9), (2, 5.0, 9)]


def test_keys_bin(write, settings):
    data = b"".join(k.to_bytes(8, "big", signed=True) for k in (5, -1, 5))
    p = write("k.trace", data)
    assert sniff(p).format == "keys-bin"
    info = ingest_file(p, rate=2.0, settings=settings)
    assert rows(info, "request_id", "ts", "key", "value_size") == [
        (0, 0.0, "5", None),
        (1, 0.5, "-1", None),
        (2, 1.0, "5", None),
    ]
    assert info.manifest["distinct_keys"] == 2


def test_tencent_photo(write, settings):
    p = write("t.txt", "20160201164604 abc 5 m 12903 1 PHONE 3\n20160201164605 abc 0 a 10 0 PC 0\n")
    assert sniff(p).format == "tencent-photo"
    info = ingest_file(p, settings=settings)
    assert rows(info, "ts", "key", "value_size", "client_id", "latency_us", "op") == [
        (1454345164.0, "abc:5", 12903, "PHONE", 3000.0, "get"),
        (1454345165.0, "abc:0", 10, "PC", 0.0, "get"),
    ]


def test_tencent_bad_timestamp(write, settings):
    from tailtune.base.errors import BadInputError

    p = write("t.txt", "20160201164604 abc 5 m 1 1 PHONE 3\n2016020116460X abc 5 m 1 1 PHONE 3\n")
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, fmt="tencent-photo", settings=settings)
    assert str(exc.value) == f"{p}:2: field 'ts': expected a YYYYMMDDHHMMSS timestamp, got \"2016020116460X\""


@pytest.mark.parametrize("block_bytes", [64, 1000, 1 << 20])
def test_line_numbers_exact_across_blocks(write, block_bytes):
    import numpy as np

    from ingest.formats import reader_class
    from ingest.formats.base import ReaderOptions
    from ingest.formats.source import Source
    from ingest.validate import ErrorPolicy, ErrorSink

    lines = ["ts,key,value_size"] + [f"{i},k{i},{i}" for i in range(200)]
    lines[57] = "56,k56"  # line 58: a column short
    lines[150] = "149,k149,-1"  # line 151
    lines[151] = ""  # line 152: empty
    p = write("many.csv", "\n".join(lines) + "\n")
    sink = ErrorSink(str(p), max_errors=100, policy=ErrorPolicy.SKIP)
    reader = reader_class("csv")(Source.of(p), ReaderOptions(block_bytes=block_bytes), sink)
    reader.columns()
    chunks = list(reader.chunks())
    sink.finish()
    assert [str(x) for x in sink.problems] == [
        f"{p}:58: expected 3 columns, got 2",
        f"""{p}:151: field 'value_size': expected non-negative integer, got "-1\"""",
        f"{p}:152: field 'ts': missing value",
        f"{p}:152: field 'key': missing value",
    ]
    kept = np.concatenate([c.lines for c in chunks]).tolist()
    assert kept == [n for n in range(2, 202) if n not in (58, 151, 152)]
    keys = [k for c in chunks for k in c.batch.column("key").to_pylist()]
    assert keys == [f"k{n - 2}" for n in kept]
    assert sink.skipped_rows == 3
