"""The real ring in the simulator: a key's replicas on an explicit ring are the ones the DataStax Python driver's own
placement code computes (`Metadata.rebuild_token_map` + `KeyspaceMetadata` strategies + `get_replicas`, the code
the driver runs on a live cluster's `system.local` / `system.peers` rows), and a deployment replays on it."""

from __future__ import annotations

import json
from typing import Any

import kvsim
import numpy as np
import pyarrow as pa
import pytest

from base.errors import BadInputError
from simulation.cassandra import CassandraDeployment, ring_size
from simulation.layout import key_tokens

MURMUR3 = "org.apache.cassandra.dht.Murmur3Partitioner"


def random_ring(seed: int, layout: list[tuple[str, str, int]], tokens: int, strategy: dict[str, Any],
                local_dc: str = "dc1") -> dict[str, Any]:
    """A ring document: (dc, rack, nodes) groups, `tokens` random distinct Murmur3 tokens per node."""
    rng = np.random.default_rng(seed)
    n = sum(k for _, _, k in layout)
    toks = np.unique(rng.integers(-(2**63), 2**63 - 1, size=n * tokens * 2, dtype=np.int64))
    toks = rng.permutation(toks)[: n * tokens]
    nodes, i = [], 0
    for dc, rack, k in layout:
        for _ in range(k):
            nodes.append({"address": f"10.0.{i // 250}.{i % 250 + 1}", "dc": dc, "rack": rack,
                          "tokens": [int(t) for t in toks[i * tokens:(i + 1) * tokens]]})
            i += 1
    return {"partitioner": MURMUR3, "strategy": strategy, "local_dc": local_dc, "nodes": nodes}


SIMPLE_RING = random_ring(11, [("dc1", "r1", 6)], 16, {"class": "SimpleStrategy", "replication_factor": 3})
NTS_RING = random_ring(
    12, [("dc1", "r1", 3), ("dc1", "r2", 3), ("dc2", "r1", 3), ("dc2", "r2", 3)], 16,
    {"class": "NetworkTopologyStrategy", "replication": {"dc1": 3, "dc2": 2}},
)


def keys(n: int) -> list[str]:
    """Text keys, a third of them non-ASCII (Cassandra's hash reads their tail bytes signed)."""
    out = []
    for i in range(n):
        out.append([f"user:{i}", f"ключ-{i}", f"é{i}🙂"][i % 3])
    return out


def driver_replicas(doc: dict[str, Any], key_list: list[str]) -> list[set[str]]:
    """Each key's replica addresses as the Python driver places them."""
    from cassandra.metadata import KeyspaceMetadata, Metadata
    from cassandra.policies import SimpleConvictionPolicy
    from cassandra.pool import Host

    meta = Metadata()
    hosts = {Host(n["address"], SimpleConvictionPolicy, datacenter=n["dc"], rack=n["rack"]):
             [str(t) for t in n["tokens"]] for n in doc["nodes"]}
    meta.rebuild_token_map(doc["partitioner"], hosts)
    s = doc["strategy"]
    options = ({"replication_factor": str(s["replication_factor"])} if s["class"] == "SimpleStrategy"
               else {dc: str(rf) for dc, rf in s["replication"].items()})
    meta.keyspaces["ks"] = KeyspaceMetadata("ks", True, s["class"], options)
    return [{h.address for h in meta.get_replicas("ks", k.encode())} for k in key_list]


@pytest.mark.parametrize("doc", [SIMPLE_RING, NTS_RING], ids=["simple-rf3", "nts-2dc-2racks"])
def test_replicas_equal_the_drivers_placement(doc: dict[str, Any]) -> None:
    ks = keys(3000)
    servers, rf = ring_size(doc)
    dep = CassandraDeployment(servers=servers, replication=rf, ring=doc)
    cluster = dep.cluster()
    ring = cluster.ring
    assert ring is not None
    tokens = key_tokens(pa.table({"key": pa.array(ks)}))  # the path a trace's keys take
    groups = cluster.groups_of(tokens).astype(np.int64)
    addresses = np.array([n.address for n in ring.nodes])
    ours = [set(row) for row in addresses[ring.replica_table()[groups]]]
    want = driver_replicas(doc, ks)
    assert ours == want
    # the read group: the replicas in the local datacenter, as servers (the local nodes in node order)
    local = {n["address"] for n in doc["nodes"] if n["dc"] == doc["local_dc"]}
    server_addr = addresses[ring.server_nodes()]
    reads = [set(row) for row in server_addr[cluster.replica_table()[groups]]]
    assert reads == [w & local for w in want]
    assert all(len(r) == rf for r in reads)


def test_simple_ring_read_groups_are_every_replica_and_nts_the_local_ones() -> None:
    assert ring_size(SIMPLE_RING) == (6, 3)
    assert ring_size(NTS_RING) == (6, 3)
    assert ring_size({**NTS_RING, "local_dc": "dc2"}) == (6, 2)
    ring = kvsim.Ring.from_dict(NTS_RING)
    assert (ring.ranges, ring.width) == (12 * 16, 5)
    assert ring.server_nodes().tolist() == [0, 1, 2, 3, 4, 5]
    assert kvsim.Ring.from_dict(ring.as_dict()) == ring
    # every range's replicas: 3 distinct dc1 nodes on both racks, 2 dc2 nodes on distinct racks
    for row in ring.replica_table():
        nodes = [ring.nodes[i] for i in row]
        assert len(set(row.tolist())) == 5
        assert sorted(n.dc for n in nodes) == ["dc1"] * 3 + ["dc2"] * 2
        assert {n.rack for n in nodes if n.dc == "dc1"} == {"r1", "r2"}
        assert len({n.rack for n in nodes if n.dc == "dc2"}) == 2


def hand_ring() -> dict[str, Any]:
    # 3 nodes × 2 tokens, RF 2: ring -50 a, -20 b, 0 c, 10 a, 40 c, 70 b
    return {"partitioner": MURMUR3, "strategy": {"class": "SimpleStrategy", "replication_factor": 2},
            "local_dc": "dc1",
            "nodes": [{"address": "a", "dc": "dc1", "rack": "r1", "tokens": [10, -50]},
                      {"address": "b", "dc": "dc1", "rack": "r1", "tokens": [-20, 70]},
                      {"address": "c", "dc": "dc1", "rack": "r1", "tokens": [0, 40]}]}


def test_hand_worked_ring_through_the_binding() -> None:
    c = kvsim.Cluster.of_ring(kvsim.Ring.from_dict(hand_ring()), slots=2)
    assert (c.servers, c.replication, c.groups) == (3, 2, 6)
    assert c.replica_table().tolist() == [[0, 1], [1, 2], [2, 0], [0, 2], [2, 1], [1, 0]]
    assert c.groups_of([-50, -49, 0, 1, 70, 71, -(2**63), 2**63 - 1]).tolist() == [0, 1, 2, 3, 5, 0, 0, 0]


def _bad(doc: Any) -> str:
    with pytest.raises(BadInputError) as exc:
        CassandraDeployment(servers=3, replication=2, ring=doc).cluster()
    return str(exc.value)


def test_bad_rings_are_clear_errors_naming_the_field() -> None:
    doc = hand_ring()
    dup = json.loads(json.dumps(doc))
    dup["nodes"][2]["tokens"] = [0, 10]
    assert "field 'ring.nodes[2].tokens'" in _bad(dup) and "owned by nodes[0] and nodes[2]" in _bad(dup)
    big = json.loads(json.dumps(doc))
    big["strategy"]["replication_factor"] = 4
    assert "field 'ring.strategy.replication_factor'" in _bad(big)
    nts = json.loads(json.dumps(doc))
    nts["strategy"] = {"class": "NetworkTopologyStrategy", "replication": {"dc1": 4}}
    assert "field 'ring.strategy.replication.dc1'" in _bad(nts) and "3 nodes" in _bad(nts)
    nts["strategy"]["replication"] = {"dc1": 2, "dc3": 1}
    assert "field 'ring.strategy.replication.dc3'" in _bad(nts) and "no node" in _bad(nts)
    assert "field 'ring.local_dc'" in _bad({**doc, "local_dc": "dc9"})
    assert "field 'ring.partitioner'" in _bad({**doc, "partitioner": "org.apache.cassandra.dht.RandomPartitioner"})
    assert "field 'ring.strategy.class'" in _bad({**doc, "strategy": {"class": "LocalStrategy"}})
    typo = json.loads(json.dumps(doc))
    typo["nodes"][1]["tokens"][0] = "12"
    assert "field 'ring.nodes[1].tokens[0]'" in _bad(typo)
    typo["nodes"][1]["tokens"][0] = 2**63
    assert "out of range" in _bad(typo)
    same = json.loads(json.dumps(doc))
    same["nodes"][1]["address"] = "a"
    assert "field 'ring.nodes[1].address'" in _bad(same)
    assert "field 'ring.nodes'" in _bad({**doc, "nodes": []})
    assert "field 'ring.nodes[0].rack'" in _bad({**doc, "nodes": [{"address": "a", "dc": "dc1", "tokens": [1]}]})
    assert "field 'ring.local-dc'" in _bad({**doc, "local-dc": "dc1"})
    multi = json.loads(json.dumps(doc))
    multi["nodes"][2]["dc"] = "dc2"
    assert "NetworkTopologyStrategy" in _bad(multi)
    # servers and replication must be the ring's local datacenter's
    with pytest.raises(BadInputError, match=r"field 'servers'.*3 nodes in its local datacenter"):
        CassandraDeployment(servers=4, replication=2, ring=doc).cluster()
    with pytest.raises(BadInputError, match=r"field 'replication'.*RF 2"):
        CassandraDeployment(servers=3, replication=3, ring=doc).cluster()


def test_as_dict_and_cli_args_carry_the_ring() -> None:
    plain = CassandraDeployment()
    assert "ring" not in plain.as_dict() and "--ring" not in plain.cli_args()
    dep = CassandraDeployment(servers=3, replication=2, ring=hand_ring())
    assert dep.as_dict()["ring"] == hand_ring()
    assert CassandraDeployment.from_dict(dep.as_dict()) == dep
    args = dep.cli_args()
    assert json.loads(args[args.index("--ring") + 1]) == hand_ring()


def test_the_replay_reads_only_the_local_replicas() -> None:
    """A replay on the 2-datacenter ring: every op is served by a local replica of its key."""
    from simulation import cassandra, resolve

    dep = CassandraDeployment(servers=6, replication=3, ring=NTS_RING, slots=2, clients=8, load=0.5)
    ks = keys(1200)
    table = pa.table({"request_id": np.repeat(np.arange(400), 3), "key": pa.array(ks)})
    trace = cassandra.prepare(table, dep)
    res = cassandra.replay(trace, dep, resolve("fifo", {}), 0, record_ops=True)
    cluster = dep.cluster()
    rec = res.records
    assert rec is not None
    arrays = cassandra.materialize(trace, dep, 0).arrays()
    wl_tokens = cassandra.materialize(trace, dep, 0).tokens
    op_tokens = wl_tokens[arrays["op_input"].astype(np.int64)]
    groups = arrays["opset_group"][rec["opset"].astype(np.int64)].astype(np.int64)
    assert np.array_equal(cluster.groups_of(op_tokens).astype(np.int64), groups)
    reads = cluster.replica_table()[groups]
    assert bool((reads == rec["server"][:, None]).any(axis=1).all())
    # the local replicas of every key are dc1's nodes (servers 0..5), and every server serves some reads
    assert set(np.unique(rec["server"]).tolist()) == set(range(6))
