"""A real 3-node Cassandra's full query logs → one dataset with every request once.

The loopback cluster (tests/servers/cassandra_cluster.py) logs on all three nodes (`nodetool enablefullquerylog`
on each, over its local JMX port) while a driver whose load balancing is round robin spreads the coordinators of
a known set of requests (IN reads and writes, each of its own keys). The directory holding the three nodes' log
directories is ingested (`tailtune ingest DIR`): the dataset holds each request sent exactly once, with the node
that coordinated it. One request is also sent a second time to another coordinator at once, as a driver's hedge
would: it is in two logs, and the ingest counts it as one likely duplicate. Ingesting two of the three logs with
`--nodes 3` reports what the third one's absence leaves out.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from base.settings import Settings
from ingest.formats.cassandra_fql.nodes import NodeLog
from ingest.pipeline import ingest_node_logs
from tests.servers.cassandra_server import nodetool

#: One cluster for the module's tests, in one xdist worker (two clusters would share the loopback addresses).
pytestmark = pytest.mark.xdist_group("cassandra-cluster")

KS = "fqlnodes"
READS = 60
WRITES = 30

Sent = Counter[frozenset[tuple[str, str]]]  # each request as its (op, key) rows


def _settled(session: Any, hosts: list[str], deadline_s: float = 180.0) -> None:
    """Wait until every node sees the other nodes as peers and all agree on one schema version (a DDL statement
    and the next one may reach different coordinators on a loaded machine); fail after `deadline_s`."""
    import time

    end = time.monotonic() + deadline_s
    while True:
        from cassandra.cluster import NoHostAvailable

        versions, peers = set(), []
        try:
            for h in hosts:
                local = session.execute("SELECT schema_version FROM system.local", execution_profile=h).one()
                versions.add(str(local.schema_version))
                peers.append(len(list(session.execute("SELECT peer FROM system.peers", execution_profile=h))))
        except NoHostAvailable:  # the driver's pool to that node is not up yet
            peers.append(-1)
        if len(versions) == 1 and len(peers) == len(hosts) and all(p == len(hosts) - 1 for p in peers):
            return
        if time.monotonic() > end:
            raise AssertionError(f"the cluster did not settle: schema versions {versions}, peers {peers}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The workload, logged by every node: the folder of the nodes' logs, the schema, what was sent."""
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("java/mvn not installed (scripts/setup.sh installs them)")
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy, WhiteListRoundRobinPolicy

    from tests.servers.cassandra_cluster import running_cluster

    work = tmp_path_factory.mktemp("fql-nodes")
    logs = work / "logs"
    with running_cluster(3, heap="512M") as nodes:
        hosts = [n.host for n in nodes]
        profiles = {
            EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=RoundRobinPolicy()),
            **{h: ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([h])) for h in hosts},
        }
        cluster = Cluster(hosts, port=nodes[0].port, protocol_version=5, execution_profiles=profiles)
        try:
            session = cluster.connect()
            _settled(session, hosts)
            session.execute(
                f"CREATE KEYSPACE {KS} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}",
                execution_profile=hosts[0],
            )
            _settled(session, hosts)
            session.execute(f"CREATE TABLE {KS}.kv (k text PRIMARY KEY, v int)", execution_profile=hosts[0])
            _settled(session, hosts)
            cluster.refresh_schema_metadata()
            schema = work / "schema.cql"
            schema.write_text(cluster.metadata.keyspaces[KS].export_as_string())
            read = session.prepare(f"SELECT * FROM {KS}.kv WHERE k IN ?")
            write = session.prepare(f"INSERT INTO {KS}.kv (k, v) VALUES (?, ?)")
            for n in nodes:
                nodetool(n, "enablefullquerylog", "--path", str(logs / n.host), host="127.0.0.1")
            sent: Sent = Counter()
            try:
                for i in range(WRITES):
                    session.execute(write, [f"w{i}", i])
                    sent[frozenset({("set", f"w{i}")})] += 1
                for i in range(READS):
                    keys = [f"r{i}a", f"r{i}b", f"r{i}c"]
                    session.execute(read, [keys])
                    sent[frozenset(("get", k) for k in keys)] += 1
                # one read sent to two coordinators at once: a hedge, in two logs
                copies = [session.execute_async(read, [["hedged"]], execution_profile=h) for h in hosts[:2]]
                for copy in copies:
                    copy.result()
                sent[frozenset({("get", "hedged")})] += 2
            finally:
                for n in nodes:
                    nodetool(n, "disablefullquerylog", host="127.0.0.1")
        finally:
            cluster.shutdown()
        yield {"logs": logs, "schema": schema, "sent": sent, "hosts": hosts}


def _requests(table: Any) -> tuple[Sent, dict[int, set[str]]]:
    """The dataset's requests as (op, key) sets, and the nodes of each request's rows."""
    rows: dict[int, set[tuple[str, str]]] = {}
    nodes: dict[int, set[str]] = {}
    for r in table.to_pylist():
        assert r["table"] == f"{KS}.kv"
        rows.setdefault(r["request_id"], set()).add((r["op"], r["key"]))
        nodes.setdefault(r["request_id"], set()).add(r["node"])
    return Counter(frozenset(s) for s in rows.values()), nodes


def test_three_nodes_logs_are_one_dataset_with_every_request_once(logged: dict[str, Any], cli: Any) -> None:
    logs, hosts = logged["logs"], logged["hosts"]
    assert sorted(p.name for p in logs.iterdir()) == hosts and all(any((logs / h).glob("*.cq4")) for h in hosts)
    # every other request has keys of its own, so a window of a minute finds the hedge and nothing else, however
    # long the loaded box took between the two copies' starts
    r = cli("ingest", str(logs), "--schema", str(logged["schema"]), "--no-grouping", "--nodes", "3",
            "--duplicate-window-ms", "60000", "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    from ingest.store import DatasetStore

    info = DatasetStore().get(summary["id"])
    got, nodes = _requests(info.read_table())
    assert got == logged["sent"]  # every request sent, once (the hedged one twice: it was sent twice)
    assert summary["requests"] == sum(logged["sent"].values()) == READS + WRITES + 2
    assert all(len(n) == 1 for n in nodes.values())  # a request is its coordinator's
    per_node = summary["nodes"]["logs"]
    assert set(per_node) == set(hosts) == {n for ns in nodes.values() for n in ns}
    assert all(count >= (READS + WRITES) // 4 for count in per_node.values()), per_node  # round robin spreads them
    assert summary["nodes"]["likely_duplicates"] == 1
    assert summary["nodes"]["missing"]["missing_nodes"] == 0
    ts = info.read_table().column("ts").to_pylist()
    assert ts == sorted(ts)


def test_a_missing_nodes_log_is_reported(logged: dict[str, Any], settings: Settings) -> None:
    logs, hosts = logged["logs"], logged["hosts"]
    whole = ingest_node_logs([NodeLog(h, logs / h) for h in hosts], schema_file=logged["schema"], no_grouping=True,
                             settings=settings)
    third = next(log["requests"] for log in whole.manifest["nodes"]["logs"] if log["name"] == hosts[2])
    two = ingest_node_logs([NodeLog(h, logs / h) for h in hosts[:2]], schema_file=logged["schema"],
                           no_grouping=True, cluster_nodes=3, settings=settings)
    assert two.manifest["requests"] == whole.manifest["requests"] - third
    missing = two.manifest["nodes"]["missing"]
    assert missing["missing_nodes"] == 1 and missing["missing_share"] == pytest.approx(1 / 3)
    # the estimate (the logged nodes' mean) against what the third node did log: round robin spreads them evenly
    assert abs(missing["estimated_missing_requests"] - third) <= 0.2 * third
    assert any("1 of the cluster's 3 nodes have no log" in w for w in two.manifest["warnings"])
