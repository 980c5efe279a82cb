"""Size-aware service demand: mean demand = t0 + value_size / bandwidth, unknown sizes filled with
the dataset's median, and the default large-value threshold THR_L derived from the same model.

Defaults (docs/simulator-replicas.md): a 1 KiB value costs the slot's base service time 1/service_rate and a
512 KiB value 32× that (Héron Fig. 7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kvsim import _kvsim
from kvsim._kvsim import ParameterError

__all__ = ["DEMAND_DISTS", "DemandModel", "SizeInfo", "default_thr_l", "fill_unknown_sizes"]

DEMAND_DISTS = ("exponential", "deterministic", "lognormal")


@dataclass(frozen=True)
class DemandModel:
    """Mean demand of an op reading `bytes`: t0_s + bytes / bandwidth_bps (seconds)."""

    t0_s: float
    bandwidth_bps: float

    @classmethod
    def default(cls, service_rate: float) -> DemandModel:
        t0, bw = _kvsim.default_demand_model(float(service_rate))
        return cls(t0_s=float(t0), bandwidth_bps=float(bw))

    def __post_init__(self) -> None:
        if not (np.isfinite(self.t0_s) and self.t0_s >= 0.0):
            raise ParameterError(f"parameter 't0_s' = {self.t0_s} is out of range: valid ≥ 0 s")
        if not (np.isfinite(self.bandwidth_bps) and self.bandwidth_bps > 0.0):
            raise ParameterError(
                f"parameter 'bandwidth_bps' = {self.bandwidth_bps} is out of range: valid > 0 bytes/s"
            )

    def mean_s(self, sizes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        return self.t0_s + np.asarray(sizes, dtype=np.float64) / self.bandwidth_bps

    def size_for_mean(self, mean_s: float) -> float:
        """The value size whose mean demand is `mean_s`."""
        return max(0.0, (mean_s - self.t0_s) * self.bandwidth_bps)


@dataclass(frozen=True)
class SizeInfo:
    """Per-op value sizes after filling, and what was filled."""

    sizes: npt.NDArray[np.float64]
    median_bytes: float
    unknown: int
    heterogeneous: bool


def fill_unknown_sizes(sizes: npt.ArrayLike, keys: npt.ArrayLike | None = None) -> SizeInfo:
    """NaN / negative sizes → the median over distinct keys (over ops when `keys` is None) of the known ones: each
    distinct key counts once, with the size of its first op whose size is known.

    `keys` may be any array of comparable keys; dense non-negative integer codes (as `pyarrow.compute.
    dictionary_encode` gives: each distinct key one integer below about twice the number of ops) take a linear
    pass instead of a sort of the keys, with the same result."""
    arr = np.array(sizes, dtype=np.float64, copy=True)
    bad = ~np.isfinite(arr) | (arr < 0)
    known = ~bad
    if not known.any():
        raise ParameterError("parameter 'value_size' has no known value: cannot take the median")
    known_sizes = arr[known]
    if keys is not None:
        first = _first_of_each_key(np.asarray(keys)[known])
        median = float(np.median(known_sizes[first]))
    else:
        median = float(np.median(known_sizes))
    del known_sizes
    unknown = int(bad.sum())
    arr[bad] = median
    return SizeInfo(
        sizes=arr,
        median_bytes=median,
        unknown=unknown,
        # every size is finite here: more than one distinct value ⇔ one differs from the first
        heterogeneous=bool((arr != arr[0]).any()),
    )


#: Ops per pass of `_first_of_each_key`'s dense path (bounds its index array: 8 B × this).
_FIRST_CHUNK = 1 << 22


def _first_of_each_key(keys: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """The index of each distinct key's first occurrence in `keys` (in no particular order)."""
    n = keys.size
    if keys.dtype.kind in "iu" and n:
        lo, hi = int(keys.min()), int(keys.max())
        if lo >= 0 and hi < 2 * n + 1024:
            # dense codes: the smallest index per code, chunk by chunk in order (a later chunk never lowers it)
            first = np.full(hi + 1, n, dtype=np.int64)
            for start in range(0, n, _FIRST_CHUNK):
                stop = min(n, start + _FIRST_CHUNK)
                np.minimum.at(first, keys[start:stop], np.arange(start, stop, dtype=np.int64))
            return first[first < n]
    _, idx = np.unique(keys, return_index=True)
    return np.asarray(idx, dtype=np.int64)


def default_thr_l(model: DemandModel, median_bytes: float) -> float:
    """THR_L: the size whose mean demand is twice the median value's (a value above it is at least twice as
    slow to serve as a typical one). For 1 KiB / 512 KiB at the default calibration: 17 903 bytes."""
    return model.size_for_mean(2.0 * float(model.mean_s(median_bytes)))
