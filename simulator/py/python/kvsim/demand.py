"""Size-aware service demand: mean demand = t0 + value_size / bandwidth, unknown sizes filled with
the dataset's median, and the default large-value threshold THR_L derived from the same model.

Defaults (docs/simulator-replicas.md): a 1 KiB value costs the slot's base service time 1/service_rate and a
512 KiB value 32× that (Héron Fig. 7).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """NaN / negative sizes → the median over distinct keys (over ops when `keys` is None) of the known ones."""
    arr = np.array(sizes, dtype=np.float64, copy=True)
    bad = ~np.isfinite(arr) | (arr < 0)
    known = ~bad
    if not known.any():
        raise ParameterError("parameter 'value_size' has no known value: cannot take the median")
    if keys is not None:
        k = np.asarray(keys)[known]
        _, first = np.unique(k, return_index=True)
        median = float(np.median(arr[known][first]))
    else:
        median = float(np.median(arr[known]))
    arr[bad] = median
    return SizeInfo(
        sizes=arr,
        median_bytes=median,
        unknown=int(bad.sum()),
        heterogeneous=bool(np.unique(arr).size > 1),
    )


def default_thr_l(model: DemandModel, median_bytes: float) -> float:
    """THR_L: the size whose mean demand is twice the median value's (a value above it is at least twice as
    slow to serve as a typical one). For 1 KiB / 512 KiB at the default calibration: 17 903 bytes."""
    return model.size_for_mean(2.0 * float(model.mean_s(median_bytes)))
