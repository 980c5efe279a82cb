"""Per-op records for the slack bounds: a `fifo` replay of (a prefix of) the trace in the simulator (`kvsim`)
at utilizations 10%…90%, as a Spark DataFrame in the `analysis.slack` layout (times in ms).

Choices (docs/analysis.md, "Slack bounds"): the first `max_requests` requests by arrival time keep their
key sets; arrivals are the simulator's Poisson process at `load = utilization` (trace timestamps are not
reused, so every utilization level is reachable); cluster = the simulator's defaults with the fan-out
topology's servers and replication; warm-up cut 0 (every op recorded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["UTILIZATIONS", "available", "replay_ops"]

UTILIZATIONS = tuple(round(0.1 * i, 1) for i in range(1, 10))


def available() -> str | None:
    """None when kvsim can record per-op replays, else the reason it cannot."""
    try:
        import kvsim
    except ImportError:
        return "the simulator (kvsim) is not installed"
    del kvsim
    return None


def _prefix(df: DataFrame, reqs: DataFrame, max_requests: int) -> tuple[np.ndarray, list[str]]:
    """Offsets and keys of the first `max_requests` requests (by arrival, then id)."""
    first = reqs.orderBy("ts", "request_id").limit(max_requests).select("request_id", "ts")
    rows = (df.select("request_id", "key").join(F.broadcast(first), "request_id")
            .orderBy("ts", "request_id", "key").select("request_id", "key").toPandas())
    ids = rows["request_id"].to_numpy()
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    offsets = np.r_[starts, ids.size].astype(np.int64)
    return offsets, [str(k) for k in rows["key"].tolist()]


def replay_ops(
    spark: SparkSession, df: DataFrame, reqs: DataFrame, *, servers: int, replication: int,
    max_requests: int = 5000, utilizations: tuple[float, ...] = UTILIZATIONS, seed: int = 1,
) -> DataFrame:
    """The per-op table (utilization, request_id, opset, server, enqueue, start, end, demand in ms)."""
    import kvsim
    import pyarrow as pa

    offsets, keys = _prefix(df, reqs, max_requests)
    cluster = kvsim.Cluster(servers=servers, replication=replication)
    parts = []
    for u in utilizations:
        w = kvsim.Workload(cluster, offsets, keys=keys, load=u, seed=seed)
        rec = kvsim.replay(w, kvsim.ReplayConfig(policy="fifo", warmup=0.0, record_ops=True)).records
        assert rec is not None
        n = rec["request"].size
        parts.append(pa.table({
            "utilization": np.full(n, u, dtype=np.float64),
            "request_id": rec["request"].astype(np.int64),
            "opset": rec["opset"].astype(np.int64),
            "server": rec["server"].astype(np.int64),
            "enqueue": rec["enqueue_ns"].astype(np.float64) / 1e6,
            "start": rec["start_ns"].astype(np.float64) / 1e6,
            "end": rec["end_ns"].astype(np.float64) / 1e6,
            "demand": rec["demand_ns"].astype(np.float64) / 1e6,
        }))
    return spark.createDataFrame(pa.concat_tables(parts))
