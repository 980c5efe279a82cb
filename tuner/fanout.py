"""Fan-out of a trace on the tuner's simulated cluster: the `fanout` part of `summary.json`, re-derived.

`tailtune analyze` computes fan-out for its own topology (16 servers by default) while the Cassandra evaluator
simulates another (Rein's 128 servers); K and R ranges must come from the topology that is replayed. This
re-derives, in numpy on the evaluator's own kvsim ring (the one the replay uses: `Cluster.groups_of` +
`replica_table`, primary replica first), the same figures as analysis/summary.py's `fanout` section:
per request, `opsets` = distinct primary servers touched and `bottleneck` = ops in its largest opset; weighted
means and nearest-rank p99 over requests (analysis/histstats.py's definitions). It costs one pass over the ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import kvsim

__all__ = ["fanout_for_cluster", "nearest_rank"]


def nearest_rank(values: npt.NDArray[np.int64], q: float) -> float:
    """Nearest-rank q-quantile of unweighted values (histstats.quantile with unit weights)."""
    v = np.sort(values)
    i = int(np.searchsorted(np.arange(1, v.size + 1), q * v.size * (1 - 1e-12), side="left"))
    return float(v[min(i, v.size - 1)])


def fanout_for_cluster(
    offsets: npt.NDArray[np.int64], tokens: npt.NDArray[np.int64], cluster: kvsim.Cluster
) -> dict[str, Any]:
    """The `fanout` summary section of requests `offsets` (n + 1) over op `tokens` on `cluster`."""
    n = len(offsets) - 1
    out: dict[str, Any] = {
        "servers": cluster.servers,
        "replication": cluster.replication,
        "ring": "kvsim ring of the simulated cluster (tuner re-derivation)",
        "opset_server": "primary replica",
    }
    if n < 1 or int(offsets[-1]) == 0:
        return out
    groups = np.frombuffer(cluster._raw.groups_of(np.ascontiguousarray(tokens, dtype=np.int64)), dtype=np.uint32)
    primary = cluster.replica_table()[groups.astype(np.int64), 0].astype(np.int64)
    req = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    pair = req * cluster.servers + primary
    uniq, counts = np.unique(pair, return_counts=True)  # sorted by request, then server
    owner = uniq // cluster.servers
    opsets = np.bincount(owner, minlength=n).astype(np.int64)
    bottleneck = np.zeros(n, dtype=np.int64)
    np.maximum.at(bottleneck, owner, counts.astype(np.int64))
    touched = opsets > 0
    opsets, bottleneck = opsets[touched], bottleneck[touched]
    out |= {
        "opsets_mean": float(opsets.mean()),
        "opsets_p99": nearest_rank(opsets, 0.99),
        "opsets_max": int(opsets.max()),
        "bottleneck_mean": float(bottleneck.mean()),
        "bottleneck_p99": nearest_rank(bottleneck, 0.99),
        "bottleneck_max": int(bottleneck.max()),
    }
    return out
