"""Evidence from one replay: batch means.

With several seeds, the interval and the paired test behind a verdict come from the per-seed values. With one
seed there is no spread across seeds, and an interval of zero width is not an estimate. Then the measured
requests of the replay (after the warm-up cut, in arrival order) are cut into `BATCHES` contiguous batches and
each batch's metrics are computed on its own; the half-width is the Student-t interval of the batch values,
and the paired test compares the candidate's and the baseline's batch b — the same requests, arrivals and
demands (common random numbers), so the pairs share their workload exactly. Contiguous batches keep the
requests' correlation inside a batch, which is what batch means need; 20 batches of at least 50 requests each
(fewer batches on short traces, at least 2) — see docs/tuner.md, "Evidence".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tuner.objective import Metrics, Objective, mean_ci

__all__ = ["BATCHES", "MIN_BATCH", "batch_metrics", "batch_values", "measured"]

BATCHES = 20
MIN_BATCH = 50


def measured(latencies_ms: npt.NDArray[np.float64], warmup: float) -> npt.NDArray[np.float64]:
    """The measured requests of a replay's latencies (arrival order): without the first `warmup` fraction (the
    simulator's warm-up cut), at least the last one kept."""
    n = latencies_ms.size
    return np.asarray(latencies_ms[min(math.floor(warmup * n), max(n - 1, 0)):], dtype=np.float64)


def batch_metrics(latencies_ms: npt.NDArray[np.float64], warmup: float) -> list[Metrics]:
    """Metrics of each contiguous batch of the measured requests (arrival order); [] when too few requests."""
    kept = measured(latencies_ms, warmup)
    k = min(BATCHES, kept.size // MIN_BATCH)
    if k < 2:
        return []
    out = []
    for part in np.array_split(kept, k):
        p50, p95, p99, p999 = np.percentile(part, [50, 95, 99, 99.9])
        out.append(Metrics(float(p50), float(p95), float(p99), float(p999), float(part.mean())))
    return out


def batch_values(batches: Sequence[Metrics], objective: Objective) -> tuple[list[list[float]], list[float]]:
    """Per-batch objective values and, per objective term, the batch-means half-width."""
    values = [objective.values(m) for m in batches]
    halves = [mean_ci([v[i] for v in values])[1] for i in range(len(objective.terms))]
    return values, halves
