"""Pieces shared by the scripts that drive real Cassandra nodes (`stock_cassandra`, `predicted_cassandra`,
`storm_cassandra`): the table they read, created and loaded the same way; the trivial round trip (`SELECT
release_version FROM system.local`, one at a time) that they print as the client's own cost and the machine's noise;
and the table's metrics that only JMX exposes (the speculative retries and the threshold in use)."""

from __future__ import annotations

import time
from collections.abc import Sequence
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


def table_metric(nodes: Sequence[Any], name: str, field: str) -> list[float] | None:
    """The table's metric `name` (its attribute `field`: `Count` of a counter, `Value` of a gauge) on each of
    `nodes`, read over the node's local JMX port with the SJK bundled in Cassandra's nodetool (one JVM started per
    node: call it outside a measured part); None, with the reason printed, when a node does not answer.
    `SpeculativeRetries` (Count) and `SpeculativeSampleLatencyNanos` (Value, the threshold a coordinator waits
    before it speculates) exist only over JMX."""
    from tests.servers.cassandra_server import nodetool

    bean = f"org.apache.cassandra.metrics:type=Table,keyspace={KEYSPACE},scope={TABLE},name={name}"
    got: list[float] = []
    for n in nodes:
        try:
            out = nodetool(n, "sjk", "mx", "-b", bean, "-mg", "-f", field, host="127.0.0.1")
        except RuntimeError as exc:
            print(f"  ({name} not read from {n.host}: {str(exc)[-300:]})", flush=True)
            return None
        nums = [x for x in out.split() if x.lstrip("-").isdigit()]
        if not nums:
            print(f"  ({name} not read from {n.host}: {out.strip()[-300:]})", flush=True)
            return None
        got.append(float(nums[-1]))
    return got
