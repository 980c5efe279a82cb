"""Each format on a small hand-worked file: exact canonical rows out."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from base.errors import BadInputError
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
    from base.errors import BadInputError

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
    from base.errors import BadInputError

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
    from base.errors import BadInputError

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
    from base.errors import BadInputError

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


# --- memcached-watch -----------------------------------------------------------------------------------------
def _get(us: int, gid: int, key: str, cfd: int, size: int | None = None, server: str = "") -> str:
    """An item_get line as memcached 1.6.18 prints it (ts=100.<us>: microseconds unpadded); size None: a miss."""
    status = "found" if size is not None else "not_found"
    head = f"server={server} " if server else ""
    return f"{head}ts=100.{us} gid={gid} type=item_get key={key} status={status} clsid=1 cfd={cfd} size={size or 0}\n"


def _store(us: int, gid: int, key: str, cfd: int, status: str = "stored") -> str:
    return f"ts=100.{us} gid={gid} type=item_store key={key} status={status} cmd=set ttl=0 clsid=1 cfd={cfd} size=3\n"


def _requests(info: DatasetInfo) -> list[tuple[float, str, list[str], list[int | None]]]:
    """(ts, client, keys, sizes) of each request, in dataset order."""
    out: list[tuple[float, str, list[str], list[int | None]]] = []
    last = None
    for rid, ts, key, size, client in rows(info, "request_id", "ts", "key", "value_size", "client_id"):
        if rid != last:
            out.append((ts, client, [], []))
            last = rid
        out[-1][2].append(key)
        out[-1][3].append(size)
    return out


#: Two connections (cfd 20 and 21) served by two threads: memcached prints their lines out of time order.
WATCH = (
    "OK\n"
    + _get(10, 1, "a", 20, 5)
    + _get(11, 3, "b", 20)  # a miss: no value size
    + _get(9, 2, "x", 21, 7)  # cfd 21, logged before cfd 20's get but printed after
    + _get(12, 4, "user%3A1", 20, 9)  # URI-encoded by memcached
    + _get(20, 5, "d", 20, 1)  # 8 µs after the previous fetch of cfd 20: a new request
    + _get(21, 6, "d", 20, 1)  # the same key again: a new request
    + _get(22, 7, "e", 20)  # `set e`: its lookup ...
    + _store(23, 8, "e", 20)  # ... and its store: neither is a request
    + _get(24, 9, "e", 20, 3)
    + _get(25, 10, "f", 20, 4)
    + "ts=100.30 gid=11 type=eviction key=z fetch=no ttl=0 la=1 clsid=1 size=10\n"
    + _store(40, 12, "g", 20, "too_large")  # a set too large: its store first, then its lookup
    + _get(41, 13, "g", 20)
    + _get(42, 14, "h", 20, 2)
    + "skipped=2\n"
    + _get(200, 17, "x", 21, 7)
)


def test_memcached_watch_groups_fetches_into_requests(write, settings):
    p = write("mc.watch", WATCH)
    assert sniff(p).format == "memcached-watch"
    info = ingest_file(p, settings=settings)
    assert _requests(info) == [
        (100.000009, "21", ["x"], [7]),
        (100.00001, "20", ["a", "b", "user:1"], [5, None, 9]),
        (100.00002, "20", ["d"], [1]),
        (100.000021, "20", ["d"], [1]),
        (100.000024, "20", ["e", "f"], [3, 4]),
        (100.000042, "20", ["h"], [2]),
        (100.0002, "21", ["x"], [7]),
    ]
    assert set(rows(info, "op")) == {("get",)}
    m = info.manifest
    assert (m["source"]["format"], m["requests"], m["rows"], m["sorted_on_ingest"]) == ("memcached-watch", 7, 10, True)
    assert m["ingest_options"]["watch_gap_us"] == 3 and m["ingest_options"]["unsorted"] == "sort"
    notes = "\n".join(m["notes"])
    assert "2 store line(s) and the 2 lookup(s) they logged left out" in notes
    assert "lines of other types skipped (eviction: 1)" in notes
    assert "LOST: the watch lost 2 line(s) (memcached skipped 2, its worker threads dropped 0)" in notes


def test_memcached_watch_ts_microseconds_are_unpadded(write, settings):
    # memcached prints ts=%d.%d: 1700000000.5042 is 5042 µs past the second, not half a second
    p = write("ts.watch", "ts=1700000000.5042 gid=1 type=item_get key=k status=found clsid=1 cfd=9 size=1\n")
    assert rows(ingest_file(p, settings=settings), "ts") == [(1700000000.005042,)]


def test_memcached_watch_gap_decides_the_grouping_and_the_dataset(write, settings, cli):
    p = write("mc.watch", WATCH)
    default = ingest_file(p, settings=settings)
    wide = ingest_file(p, watch_gap_us=10, settings=settings)
    assert wide.id != default.id and wide.manifest["ingest_options"]["watch_gap_us"] == 10
    assert _requests(wide)[1] == (100.00001, "20", ["a", "b", "user:1", "d"], [5, None, 9, 1])
    r = cli("ingest", str(p), "--watch-gap-us", "10", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["id"] == wide.id
    r = cli("ingest", str(write("t.csv", "ts,key\n1,a\n")), "--watch-gap-us", "10")
    assert r.exit_code == 2 and "--watch-gap-us applies to memcached-watch logs only, not to csv" in r.stderr


def test_memcached_watch_servers_keep_their_connections_apart(write, settings):
    # a capture of two servers: the same cfd on each is two connections
    text = "".join(
        _get(us, us, key, 20, 1, server)
        for us, key, server in ((1, "a", "h1:11211"), (1, "b", "h2:11211"), (2, "c", "h1:11211"))
    )
    info = ingest_file(write("two.watch", text), settings=settings)
    assert [(c, k) for _, c, k, _ in _requests(info)] == [("h1:11211/20", ["a", "c"]), ("h2:11211/20", ["b"])]


def test_memcached_watch_bad_lines_name_line_and_field(write, settings):
    text = (
        "OK\n"
        + _get(1, 1, "a", 20, 1)
        + "ts=100.2 gid=2 type=item_get key=b status=found clsid=1 cfd=20 size=x\n"
        + "ts=100.3 gid=3 type=item_get key=c status=found clsid=1 size=1\n"
        + "ts=100.1234567 gid=4 type=item_get key=d status=found clsid=1 cfd=20 size=1\n"
        + "VALUE a 0 1\n"
        + "ts=100.5 gid=5 type=item_get key=caf\xc3\xa9 status=found clsid=1 cfd=20 size=1\n"
        + "skipped=many\n"
    )
    p = write("bad.watch", text.encode("latin-1"))
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, fmt="memcached-watch", settings=settings)
    assert [str(x) for x in exc.value.problems] == [
        f"{p}:3: field 'size': expected a non-negative integer, got \"x\"",
        f"{p}:4: field 'cfd': missing",
        f"{p}:5: field 'ts': expected <seconds>.<microseconds> (memcached's ts=%d.%d), got \"100.1234567\"",
        f"{p}:6: not a memcached watch line (expected ts=… gid=… type=…, skipped=N or dropped=N), got \"VALUE a 0 1\"",
        f"{p}:7: byte 0xc3 at offset 36: watch lines are ASCII (keys are URI-encoded)",
        f"{p}:8: field 'skipped': expected a non-negative integer, got \"many\"",
    ]
    info = ingest_file(p, fmt="memcached-watch", on_error="skip", settings=settings)
    assert rows(info, "key") == [("a",)]
    assert info.manifest["errors"]["skipped_rows"] == 6


def test_memcached_watch_before_1_6_11_has_no_sizes(write, settings):
    # memcached 1.5.17 .. 1.6.10 log the connection but not the value's size
    text = "ts=100.1 gid=1 type=item_get key=a status=found clsid=1 cfd=9\n"
    text += "ts=100.2 gid=2 type=item_get key=b status=found clsid=1 cfd=9\n"
    info = ingest_file(write("old.watch", text), settings=settings)
    assert rows(info, "request_id", "key", "value_size") == [(0, "a", None), (0, "b", None)]
    assert info.manifest["has_value_size"] is False


# --- tailtune-client -----------------------------------------------------------------------------------------
def _client_header(records: int, **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "tailtune.client.capture/1", "client": {"name": "tailtune-client", "id": "c-1"},
        "kind": "memcached", "tables": False, "servers": ["h1:11211", "h2:11211"], "hashing": "rendezvous-murmur3",
        "key_form": "plain", "sample_rate": 0.5, "window": {"start": 100.0, "end": 160.0}, "records": records,
        "dropped": {"memory": 0, "bandwidth": 0, "unkeyed": 0},
    }
    doc.update(over)
    return doc


def _client_request(ts: float, keys: list[str], sizes: list[int | None], **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"ts": ts, "op": "get", "keys": keys, "sizes": sizes, "servers": [0] * len(keys),
                           "latency_us": 120.5, "config_version": 3, "failed": False}
    doc.update(over)
    return doc


def _lines(*docs: dict[str, Any]) -> str:
    return "".join(json.dumps(d) + "\n" for d in docs)


def test_tailtune_client_uploads_are_requests_of_their_clients(write, settings):
    first = _lines(_client_header(3), _client_request(101.0, ["a", "b", "c"], [5, None, 7]),
                   _client_request(103.0, ["a"], [5], op="set"), _client_request(105.0, ["d"], [9], latency_us=None))
    second = _lines(_client_header(1, client={"id": "c-2"}, dropped={"memory": 2, "bandwidth": 1, "unkeyed": 0}),
                    _client_request(102.0, ["e", "f"], [1, 2], servers=[1, 0]))
    p = write("cap.ttc", first + second)
    assert sniff(p).format == "tailtune-client"
    info = ingest_file(p, settings=settings)
    assert rows(info, "ts", "key", "value_size", "client_id", "latency_us") == [
        (101.0, "a", 5, "c-1", 120.5), (101.0, "b", None, "c-1", 120.5), (101.0, "c", 7, "c-1", 120.5),
        (102.0, "e", 1, "c-2", 120.5), (102.0, "f", 2, "c-2", 120.5), (105.0, "d", 9, "c-1", None),
    ]
    m = info.manifest
    assert (m["requests"], m["rows"], m["sorted_on_ingest"]) == (3, 6, True)
    assert "table" not in m["columns"] and set(rows(info, "op")) == {("get",)}
    notes = "\n".join(m["notes"])
    assert "2 client(s) recorded them before reshaping them, in 2 upload(s); sampled at rate 0.5" in notes
    assert "1 write request(s) left out" in notes
    assert "LOST: the clients dropped 3 sampled request(s) (memory cap 2, bandwidth cap 1, without keys 0)" in notes


def test_tailtune_client_bad_lines_name_line_and_field(write, settings):
    text = _lines(
        _client_header(8),
        _client_request(1.0, ["a"], [1]),
        _client_request(-1.0, ["b"], [1]),
        _client_request(1.0, ["c", "d"], [1]),
        _client_request(1.0, ["e"], [1], servers=[2]),
        _client_request(1.0, ["f"], [1], config_version="3"),
        _client_request(1.0, [], []),
        _client_request(1.0, ["g"], [1], extra=1),
        _client_request(1.0, ["h"], [1], table="ks.t"),
    )
    p = write("bad.ttc", text)
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, fmt="tailtune-client", settings=settings)
    assert [str(x) for x in exc.value.problems] == [
        f"{p}:3: field 'ts': expected a finite number >= 0, got '-1.0'",
        f"{p}:4: field 'sizes': expected a list of 2 sizes (one per key; null for a miss)",
        f"{p}:5: field 'servers[0]': expected an integer from 0 to 1, got '2'",
        f"{p}:6: field 'config_version': expected an integer from 0 to 2147483647, got '3'",
        f"{p}:7: field 'keys': expected a non-empty list of keys",
        f"{p}:8: field 'extra': not a field of a request",
        f"{p}:9: field 'table': the header declares no tables (tables: false)",
    ]
    info = ingest_file(p, fmt="tailtune-client", on_error="skip", settings=settings)
    assert rows(info, "key") == [("a",)] and info.manifest["errors"]["skipped_rows"] == 7


@pytest.mark.parametrize(("header", "line", "field", "problem"), [
    (_client_header(0, schema="tailtune.client.capture/9"), 1, "schema", "expected 'tailtune.client.capture/1'"),
    (_client_header(0, sample_rate=0), 1, "sample_rate", "expected a number > 0 and <= 1"),
    (_client_header(0, key_form="md5"), 1, "key_form", "expected one of plain, hmac-sha256"),
    (_client_header(0, dropped={"memory": -1}), 1, "dropped.memory", "expected an integer from 0"),
    (_client_header(2), 1, "records", "the header announces 2 request line(s), 1 follow"),
])
def test_tailtune_client_bad_headers_are_fatal(write, settings, header, line, field, problem):
    p = write("head.ttc", _lines(header, _client_request(1.0, ["a"], [1])) if field == "records" else _lines(header))
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, fmt="tailtune-client", settings=settings)
    last = exc.value.problems[-1]
    assert (last.line, last.field) == (line, field) and problem in last.problem, str(last)
    p = write("nohead.ttc", _lines(_client_request(1.0, ["a"], [1])))
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, fmt="tailtune-client", settings=settings)
    assert "the first line must be a header" in str(exc.value.problems[-1])
