"""What the control plane's tests share: the calibration tests' table on the session's Cassandra node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.servers.cassandra_server import CassandraNode

#: The keyspace of the `cql` fixture's table `items` (50 partitions of 100 bytes).
CALIBRATION_KEYSPACE = "calib_ks"


@pytest.fixture(scope="module")
def cql(cassandra_node: CassandraNode) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5)
    ks = CALIBRATION_KEYSPACE
    try:
        session = cluster.connect()
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.items (k text PRIMARY KEY, v blob)")
        for i in range(50):
            session.execute(f"INSERT INTO {ks}.items (k, v) VALUES (%s, %s)", (f"key-{i}", b"x" * 100))
        yield session
    finally:
        cluster.shutdown()
