"""Exact statistics of small weighted histograms (value → weight) on the driver.

Spark reduces the raw rows to histograms (multiget sizes, access counts, value sizes); everything else is
computed here exactly, without a second pass over the data.

Percentiles are *nearest-rank*: the p-quantile is the smallest value whose cumulative weight reaches
p · total weight (so p50 of [1, 2, 3, 4] is 2, p100 is the maximum).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = [
    "largest_jump",
    "quantile",
    "share_above",
    "skewness",
    "top_share",
    "top_share_by",
    "weighted_mean",
]

Array = npt.NDArray[np.float64] | npt.NDArray[np.int64]


def _sorted(values: Array, weights: Array) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    return v[order], w[order]


def quantile(values: Array, weights: Array, q: float) -> float | None:
    """Nearest-rank weighted q-quantile (0 < q <= 1); None for an empty histogram."""
    v, w = _sorted(values, weights)
    total = float(w.sum())
    if v.size == 0 or total <= 0:
        return None
    cum = np.cumsum(w)
    i = int(np.searchsorted(cum, q * total * (1 - 1e-12), side="left"))
    return float(v[min(i, v.size - 1)])


def weighted_mean(values: Array, weights: Array) -> float | None:
    w = np.asarray(weights, dtype=np.float64)
    if w.sum() <= 0:
        return None
    return float(np.average(np.asarray(values, dtype=np.float64), weights=w))


def skewness(values: Array, weights: Array) -> float | None:
    """Population (Fisher–Pearson, biased) skewness m3 / m2^1.5, as Spark's `skewness`; None if undefined."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if w.sum() <= 0:
        return None
    mu = float(np.average(v, weights=w))
    m2 = float(np.average((v - mu) ** 2, weights=w))
    if m2 <= 0:
        return None
    m3 = float(np.average((v - mu) ** 3, weights=w))
    return float(m3 / m2**1.5)


def top_share(values: Array, weights: Array, frac: float) -> float | None:
    """Share of the total Σ value·weight held by the largest ceil(frac · Σ weight) items
    (weights = item counts; a value's items may be split at the boundary)."""
    return top_share_by(values, weights, values, frac)


def top_share_by(order: Array, weights: Array, amounts: Array, frac: float) -> float | None:
    """Share of Σ amount·weight held by the ceil(frac · Σ weight) items with the largest `order`
    (each histogram row = `weights` items, each item worth `amount`)."""
    o = np.asarray(order, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    a = np.asarray(amounts, dtype=np.float64)
    idx = np.argsort(-o, kind="stable")
    w, a = w[idx], a[idx]
    total_items = float(w.sum())
    total = float(np.sum(a * w))
    if total_items <= 0 or total <= 0:
        return None
    take = float(math.ceil(frac * total_items - 1e-9))
    before = np.concatenate([[0.0], np.cumsum(w)[:-1]])
    n = np.clip(take - before, 0.0, w)
    return float(np.sum(n * a)) / total


def share_above(values: Array, weights: Array, threshold: float) -> float | None:
    """Share of the weight on values strictly above `threshold`."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    total = float(w.sum())
    if total <= 0:
        return None
    return float(w[v > threshold].sum()) / total


def largest_jump(
    values: Array, weights: Array, lo: float = 0.5, hi: float = 0.999, steps: int = 500
) -> float | None:
    """The value below the largest relative gap between consecutive quantiles in [lo, hi]:
    where a demand model proportional to value size puts its largest jump
    (Héron's THR_L choice from its Fig 7, applied to the real sizes)."""
    v, w = _sorted(values, weights)
    total = float(w.sum())
    if v.size < 2 or total <= 0:
        return None
    cum = np.cumsum(w)
    idx = np.searchsorted(cum, np.linspace(lo, hi, steps) * total * (1 - 1e-12), side="left")
    pts = v[np.minimum(idx, v.size - 1)]
    pts = pts[pts > 0]
    if pts.size < 2:
        return None
    ratios = pts[1:] / pts[:-1]
    i = int(np.argmax(ratios))
    if ratios[i] <= 1.0:
        return None
    return float(pts[i])
