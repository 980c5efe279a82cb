"""Several nodes' full query logs → one dataset, on hand-made logs (the text of `fqltool dump`, written by
`tests/ingest/samples.py:fql_dump`): the merge in time order with the node as a column, request ids kept apart,
the likely duplicates across nodes counted and kept, what the nodes without a log leave out, the arguments'
forms and their errors. The same on a real 3-node cluster's binary logs: `test_cassandra_fql_cluster.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from base.errors import BadInputError
from base.settings import Settings
from ingest.formats.cassandra_fql.nodes import NodeLog, node_logs
from ingest.pipeline import ingest_node_logs
from ingest.store import DatasetStore
from tests.ingest.samples import fql_dump

SCHEMA = "CREATE TABLE ks.t (k text PRIMARY KEY, v int);\n"
T0 = 1_700_000_000_000
IN2 = "SELECT * FROM ks.t WHERE k IN (?, ?)"
PUT = "INSERT INTO ks.t (k, v) VALUES (?, 1)"


def q(ms: int, query: str, *values: bytes) -> dict[str, Any]:
    return {"type": "single-query", "start_ms": T0 + ms, "statements": [(query, list(values))]}


@pytest.fixture
def schema(tmp_path: Path) -> Path:
    path = tmp_path / "schema.cql"
    path.write_text(SCHEMA)
    return path


def _log(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> NodeLog:
    path = tmp_path / f"{name}.txt"
    path.write_text(fql_dump(records))
    return NodeLog(name, path)


def _rows(info: Any) -> list[tuple[int, int, str, str]]:
    """(request_id, ms after T0, key, node) of each row, in the dataset's order."""
    return [
        (r["request_id"], round(r["ts"] * 1000 - T0), r["key"], r["node"]) for r in info.read_table().to_pylist()
    ]


def test_the_logs_merge_in_time_order_with_the_node_of_each_row(
    tmp_path: Path, schema: Path, settings: Settings
) -> None:
    # each log is in its own (end-time) order; the requests of the three interleave in time
    a = _log(tmp_path, "a", [q(0, IN2, b"a0", b"a1"), q(30, PUT, b"a2"), q(20, PUT, b"a3")])
    b = _log(tmp_path, "b", [q(10, IN2, b"b0", b"b1"), q(40, PUT, b"b2")])
    c = _log(tmp_path, "c", [q(5, PUT, b"c0"), q(20, PUT, b"c1")])
    info = ingest_node_logs([a, b, c], schema_file=schema, no_grouping=True, settings=settings)
    assert _rows(info) == [
        (0, 0, "a0", "a"),
        (0, 0, "a1", "a"),
        (1, 5, "c0", "c"),
        (2, 10, "b0", "b"),
        (2, 10, "b1", "b"),
        (3, 20, "a3", "a"),  # the same ms: by request id (the node's log first in the list first)
        (4, 20, "c1", "c"),
        (5, 30, "a2", "a"),
        (6, 40, "b2", "b"),
    ]
    m = info.manifest
    assert m["requests"] == 7 and m["source"]["format"] == "cassandra-fql-dump"
    assert [(log["name"], log["requests"], log["rows"]) for log in m["nodes"]["logs"]] == [
        ("a", 3, 4), ("b", 2, 3), ("c", 2, 2)
    ]
    assert m["nodes"]["duplicates"]["likely"] == 0 and "missing" not in m["nodes"]
    assert m["ingest_options"]["nodes"] == ["a", "b", "c"]
    assert "node" in m["columns"]

    # the same logs again: the same dataset; under other node names: another one
    assert ingest_node_logs([a, b, c], schema_file=schema, no_grouping=True, settings=settings).reused
    renamed = [NodeLog("x", a.path), b, c]
    other = ingest_node_logs(renamed, schema_file=schema, no_grouping=True, settings=settings)
    assert other.id != info.id and {r[3] for r in _rows(other)} == {"x", "b", "c"}


def test_single_reads_on_different_coordinators_group_into_one_multiget(
    tmp_path: Path, schema: Path, settings: Settings
) -> None:
    """A client's concurrent single-partition reads, spread by round robin, are one multiget as on one node."""
    one = "SELECT v FROM ks.t WHERE k = ?"
    a = _log(tmp_path, "a", [q(0, one, b"k0"), q(50, one, b"k3")])
    b = _log(tmp_path, "b", [q(0, one, b"k1")])
    c = _log(tmp_path, "c", [q(1, one, b"k2")])
    info = ingest_node_logs([a, b, c], schema_file=schema, settings=settings)
    assert _rows(info) == [(0, 0, "k0", "a"), (0, 0, "k1", "b"), (0, 0, "k2", "c"), (1, 50, "k3", "a")]


def test_likely_duplicates_across_nodes_are_counted_and_kept(
    tmp_path: Path, schema: Path, settings: Settings
) -> None:
    a = _log(tmp_path, "a", [
        q(0, IN2, b"x", b"y"),  # hedged onto b 30 ms later, and onto c 60 ms later: two copies
        q(500, PUT, b"r"),  # retried on b 150 ms later: past the 100 ms window, not counted
        q(1000, PUT, b"s"),
        q(1010, PUT, b"s"),  # the same statement twice on one node: not a cross-node copy
        q(2000, PUT, b"t"),
    ])
    b = _log(tmp_path, "b", [
        q(30, IN2, b"x", b"y"),
        q(650, PUT, b"r"),
        q(2000, PUT, b"t"),  # the same ms on two nodes: one copy
        q(3000, IN2, b"y", b"x"),  # other values (the order of an IN list is its statement's): not a copy
    ])
    c = _log(tmp_path, "c", [q(60, IN2, b"x", b"y"), q(3000, IN2, b"x", b"z")])
    info = ingest_node_logs([a, b, c], schema_file=schema, no_grouping=True, settings=settings)
    dups = info.manifest["nodes"]["duplicates"]
    assert dups["likely"] == 3 and dups["window_ms"] == 100 and dups["kept"] is True
    assert info.manifest["requests"] == 11  # every record is kept
    assert any("3 request(s) are likely copies" in w for w in info.manifest["warnings"])

    # a window of 200 ms takes the retry too; 0 ms only the copies of the same millisecond
    wide = ingest_node_logs([a, b, c], schema_file=schema, no_grouping=True, duplicate_window_ms=200,
                            settings=settings)
    assert wide.manifest["nodes"]["duplicates"]["likely"] == 4
    narrow = ingest_node_logs([a, b, c], schema_file=schema, no_grouping=True, duplicate_window_ms=0,
                              settings=settings)
    assert narrow.manifest["nodes"]["duplicates"]["likely"] == 1


def test_the_nodes_without_a_log_are_reported(tmp_path: Path, schema: Path, settings: Settings) -> None:
    a = _log(tmp_path, "a", [q(i, PUT, f"a{i}".encode()) for i in range(6)])
    b = _log(tmp_path, "b", [q(i, PUT, f"b{i}".encode()) for i in range(4)])
    info = ingest_node_logs([a, b], schema_file=schema, cluster_nodes=3, settings=settings)
    missing = info.manifest["nodes"]["missing"]
    assert missing["missing_nodes"] == 1 and missing["logs"] == 2 and missing["cluster_nodes"] == 3
    assert missing["missing_share"] == pytest.approx(1 / 3)
    assert missing["estimated_missing_requests"] == 5  # 10 requests over 2 logs: 5 a node
    assert any("1 of the cluster's 3 nodes have no log" in w and "33%" in w for w in info.manifest["warnings"])

    whole = ingest_node_logs([a, b], schema_file=schema, cluster_nodes=2, settings=settings)
    assert whole.manifest["nodes"]["missing"]["missing_nodes"] == 0 and not whole.manifest["warnings"]

    with pytest.raises(BadInputError, match="--nodes 1, but 2 nodes' logs"):
        ingest_node_logs([a, b], schema_file=schema, cluster_nodes=1, settings=settings)


def test_bad_node_lists_are_refused_naming_the_log(tmp_path: Path, schema: Path, settings: Settings) -> None:
    a = _log(tmp_path, "a", [q(0, PUT, b"k")])
    with pytest.raises(BadInputError, match="node a is named twice"):
        ingest_node_logs([a, NodeLog("a", tmp_path / "schema.cql")], schema_file=schema, settings=settings)
    with pytest.raises(BadInputError, match="is the log of node a too"):
        ingest_node_logs([a, NodeLog("b", a.path)], schema_file=schema, settings=settings)
    with pytest.raises(BadInputError, match="no such file or directory \\(the log of node b\\)"):
        ingest_node_logs([a, NodeLog("b", tmp_path / "nope.txt")], schema_file=schema, settings=settings)
    csv = tmp_path / "t.csv"
    csv.write_text("ts,key\n1,a\n")
    with pytest.raises(BadInputError, match="not a full query log"):
        ingest_node_logs([a, NodeLog("b", csv)], schema_file=schema, settings=settings)

    # a problem in one node's log names that log's file and its line; nothing is written
    bad = _log(tmp_path, "bad", [q(0, PUT, b"k"), q(1, "SELECT * FROM ks.nope WHERE k IN ('a')")])
    with pytest.raises(BadInputError) as err:
        ingest_node_logs([a, bad], schema_file=schema, settings=settings)
    assert str(bad.path) in str(err.value) and "no schema for table ks.nope" in str(err.value)
    assert DatasetStore(settings).list() == []


def test_the_arguments_name_the_nodes(tmp_path: Path) -> None:
    one = tmp_path / "fql.txt"
    one.write_text("x")
    assert node_logs([str(one)]) is None  # one file: the single-path form
    assert node_logs([f"n1={one}", str(one)]) == [NodeLog("n1", one), NodeLog("fql", one)]
    per_node = tmp_path / "logs"
    for n in ("127.0.0.1", "127.0.0.2"):
        (per_node / n).mkdir(parents=True)
        (per_node / n / "20250101-00.cq4").write_bytes(b"")
    assert node_logs([str(per_node)]) == [
        NodeLog("127.0.0.1", per_node / "127.0.0.1"), NodeLog("127.0.0.2", per_node / "127.0.0.2")
    ]
    assert node_logs([str(per_node / "127.0.0.1")]) is None  # a log itself
    (per_node / "stray").mkdir()
    with pytest.raises(BadInputError, match="stray holds none"):
        node_logs([str(per_node)])
    with pytest.raises(BadInputError, match="is not a name"):
        node_logs([f"a b={one}", str(one)])


def test_the_cli_ingests_nodes_logs_and_prints_what_they_hold(tmp_path: Path, schema: Path, cli: Any) -> None:
    a = _log(tmp_path, "a", [q(0, PUT, b"k0"), q(1, PUT, b"k1")])
    b = _log(tmp_path, "b", [q(2, PUT, b"k2")])
    r = cli("ingest", f"n1={a.path}", f"n2={b.path}", "--schema", str(schema), "--nodes", "3", "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["requests"] == 3 and summary["nodes"]["logs"] == {"n1": 2, "n2": 1}
    assert summary["nodes"]["likely_duplicates"] == 0
    assert summary["nodes"]["missing"]["missing_nodes"] == 1
    assert "1 of the cluster's 3 nodes have no log" in r.stderr

    table = cli("ingest", f"n1={a.path}", f"n2={b.path}", "--schema", str(schema))
    assert table.exit_code == 0 and "n1 (2 requests), n2 (1 requests)" in table.stdout

    wrong = cli("ingest", str(a.path), "--schema", str(schema), "--nodes", "3")
    assert wrong.exit_code == 2 and "--nodes and --duplicate-window-ms are for nodes' query logs" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_a_skipped_record_of_one_node_is_counted_on_its_log(tmp_path: Path, schema: Path, settings: Settings) -> None:
    a = _log(tmp_path, "a", [q(0, PUT, b"k0")])
    b = _log(tmp_path, "b", [q(1, "INSERT INTO ks.t (k, v) VALUES (?, ?)", b"k1"), q(2, PUT, b"k2")])  # 1 of 2 values
    with pytest.raises(BadInputError) as err:
        ingest_node_logs([a, b], schema_file=schema, settings=settings)
    assert f"{b.path}:" in str(err.value) and "2 bind marker(s)" in str(err.value)
    info = ingest_node_logs([a, b], schema_file=schema, on_error="skip", settings=settings)
    assert info.manifest["requests"] == 2 and info.manifest["errors"]["skipped_rows"] == 1
    assert str(b.path) in info.manifest["errors"]["examples"][0]
