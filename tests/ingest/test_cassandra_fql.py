"""The full query log formats without a server: the text of `fqltool dump` (hand-worked records in Dump.java's
layout; fqltool is not in the Cassandra jars the setup fetches, so the text is written here by
`tests/ingest/samples.py:fql_dump`, the layout's rules read from Dump.java), the partition keys of every common
type, the grouping rule, the options, and `FILE:LINE: field` errors with nothing written."""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from base.errors import BadInputError, TailtuneError
from base.settings import Settings
from ingest.formats.cassandra_fql import cql
from ingest.formats.cassandra_fql.keys import ValueProblem, compose, decode, from_literal, split_collection
from ingest.pipeline import ingest_file
from tests.ingest.conftest import snapshot
from tests.ingest.samples import fql_dump

SCHEMA = """CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '1'};

CREATE TABLE ks.t (
    k text PRIMARY KEY,
    v blob
) WITH compaction = {'class': 'SizeTieredCompactionStrategy'}
    AND comment = 'a ; in a string';

CREATE TABLE ks.i (k int, c int, v text, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC);

CREATE TABLE IF NOT EXISTS ks."Comp" (
    "A" bigint,
    b uuid,
    c frozen<tuple<int, text>>,
    PRIMARY KEY (("A", b), c)
);
"""
T0 = 1_700_000_000_000


def _lv(items: list[bytes]) -> bytes:
    """A serialized list (what a driver binds to `IN ?`)."""
    return struct.pack(">i", len(items)) + b"".join(struct.pack(">i", len(x)) + x for x in items)


def q(ms: int, query: str, *values: bytes | None) -> dict[str, Any]:
    return {"type": "single-query", "start_ms": T0 + ms, "statements": [(query, list(values))]}


@pytest.fixture
def schema(tmp_path: Path) -> Path:
    path = tmp_path / "schema.cql"
    path.write_text(SCHEMA)
    return path


def _ingest(path: Path, schema: Path, settings: Settings, **kw: Any) -> list[tuple[int, float, str, str, str]]:
    info = ingest_file(path, schema_file=schema, settings=settings, **kw)
    return [
        (r["request_id"], round(r["ts"] - T0 / 1000, 3), r["key"], r["op"], r["table"])
        for r in info.read_table().to_pylist()
    ]


def test_a_dump_becomes_its_requests(write, schema, settings):
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    records = [
        q(0, "SELECT * FROM ks.t WHERE k IN ('a', 'b''c', $$d$$)"),
        q(1, "SELECT *\nFROM ks.t\n\nWHERE k IN ?", _lv([b"x" * 40, b"y"])),  # a text over several lines
        q(2, "SELECT * FROM ks.i WHERE k IN (?, ?) AND c > ? LIMIT ?", *(struct.pack(">i", n) for n in (7, -1, 0, 9))),
        q(3, 'SELECT * FROM ks."Comp" WHERE "A" IN (1, -2) AND b = ?', u.bytes),
        q(4, "USE ks"),
        q(5, "SELECT * FROM system.local WHERE key = 'local'"),
        q(6, "SELECT * FROM ks.t"),  # a scan: no partition named
        {
            "type": "batch",
            "start_ms": T0 + 7,
            "statements": [
                ("INSERT INTO ks.t (k, v) VALUES (?, ?)", [b"w", bytes(48) + b"\x01"]),  # rows left out: ........
                ("INSERT INTO ks.t (k, v) VALUES (?, ?)", [b"w", None]),  # the same partition again: once
                ("DELETE FROM ks.i WHERE k = 3 AND c = ?", [struct.pack(">i", 1)]),
                ("UPDATE ks.t SET v = ? WHERE k = ?", [b"", b"e"]),  # an empty value: `-----` alone
            ],
        },
        q(8, "BEGIN UNLOGGED BATCH INSERT INTO ks.t (k) VALUES (?); DELETE FROM ks.t WHERE k = 'g' APPLY BATCH",
          b"f"),
        q(9, "INSERT INTO ks.t (k, v) VALUES (?, ?)", b"h", b"\xab" * 2000),  # a value cut by the dump: not a key
    ]
    text = "WARN  [main] 2019-08-02 03:07:53,635 Slf4jExceptionHandler.java:42 - Using Pauser.sleepy()\n"
    path = write("fql.txt", text + fql_dump(records))
    assert "........" in path.read_text() and "... truncated" in path.read_text()
    rows = _ingest(path, schema, settings)
    assert rows == [
        (0, 0.0, "a", "get", "ks.t"),
        (0, 0.0, "b'c", "get", "ks.t"),
        (0, 0.0, "d", "get", "ks.t"),
        (1, 0.001, "x" * 40, "get", "ks.t"),
        (1, 0.001, "y", "get", "ks.t"),
        (2, 0.002, "7", "get", "ks.i"),
        (2, 0.002, "-1", "get", "ks.i"),
        (3, 0.003, f"1:{u}", "get", "ks.Comp"),
        (3, 0.003, f"-2:{u}", "get", "ks.Comp"),
        (4, 0.007, "w", "set", "ks.t"),
        (4, 0.007, "3", "delete", "ks.i"),
        (4, 0.007, "e", "set", "ks.t"),
        (5, 0.008, "f", "set", "ks.t"),
        (5, 0.008, "g", "delete", "ks.t"),
        (6, 0.009, "h", "set", "ks.t"),
    ]


def test_grouping_rule(write, schema, settings):
    one = "SELECT v FROM ks.t WHERE k = ?"
    other = "SELECT * FROM ks.t WHERE k = ?"
    records = [
        q(0, one, b"a"),
        q(0, other, b"z"),  # another statement: another group
        q(1, one, b"b"),  # 1 ms after the group's first: joins
        q(1, one, b"a"),  # a key already in the group: opens the next one
        q(2, one, b"c"),  # within 1 ms of the new group's first
        q(3, one, b"d"),  # 2 ms after it: a new group
        q(3, "SELECT * FROM ks.t WHERE k IN (?)", b"in"),  # an IN read is its own request, even of one key
    ]
    path = write("fql.txt", fql_dump(records))
    by_request: dict[int, list[str]] = {}
    for rid, _, key, _, _ in _ingest(path, schema, settings):
        by_request.setdefault(rid, []).append(key)
    # at one ts a request the log holds whole comes before the single reads (rows sort by ts, then request id)
    assert list(by_request.values()) == [["a", "b"], ["z"], ["a", "c"], ["in"], ["d"]]

    by_request = {}
    for rid, _, key, _, _ in _ingest(path, schema, settings, no_grouping=True):
        by_request.setdefault(rid, []).append(key)
    assert list(by_request.values()) == [["a"], ["z"], ["b"], ["a"], ["c"], ["in"], ["d"]]

    by_request = {}
    for rid, _, key, _, _ in _ingest(path, schema, settings, group_window_s=0.0):  # same millisecond only
        by_request.setdefault(rid, []).append(key)
    assert list(by_request.values()) == [["a"], ["z"], ["b", "a"], ["c"], ["in"], ["d"]]

    rows = _ingest(path, schema, settings, group_window_s=0.5)
    assert [(rid, k) for rid, _, k, _, _ in rows] == [
        (0, "a"), (0, "b"), (1, "z"), (2, "a"), (2, "c"), (2, "d"), (3, "in")
    ]


def test_the_options(cli, write, schema, settings):
    records = [q(0, "SELECT * FROM ks.t WHERE k IN ('a')"), q(1, "SELECT * FROM ks.i WHERE k = 1")]
    path = write("fql.txt", fql_dump(records))
    r = cli("ingest", str(path), "--schema", str(schema), "--table", "KS.T", "--group-window-us", "500", "--json")
    assert r.exit_code == 0, r.stderr
    assert "format: cassandra-fql-dump" in r.stderr
    summary = json.loads(r.stdout)
    assert (summary["rows"], summary["requests"]) == (1, 1)
    r = cli("ingest", str(path), "--schema", str(schema), "--group-window-us", "1", "--group-window-s", "1")
    assert r.exit_code == 2 and "not both" in r.stderr
    r = cli("ingest", str(path), "--schema", str(schema), "--no-grouping", "--group-window-us", "1")
    assert r.exit_code == 2 and "--no-grouping" in r.stderr
    r = cli("ingest", str(path), "--schema", str(schema), "--table", "ks")
    assert r.exit_code == 2 and "is not KEYSPACE.TABLE" in r.stderr
    csv = write("t.csv", "ts,key\n1,a\n")
    r = cli("ingest", str(csv), "--table", "ks.t")
    assert r.exit_code == 2 and "--table and --schema are for query logs" in r.stderr


def _fails(path: Path, schema: Path | None, settings: Settings, tailtune_home: Path) -> str:
    with pytest.raises(BadInputError) as err:
        ingest_file(path, schema_file=schema, settings=settings)
    assert snapshot(tailtune_home) == [], "a failed ingest left files behind"
    return f"{err.value}\n{err.value.hint or ''}"


def test_errors_name_the_line_and_the_field(write, schema, settings, tailtune_home):
    good = q(0, "SELECT * FROM ks.t WHERE k = ?", b"a")
    # the value of an int key with 3 bytes: the value's own line
    text = fql_dump([good, q(1, "SELECT * FROM ks.i WHERE k IN (?, ?)", struct.pack(">i", 1), b"\x00\x00\x01")])
    path = write("fql.txt", text)
    lines = text.splitlines()
    bad_line = next(i for i, ln in enumerate(lines, 1) if ln.startswith("00000000 00 00 01 "))
    msg = _fails(path, schema, settings, tailtune_home)
    assert f"{path}:{bad_line}: field 'values': value 2 (column k): int value has 3 bytes, not 4" in msg

    # a damaged hex row
    lines[8] = "00000000 6X"
    path = write("fql2.txt", "\n".join(lines) + "\n")
    msg = _fails(path, schema, settings, tailtune_home)
    assert f"{path}:9: field 'Values': expected a hex dump row or '-----'" in msg

    # fewer values than markers
    path = write("fql3.txt", fql_dump([q(0, "SELECT * FROM ks.t WHERE k IN (?, ?)", b"a")]))
    assert f"{path}:6: field 'values': the statement has 2 bind marker(s) but the record binds 1" in _fails(
        path, schema, settings, tailtune_home
    )

    # a table the schema does not have: fatal, with the way out
    path = write("fql4.txt", fql_dump([good, q(1, "SELECT * FROM ks.nope WHERE k = 1")]))
    msg = _fails(path, schema, settings, tailtune_home)
    assert f"{path}:16: field 'table': no schema for table ks.nope" in msg and "DESCRIBE TABLE ks.nope" in msg

    # a key the dump cut at 1,024 bytes
    path = write("fql5.txt", fql_dump([q(0, "SELECT * FROM ks.t WHERE k = ?", b"k" * 1100)]))
    assert "field 'values': value 1 (column k) is cut at 1,024 bytes by fqltool dump" in _fails(
        path, schema, settings, tailtune_home
    )

    # the dump does not show the session's keyspace
    path = write("fql6.txt", fql_dump([q(0, "SELECT * FROM t WHERE k = 'a'")]))
    assert f"{path}:6: field 'keyspace': table t is not qualified" in _fails(path, schema, settings, tailtune_home)

    # a record cut short
    path = write("fql7.txt", "\n".join(fql_dump([good]).splitlines()[:8]) + "\n")
    assert f"{path}:8: field 'Values': the dump ends inside a value" in _fails(path, schema, settings, tailtune_home)
    path = write("fql7b.txt", "\n".join(fql_dump([good]).splitlines()[:9]) + "\n")
    assert f"{path}:9: the dump ends inside a record" in _fails(path, schema, settings, tailtune_home)

    # a schema file that cannot be read names its line
    bad_schema = write("schema.cql", "CREATE TABLE ks.x (\n  k text,\n  v int\n);\n")
    msg = _fails(write("fql8.txt", fql_dump([good])), bad_schema, settings, tailtune_home)
    assert f"{bad_schema}:1: schema: table ks.x has no PRIMARY KEY" in msg


def test_skip_keeps_the_good_records(write, schema, settings):
    text = fql_dump([q(0, "SELECT * FROM ks.i WHERE k = ?", b"\x01"), q(1, "SELECT * FROM ks.t WHERE k = ?", b"ok")])
    info = ingest_file(write("fql.txt", text), schema_file=schema, settings=settings, on_error="skip")
    assert info.read_table().column("key").to_pylist() == ["ok"]
    assert info.manifest["errors"]["skipped_rows"] == 1 and info.manifest["errors"]["by_field"] == {"values": 1}


def test_the_binary_format_wants_a_directory(write, schema, settings, tmp_path):
    path = write("20240101-00.cq4", bytes.fromhex("c1000040b906686561646572b60853435153746f726582aa000000") + bytes(64))
    with pytest.raises(BadInputError, match=r"ingest the directory that holds it \(.*\)"):
        ingest_file(path, schema_file=schema, settings=settings)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInputError, match="is a directory, and none that a format reads"):
        ingest_file(empty, settings=settings)
    with pytest.raises(BadInputError, match="is a directory; the format csv reads a file"):
        ingest_file(empty, fmt="csv", settings=settings)


def test_the_binary_format_without_jars_says_what_to_do(tmp_path, schema, monkeypatch, tailtune_home):
    log = tmp_path / "fql"
    log.mkdir()
    (log / "20240101-00.cq4").write_bytes(bytes(128))
    monkeypatch.setenv("TAILTUNE_CASSANDRA_LIB", str(tmp_path / "nolib"))
    from base.settings import get_settings

    get_settings.cache_clear()
    with pytest.raises(TailtuneError, match="needs Cassandra's jars") as err:
        ingest_file(log, schema_file=schema, settings=get_settings())
    assert "scripts/setup.sh" in (err.value.hint or "")
    get_settings.cache_clear()


@pytest.mark.parametrize(
    ("cql_type", "raw", "literal", "key"),
    [
        ("text", "héllo".encode(), cql.Literal("string", "héllo"), "héllo"),
        ("varchar", b"a:b", cql.Literal("string", "a:b"), "a:b"),
        ("int", struct.pack(">i", -5), cql.Literal("number", "-5"), "-5"),
        ("bigint", struct.pack(">q", 2**62), cql.Literal("number", str(2**62)), str(2**62)),
        ("smallint", struct.pack(">h", 300), cql.Literal("number", "300"), "300"),
        ("varint", (2**70).to_bytes(10, "big", signed=True), cql.Literal("number", str(2**70)), str(2**70)),
        ("uuid", uuid.UUID(int=7).bytes, cql.Literal("uuid", "00000000-0000-0000-0000-000000000007"),
         str(uuid.UUID(int=7))),
        ("timeuuid", uuid.UUID("a0eebc99-9c0b-11d1-8bb6-0800200c9a66").bytes,
         cql.Literal("uuid", "A0EEBC99-9C0B-11D1-8BB6-0800200C9A66"), "a0eebc99-9c0b-11d1-8bb6-0800200c9a66"),
        ("blob", b"\x00\xca\xfe", cql.Literal("blob", "0x00CAFE"), "0x00cafe"),
        ("boolean", b"\x01", cql.Literal("bool", "true"), "true"),
        ("timestamp", struct.pack(">q", 86_400_000), cql.Literal("string", "1970-01-02 00:00:00+0000"), "86400000"),
        ("inet", bytes([10, 0, 0, 1]), cql.Literal("string", "10.0.0.1"), "10.0.0.1"),
        ("double", struct.pack(">d", 0.1), cql.Literal("number", "0.1"), "0.1"),
        ("float", struct.pack(">f", 0.1), cql.Literal("number", "0.1"), "0.1"),
    ],
)
def test_a_key_is_the_same_bound_or_written(cql_type: str, raw: bytes, literal: cql.Literal, key: str) -> None:
    assert decode(cql_type, raw) == key
    assert from_literal(cql_type, literal) == key


def test_keys_of_other_types_and_problems() -> None:
    assert decode("frozen<tuple<int, text>>", b"\x01\x02") == "0x0102"
    assert compose(["1", "a:b", "c\\d"]) == "1:a\\:b:c\\\\d"
    assert compose(["a:b"]) == "a:b"
    assert split_collection(_lv([b"a", b"bc"])) == [b"a", b"bc"]
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: decode("int", b"\x00"), "int value has 1 bytes, not 4"),
        (lambda: decode("text", b"\xff"), "not UTF-8 (byte 0xff at offset 0)"),
        (lambda: decode("uuid", b"x"), "uuid value has 1 bytes, not 16"),
        (lambda: from_literal("int", cql.Literal("number", "2147483648")), "int value out of range"),
        (lambda: from_literal("text", cql.Literal("number", "5")), "text value written as a number"),
        (lambda: from_literal("int", cql.Literal("null", "null")), "cannot be null"),
        (lambda: split_collection(b"\x00\x00\x00\x02\x00\x00\x00\x01a"), "ends inside the length of element 2"),
    ]
    for bad, message in cases:
        with pytest.raises(ValueProblem, match=message.replace("(", r"\(").replace(")", r"\)")):
            bad()


def test_the_schema_and_the_statements() -> None:
    tables = cql.parse_schema(SCHEMA)
    assert set(tables) == {"ks.t", "ks.i", "ks.Comp"}
    assert tables["ks.t"].partition_key == ("k",) and tables["ks.t"].types == {"k": "text"}
    assert tables["ks.i"].partition_key == ("k",)
    comp = tables["ks.Comp"]
    assert comp.partition_key == ("A", "b") and comp.types == {"A": "bigint", "b": "uuid"}
    with pytest.raises(cql.CqlError) as err:
        cql.parse_schema("USE ks;\n\nCREATE TABLE t (k int PRIMARY KEY, v int,\n PRIMARY KEY (k));")
    assert err.value.line == 4 and "primary key twice" in str(err.value)

    access, markers = cql.parse_statement("SELECT a, \"b\" FROM ks.t WHERE k IN ? AND c = :x AND d > 3 LIMIT ?")
    assert isinstance(access, cql.Access) and markers == 3
    assert access.columns == {"k": (cql.Marker(0, None, 1),), "c": (cql.Marker(1, "x", 1),)}
    assert access.in_list == {"k"} and access.other == {"d"}
    access, _ = cql.parse_statement("SELECT * FROM t WHERE token(k) > ?")
    assert isinstance(access, cql.Access) and access.token and access.keyspace is None
    access, markers = cql.parse_statement("UPDATE ks.t USING TTL ? SET v = ? WHERE k = ? IF v = ?")
    assert isinstance(access, cql.Access) and access.columns == {"k": (cql.Marker(2, None, 1),)} and markers == 4
    assert cql.parse_statement("CREATE TABLE x (k int PRIMARY KEY)")[0] == cql.Other("CREATE")
    with pytest.raises(cql.CqlError, match="unterminated string"):
        cql.parse_statement("SELECT * FROM t WHERE k = 'a")
