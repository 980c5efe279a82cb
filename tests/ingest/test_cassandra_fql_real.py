"""A real Cassandra's full query log → the dataset: exactly the requests and keys that were sent.

The session's Cassandra node (tests/conftest.py) logs a known workload between `nodetool enablefullquerylog` and
`nodetool disablefullquerylog` (Cassandra's NodeTool over the node's local JMX port): plain and prepared
statements, IN reads of known sizes on text, int, bigint, uuid, blob and composite partition keys, single-partition
reads issued concurrently, single writes and a batch. The log's directory is ingested (`cassandra-fql`) with the
schema the driver exports (what `cqlsh -e 'DESCRIBE KEYSPACE'` prints), and its records rendered as `fqltool dump`
prints them are ingested too (`cassandra-fql-dump`): both datasets hold the requests sent, grouped as documented.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from base.settings import Settings
from ingest.formats.cassandra_fql.binlog import JVM_OPTIONS, build_reader, default_lib
from ingest.pipeline import ingest_file
from tests.ingest.samples import fql_dump
from tests.servers.cassandra_server import CassandraNode, nodetool

KS = "fqlks"
SCHEMA = [
    f"CREATE KEYSPACE {KS} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
    f"CREATE TABLE {KS}.kv (k text PRIMARY KEY, v int)",
    f"CREATE TABLE {KS}.ints (k int PRIMARY KEY, v int)",
    f"CREATE TABLE {KS}.big (k bigint PRIMARY KEY, v int)",
    f"CREATE TABLE {KS}.uu (k uuid PRIMARY KEY, v int)",
    f"CREATE TABLE {KS}.bl (k blob PRIMARY KEY, v int)",
    f"CREATE TABLE {KS}.comp (a int, b text, c int, v int, PRIMARY KEY ((a, b), c))",
]
U1, U2 = uuid.UUID(int=1), uuid.UUID("8d3c1f6e-0d7a-4c53-9a0e-2b8f5c6d7e10")
#: The concurrent single-partition reads: one statement text, eight keys.
BURST = [f"s{i}" for i in range(8)]

Request = tuple[str, str, frozenset[str]]  # (table, op, keys)


def _workload(session: Any) -> list[Request | tuple[str, str, str]]:
    """Send the workload; return what was sent: whole requests (table, op, keys) and single-partition reads
    (table, statement, key) in the order they were sent."""
    from cassandra.concurrent import execute_concurrent_with_args
    from cassandra.query import BatchStatement

    sent: list[Any] = []

    def req(table: str, op: str, *keys: str) -> None:
        sent.append((f"{KS}.{table}", op, frozenset(keys)))

    session.execute(f"SELECT * FROM {KS}.kv WHERE k IN ('a', 'b', 'c')")  # plain IN, 3 keys
    req("kv", "get", "a", "b", "c")
    in_list = session.prepare(f"SELECT * FROM {KS}.kv WHERE k IN ?")
    session.execute(in_list, [["p1", "p2", "p3", "p4", "p5"]])  # prepared IN ?, 5 keys
    req("kv", "get", "p1", "p2", "p3", "p4", "p5")
    ints = session.prepare(f"SELECT * FROM {KS}.ints WHERE k IN (?, ?, ?, ?)")
    session.execute(ints, [1, -2, 300000, 2147483647])  # prepared IN (?, ...), 4 int keys
    req("ints", "get", "1", "-2", "300000", "2147483647")
    session.execute(f"SELECT * FROM {KS}.big WHERE k IN (9223372036854775807, -1)")
    req("big", "get", "9223372036854775807", "-1")
    big = session.prepare(f"SELECT * FROM {KS}.big WHERE k IN ?")
    session.execute(big, [[9223372036854775807, 42]])
    req("big", "get", "9223372036854775807", "42")
    uu = session.prepare(f"SELECT * FROM {KS}.uu WHERE k IN ?")
    session.execute(uu, [[U1, U2]])
    req("uu", "get", str(U1), str(U2))
    session.execute(f"SELECT * FROM {KS}.bl WHERE k IN (0x00ff, 0xcafe01)")
    req("bl", "get", "0x00ff", "0xcafe01")
    blob = session.prepare(f"SELECT * FROM {KS}.bl WHERE k IN ?")
    session.execute(blob, [[b"\x00\xff", b"\x01"]])
    req("bl", "get", "0x00ff", "0x01")
    comp = session.prepare(f"SELECT * FROM {KS}.comp WHERE a IN ? AND b = ?")
    session.execute(comp, [[1, 2], "x:y"])  # composite: every combination, `:` escaped
    req("comp", "get", "1:x\\:y", "2:x\\:y")
    session.execute(f"SELECT * FROM {KS}.comp WHERE a = 3 AND b IN ('u', 'w') AND c > 0")
    req("comp", "get", "3:u", "3:w")

    # single-partition reads: the burst issued concurrently, then one statement's reads one after the other
    burst = session.prepare(f"SELECT k FROM {KS}.kv WHERE k = ?")
    execute_concurrent_with_args(session, burst, [(k,) for k in BURST], concurrency=8)
    sent += [(f"{KS}.kv", "SELECT k FROM fqlks.kv WHERE k = ?", k) for k in BURST]
    seq = session.prepare(f"SELECT v FROM {KS}.ints WHERE k = ?")
    for k in (7, 8, 7):  # the second 7 repeats a key of its group: it opens the next one
        session.execute(seq, [k])
        sent.append((f"{KS}.ints", "SELECT v FROM fqlks.ints WHERE k = ?", str(k)))
    single_uuid = session.prepare(f"SELECT * FROM {KS}.uu WHERE k = ?")
    session.execute(single_uuid, [U2])
    sent.append((f"{KS}.uu", "SELECT * FROM fqlks.uu WHERE k = ?", str(U2)))
    session.execute(f"SELECT * FROM {KS}.comp WHERE a = 4 AND b = 'q'")
    sent.append((f"{KS}.comp", "SELECT * FROM fqlks.comp WHERE a = 4 AND b = 'q'", "4:q"))

    # writes: a single INSERT, and a batch (prepared and plain statements, a partition written twice)
    put = session.prepare(f"INSERT INTO {KS}.big (k, v) VALUES (?, ?)")
    session.execute(put, [5, 1])
    req("big", "set", "5")
    batch = BatchStatement()
    batch.add(session.prepare(f"INSERT INTO {KS}.kv (k, v) VALUES (?, ?)"), ["w1", 1])
    batch.add(f"INSERT INTO {KS}.comp (a, b, c, v) VALUES (5, 'z', 1, 1)")
    batch.add(f"INSERT INTO {KS}.comp (a, b, c, v) VALUES (5, 'z', 2, 1)")
    batch.add(session.prepare(f"DELETE FROM {KS}.ints WHERE k = ?"), [9])
    session.execute(batch)
    sent.append(("batch", "", frozenset({f"{KS}.kv:w1", f"{KS}.comp:5:z", f"{KS}.ints:9"})))
    return sent


@pytest.fixture(scope="module")
def logged(cassandra_node: CassandraNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The workload, logged: the log directory, the schema file, and what was sent."""
    from cassandra.cluster import Cluster

    work = tmp_path_factory.mktemp("fql")
    log_dir = work / "fql"
    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5)
    try:
        session = cluster.connect()
        for statement in SCHEMA:
            session.execute(statement)
        cluster.refresh_schema_metadata()
        schema = work / "schema.cql"
        schema.write_text(cluster.metadata.keyspaces[KS].export_as_string())
        nodetool(cassandra_node, "enablefullquerylog", "--path", str(log_dir))
        try:
            sent = _workload(session)
        finally:
            nodetool(cassandra_node, "disablefullquerylog")
    finally:
        cluster.shutdown()
    yield {"dir": log_dir, "schema": schema, "sent": sent}


def _requests(info: Any) -> list[tuple[str, Counter[tuple[str, str, str]]]]:
    """The dataset's requests in order: (first ts as text, the (table, op, key) rows)."""
    rows = info.read_table().to_pylist()
    out: dict[int, Counter[tuple[str, str, str]]] = {}
    for r in rows:
        out.setdefault(r["request_id"], Counter())[(r["table"], r["op"], r["key"])] += 1
    return [(str(i), c) for i, c in out.items()]


def _expected(sent: list[Any], grouping: str) -> Counter[frozenset[tuple[str, str, str]]]:
    """The requests that were sent, as multisets of (table, op, key), for a grouping of the single reads:
    `none` (each its own) or `window` (a window longer than the test: per statement, a key already in the
    statement's group opens the next one)."""
    out: Counter[frozenset[tuple[str, str, str]]] = Counter()
    groups: dict[tuple[str, str], list[set[str]]] = {}
    for item in sent:
        table, what, keys = item
        if isinstance(keys, frozenset):
            if table == "batch":
                rows = set()
                for k in keys:
                    t, _, key = k.partition(":")
                    op = "delete" if t.endswith(".ints") else "set"
                    rows.add((t, op, key))
                out[frozenset(rows)] += 1
            else:
                out[frozenset((table, what, k) for k in keys)] += 1
            continue
        if grouping == "none":
            out[frozenset({(table, "get", keys)})] += 1
            continue
        mine = groups.setdefault((table, what), [])
        if not mine or keys in mine[-1]:
            mine.append(set())
        mine[-1].add(keys)
    for (table, _), sets in groups.items():
        for s in sets:
            out[frozenset((table, "get", k) for k in s)] += 1
    return out


def _got(info: Any) -> Counter[frozenset[tuple[str, str, str]]]:
    got: Counter[frozenset[tuple[str, str, str]]] = Counter()
    for _, rows in _requests(info):
        assert max(rows.values()) == 1, rows  # a key once per request
        got[frozenset(rows)] += 1
    return got


def test_the_binary_log_holds_exactly_the_requests_sent(logged: dict[str, Any], settings: Settings) -> None:
    log_dir, schema, sent = logged["dir"], logged["schema"], logged["sent"]
    assert any(log_dir.glob("*.cq4"))

    # each single-partition read its own request
    info = ingest_file(log_dir, schema_file=schema, no_grouping=True, settings=settings)
    assert info.manifest["source"]["format"] == "cassandra-fql"
    assert _got(info) == _expected(sent, "none")
    ts = info.read_table().column("ts").to_pylist()
    assert ts == sorted(ts)

    # a window longer than the whole test: each statement's single reads are one multiget until a key repeats
    wide = ingest_file(log_dir, schema_file=schema, group_window_s=3600.0, settings=settings)
    assert _got(wide) == _expected(sent, "window")
    burst = {(f"{KS}.kv", "get", k) for k in BURST}
    assert frozenset(burst) in _got(wide)  # the eight concurrent reads: one multiget of eight keys

    # the same bytes and options again: the same dataset, nothing written
    again = ingest_file(log_dir, schema_file=schema, group_window_s=3600.0, settings=settings)
    assert again.reused and again.id == wide.id

    # --table keeps the requests of the tables given (a batch keeps its statements on them)
    only = ingest_file(log_dir, schema_file=schema, no_grouping=True, tables=("FQLKS.kv",), settings=settings)
    expected_kv = Counter(
        {
            frozenset(r for r in req if r[0] == f"{KS}.kv"): n
            for req, n in _expected(sent, "none").items()
            if any(r[0] == f"{KS}.kv" for r in req)
        }
    )
    assert _got(only) == expected_kv


def test_the_default_window_groups_by_the_documented_rule(logged: dict[str, Any], settings: Settings) -> None:
    """1 ms: the records' own start times decide; the groups are the rule applied to what the log holds."""
    records = _records(logged["dir"])
    info = ingest_file(logged["dir"], schema_file=logged["schema"], settings=settings)
    burst_starts = sorted(
        r["start_ms"] for r in records if r.get("query") == f"SELECT k FROM {KS}.kv WHERE k = ?"
    )
    assert len(burst_starts) == len(BURST)
    # the burst's groups: a read joins its group while its start is within 1 ms of the group's first
    expected_sizes: list[int] = []
    first = None
    for t in burst_starts:
        if first is None or t - first > 1:
            expected_sizes.append(0)
            first = t
        expected_sizes[-1] += 1
    got = [
        len(rows)
        for _, rows in _requests(info)
        if all(t == f"{KS}.kv" and op == "get" and k in BURST for t, op, k in rows)
    ]
    assert sorted(got) == sorted(expected_sizes)


def _records(log_dir: Path) -> list[dict[str, Any]]:
    """The log's records as the reader prints them (JSON lines)."""
    lib = default_lib()
    classes = build_reader(lib)
    r = subprocess.run(
        ["java", *JVM_OPTIONS, f"-Dlogback.configurationFile={classes / 'logback.xml'}", "-cp",
         f"{classes}:{lib}/*", "FqlReader", str(log_dir)],
        capture_output=True, text=True, check=True, timeout=300,
    )
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_the_dump_of_the_log_gives_the_same_dataset(
    logged: dict[str, Any], settings: Settings, tmp_path: Path
) -> None:
    """The records rendered as `fqltool dump` prints them (Dump.java's layout; fqltool is not in the jars)."""
    records = _records(logged["dir"])
    rendered = []
    for r in records:
        if r["type"] == "batch":
            statements = [
                (q, [None if v is None else bytes.fromhex(v) for v in vs])
                for q, vs in zip(r["queries"], r["batch_values"], strict=True)
            ]
        else:
            statements = [(r["query"], [None if v is None else bytes.fromhex(v) for v in r["values"]])]
        rendered.append({"type": r["type"], "start_ms": r["start_ms"], "statements": statements})
    dump = tmp_path / "fql.txt"
    dump.write_text("WARN  [main] 2025-01-01 00:00:00,000 Slf4jExceptionHandler.java:42 - a log line\n"
                    + fql_dump(rendered))
    from_dump = ingest_file(dump, schema_file=logged["schema"], no_grouping=True, settings=settings)
    assert from_dump.manifest["source"]["format"] == "cassandra-fql-dump"
    from_log = ingest_file(logged["dir"], schema_file=logged["schema"], no_grouping=True, settings=settings)
    a, b = from_dump.read_table(), from_log.read_table()
    assert a.to_pylist() == b.to_pylist()
