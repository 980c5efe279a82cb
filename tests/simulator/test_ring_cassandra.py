"""Against a real Cassandra node: `token(k)` of inserted text keys equals the simulator's key tokens, and the ring
read from the node's own tables (`system.local`, `system.peers_v2`, `system_schema.keyspaces`) places every key on
the replicas the driver's token map gives (`cluster.metadata.token_map.get_replicas`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from simulation.cassandra import CassandraDeployment, ring_size
from simulation.layout import key_tokens
from tests.servers.cassandra_server import CassandraNode
from tests.simulator.test_ring import keys

pytestmark = pytest.mark.slow

KEYSPACES = {
    "tt_ring_simple": "{'class': 'SimpleStrategy', 'replication_factor': 1}",
    "tt_ring_nts": "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}",
}


@pytest.fixture(scope="module")
def cluster(cassandra_node: CassandraNode) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    c = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5)
    try:
        yield c
    finally:
        c.shutdown()


def node_ring(session: Any, keyspace: str) -> dict[str, Any]:
    """The ring as the node describes it (the discovered-ring shape)."""
    local = session.execute("SELECT partitioner, data_center, rack, rpc_address, tokens FROM system.local").one()
    peers = list(session.execute("SELECT data_center, rack, native_address, tokens FROM system.peers_v2"))
    nodes = [{"address": local.rpc_address, "dc": local.data_center, "rack": local.rack, "tokens": local.tokens}]
    nodes += [{"address": p.native_address, "dc": p.data_center, "rack": p.rack, "tokens": p.tokens} for p in peers]
    repl = dict(session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                (keyspace,)).one().replication)
    cls = repl.pop("class").rsplit(".", 1)[-1]
    strategy: dict[str, Any] = ({"class": cls, "replication_factor": int(repl["replication_factor"])}
                                if cls == "SimpleStrategy" else
                                {"class": cls, "replication": {dc: int(rf) for dc, rf in repl.items()}})
    return {"partitioner": local.partitioner, "strategy": strategy, "local_dc": local.data_center,
            "nodes": [{**n, "address": str(n["address"]), "tokens": sorted(int(t) for t in n["tokens"])}
                      for n in nodes]}


def test_tokens_and_replicas_equal_the_real_nodes(cluster: Any) -> None:
    from cassandra.concurrent import execute_concurrent_with_args
    from cassandra.metadata import Murmur3Token

    session = cluster.connect()
    ks = keys(3000)
    for name, replication in KEYSPACES.items():
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {name} WITH replication = {replication}")
        session.execute(f"CREATE TABLE IF NOT EXISTS {name}.t (k text PRIMARY KEY, v int)")
    insert = session.prepare("INSERT INTO tt_ring_simple.t (k, v) VALUES (?, ?)")
    results = execute_concurrent_with_args(session, insert, [(k, i) for i, k in enumerate(ks)], concurrency=64)
    assert all(ok for ok, _ in results)
    node_tokens = {r.k: r.t for r in session.execute("SELECT k, token(k) AS t FROM tt_ring_simple.t")}
    assert len(node_tokens) == len(ks)
    ours = key_tokens(pa.table({"key": pa.array(ks)}))
    assert ours.tolist() == [node_tokens[k] for k in ks]

    cluster.refresh_schema_metadata()
    token_map = cluster.metadata.token_map
    for name in KEYSPACES:
        doc = node_ring(session, name)
        servers, rf = ring_size(doc)
        sim = CassandraDeployment(servers=servers, replication=rf, ring=doc).cluster()
        assert sim.ring is not None
        addresses = np.array([n.address for n in sim.ring.nodes])
        groups = sim.groups_of(ours).astype(np.int64)
        placed = [set(row) for row in addresses[sim.ring.replica_table()[groups]]]
        driver = [{h.address for h in token_map.get_replicas(name, Murmur3Token(int(t)))} for t in ours]
        assert placed == driver
        assert all(len(p) == 1 for p in placed)
