"""Request-level tables finished on the driver from the collected per-request arrays (numpy, exact).

The pipeline aggregates the raw rows by request in Spark and, when the trace has at most
`pipeline.Options.driver_requests` requests, collects each request's arrival time and size (16 bytes per
request) instead of running three more Spark jobs over them. The functions here then produce exactly the
tables of the Spark transforms they stand in for — `transforms.size_histogram`, `transforms.arrival_rate`
(same IEEE double arithmetic, so bit-identical) — and the inter-arrival statistics of
`transforms.inter_arrivals` with *exact* nearest-rank p50/p99 (see `histstats.quantile`) instead of
`percentile_approx`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = ["arrival_rate", "gap_stats", "size_histogram", "window_index"]


def window_index(ts: npt.NDArray[np.float64], t0: float, window_s: float, windows: int) -> npt.NDArray[np.int32]:
    """`transforms.window_index` on the driver: floor((ts - t0) / window_s), clamped to windows - 1 (int32)."""
    w = np.floor((np.asarray(ts, dtype=np.float64) - t0) / window_s).astype(np.int64)
    return np.minimum(w, windows - 1).astype(np.int32)


def size_histogram(sizes: npt.NDArray[np.int64]) -> pd.DataFrame:
    """`transforms.size_histogram`: size (int64) → requests (int64), ascending size."""
    values, counts = np.unique(np.asarray(sizes, dtype=np.int64), return_counts=True)
    return pd.DataFrame({"size": values.astype(np.int64), "requests": counts.astype(np.int64)})


def arrival_rate(ts: npt.NDArray[np.float64], t0: float, window_s: float, windows: int) -> pd.DataFrame:
    """`transforms.arrival_rate`: window (int32), start, requests (int64), rate — every window, empty ones too."""
    counts = np.bincount(window_index(ts, t0, window_s, windows), minlength=windows).astype(np.int64)
    win = np.arange(windows, dtype=np.int32)
    return pd.DataFrame({
        "window": win,
        "start": win.astype(np.float64) * window_s,
        "requests": counts,
        "rate": counts.astype(np.float64) / window_s,
    })


def gap_stats(ts: npt.NDArray[np.float64], t0: float, window_s: float, windows: int) -> dict[str, float | None]:
    """n, mean, std (population), p50, p99 (exact nearest-rank) of the gaps between consecutive arrivals
    within each window — the gaps `transforms.inter_arrivals` yields (the ones crossing a window
    boundary left out). Values are None when there is no gap."""
    s = np.sort(np.asarray(ts, dtype=np.float64), kind="stable")
    w = window_index(s, t0, window_s, windows)  # non-decreasing in ts: each window is one contiguous run
    gaps = np.sort((s[1:] - s[:-1])[w[1:] == w[:-1]])
    n = int(gaps.size)
    if n == 0:
        return {"n": 0, "mean": None, "std": None, "p50": None, "p99": None}

    def nearest_rank(q: float) -> float:  # histstats.quantile with unit weights: cumulative weight i + 1
        return float(gaps[min(max(math.ceil(q * n * (1 - 1e-12)) - 1, 0), n - 1)])

    return {"n": n, "mean": float(gaps.mean()), "std": float(gaps.std()), "p50": nearest_rank(0.5),
            "p99": nearest_rank(0.99)}
