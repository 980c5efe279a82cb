"""Pieces shared by the scripts that drive real Cassandra nodes (`stock_cassandra`, `predicted_cassandra`): the
table they read, created and loaded the same way, and the trivial round trip (`SELECT release_version FROM
system.local`, one at a time) that both print as the client's own cost and the machine's noise."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

KEYSPACE = "tailtune_val"
TABLE = "kv"
TRIVIAL = "SELECT release_version FROM system.local"


def create_and_load(session: Any, *, replication: int, partitions: int, value_size: int) -> None:
    """`KEYSPACE.TABLE (k text PRIMARY KEY, v blob)` with SimpleStrategy `replication`, holding partitions
    k0..k{partitions-1} of `value_size` bytes, written at CL ALL (every replica has every row before a read)."""
    from cassandra import ConsistencyLevel
    from cassandra.concurrent import execute_concurrent_with_args

    session.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                    f"{{'class': 'SimpleStrategy', 'replication_factor': {int(replication)}}}")
    session.execute(f"CREATE TABLE {KEYSPACE}.{TABLE} (k text PRIMARY KEY, v blob)")
    ins = session.prepare(f"INSERT INTO {KEYSPACE}.{TABLE} (k, v) VALUES (?, ?)")
    ins.consistency_level = ConsistencyLevel.ALL
    value = b"v" * value_size
    res = execute_concurrent_with_args(session, ins, [(f"k{i}", value) for i in range(partitions)],
                                       concurrency=64, raise_on_first_error=True)
    failed = sum(1 for r in res if not r.success)
    if failed:
        raise RuntimeError(f"loading {KEYSPACE}.{TABLE}: {failed} of {partitions} writes failed")


def trivial_round_trips_s(session: Any, reps: int = 300) -> npt.NDArray[np.float64]:
    """`reps` client-timed trivial round trips (s), one at a time."""
    t = np.empty(reps)
    for r in range(reps):
        t0 = time.perf_counter()
        session.execute(TRIVIAL)
        t[r] = time.perf_counter() - t0
    return t
