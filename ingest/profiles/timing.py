"""When requests arrive and how the hot keys move over time: the time-dependent part of a profile.

`PoissonArrivals` is the stationary process every profile uses by default (exponential gaps at `rate`).
`CyclicArrivals` is a non-homogeneous Poisson process whose intensity follows a daily cycle with seeded bursts
on top; `KeyDrift` re-maps key ranks to key ids per time epoch so the hot set moves during the trace.

Arrivals are drawn block by block (`ArrivalClock.next`) from the block's random stream, so a trace depends only
on (profile, options, requests, seed, rate). Where bursts fall and how the keys drift are pure functions of
(seed, time) through a SplitMix64 hash (`key_uniform`), not of the random streams.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Final

import numpy as np
import numpy.typing as npt

from ingest.profiles.values import key_uniform

__all__ = ["ArrivalClock", "Arrivals", "CyclicArrivals", "KeyDrift", "PoissonArrivals"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: Intensity cells per cycle at least (the cycle is evaluated at each cell's midpoint).
CELLS_PER_CYCLE: Final = 1440


class ArrivalClock(ABC):
    """The arrival times of one trace, drawn in consecutive blocks."""

    @abstractmethod
    def next(self, rng: np.random.Generator, n: int) -> F64:
        """Arrival times (seconds, non-decreasing) of the next `n` requests."""


class Arrivals(ABC):
    """An arrival process; `clock(seed, rate)` starts one trace at time 0 with long-run mean `rate` requests/s."""

    @abstractmethod
    def clock(self, seed: int, rate: float) -> ArrivalClock:
        """A fresh clock for one trace."""

    def intensity(self, t: F64, seed: int) -> F64:
        """Instantaneous rate relative to the long-run mean (1.0 everywhere for a stationary process)."""
        return np.ones_like(t, dtype=np.float64)


class _PoissonClock(ArrivalClock):
    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.t = 0.0

    def next(self, rng: np.random.Generator, n: int) -> F64:
        ts = self.t + np.cumsum(rng.exponential(1.0 / self.rate, n))
        self.t = float(ts[-1])
        return np.asarray(ts, dtype=np.float64)


class PoissonArrivals(Arrivals):
    """Stationary Poisson arrivals: exponential gaps, the first arrival one gap after 0."""

    def clock(self, seed: int, rate: float) -> ArrivalClock:
        return _PoissonClock(rate)


class CyclicArrivals(Arrivals):
    """Non-homogeneous Poisson arrivals: a daily cycle times seeded bursts, normalized to a long-run mean of 1.

    Relative intensity at time t: `(1 - amplitude·cos(2πt/period_s)) · (burst_factor if t is in a burst else 1)
    / (1 + p·(burst_factor - 1))`, with p = bursts·burst_s/period_s the fraction of time in bursts. Time is cut
    into burst slots of `burst_s` seconds; slot k is a burst when a hash of (seed, k) is below p. The cycle starts
    at its trough (t = 0 is "midnight") and peaks at period_s/2. The intensity is held constant over cells of at
    most period_s/1440 seconds (a whole number of cells per burst slot), and times are drawn exactly for that
    piecewise-constant intensity by inverting its integral (unit-exponential gaps in integrated time).
    """

    SALT: Final = 0x4255525354  # "BURST"

    def __init__(self, period_s: float, amplitude: float, bursts: float, burst_s: float, burst_factor: float) -> None:
        self.period_s = period_s
        self.amplitude = amplitude
        self.burst_s = burst_s
        self.burst_factor = burst_factor
        self.burst_probability = bursts * burst_s / period_s
        self.cells_per_slot = max(1, math.ceil(burst_s * CELLS_PER_CYCLE / period_s))
        self.cell_s = burst_s / self.cells_per_slot
        self.norm = 1.0 + self.burst_probability * (burst_factor - 1.0)
        self.floor = (1.0 - amplitude) / self.norm  # smallest relative intensity

    def in_burst(self, slots: I64, seed: int) -> npt.NDArray[np.bool_]:
        """Whether each burst slot (index of a `burst_s` interval) is a burst for this seed."""
        u = key_uniform(slots, (seed * 0x9E3779B1) ^ self.SALT)
        return np.asarray(u < self.burst_probability, dtype=np.bool_)

    def _cells(self, cells: I64, seed: int) -> F64:
        mid = (cells.astype(np.float64) + 0.5) * self.cell_s
        cycle = 1.0 - self.amplitude * np.cos(2.0 * np.pi * mid / self.period_s)
        burst = np.where(self.in_burst(cells // self.cells_per_slot, seed), self.burst_factor, 1.0)
        return np.asarray(cycle * burst / self.norm, dtype=np.float64)

    def intensity(self, t: F64, seed: int) -> F64:
        return self._cells(np.floor(np.asarray(t, dtype=np.float64) / self.cell_s).astype(np.int64), seed)

    def clock(self, seed: int, rate: float) -> ArrivalClock:
        return _CyclicClock(self, seed, rate)


class _CyclicClock(ArrivalClock):
    """State between blocks: the last arrival `t` and the integrated intensity `u` (in requests) at `t`."""

    def __init__(self, model: CyclicArrivals, seed: int, rate: float) -> None:
        self.model = model
        self.seed = seed
        self.rate = rate
        self.t = 0.0
        self.u = 0.0

    def next(self, rng: np.random.Generator, n: int) -> F64:
        m = self.model
        targets = self.u + np.cumsum(rng.exponential(1.0, n))
        out = np.empty(n, dtype=np.float64)
        done = 0
        while done < n:
            need = float(targets[-1] - self.u)
            first = math.floor(self.t / m.cell_s)
            count = min(1_000_000, max(2, math.ceil(need / (self.rate * m.cell_s * m.floor)) + 2))
            cells = np.arange(first, first + count, dtype=np.int64)
            per_s = self.rate * m._cells(cells, self.seed)  # requests per second in each cell
            ends = (cells + 1).astype(np.float64) * m.cell_s
            widths = np.diff(np.concatenate(([self.t], ends)))
            cum = self.u + np.cumsum(per_s * widths)  # integrated intensity at each cell's end
            pending = targets[done:]
            idx = np.searchsorted(cum, pending, side="left")
            fit = int(np.searchsorted(idx, count, side="left"))  # targets that fall inside these cells
            if fit:
                i = idx[:fit]
                out[done : done + fit] = ends[i] - (cum[i] - pending[:fit]) / per_s[i]
                done += fit
            if done < n:
                self.t, self.u = float(ends[-1]), float(cum[-1])
            else:
                self.t, self.u = float(out[-1]), float(targets[-1])
        return np.maximum.accumulate(out)  # rounding never makes time run backwards


class KeyDrift:
    """The hot set moves: in epoch e = ⌊t / drift_s⌋ key rank r is key id (r + shift_e) mod key_space, with
    shift_e a hash of (seed, e). A bijection per epoch, so keys stay distinct within a request."""

    SALT: Final = 0x4452494654  # "DRIFT"

    def __init__(self, drift_s: float, key_space: int) -> None:
        self.drift_s = drift_s
        self.key_space = key_space

    def shifts(self, epochs: I64, seed: int) -> I64:
        u = key_uniform(epochs, (seed * 0x85EBCA77) ^ self.SALT)
        return np.asarray(np.floor(u * self.key_space), dtype=np.int64)

    def apply(self, ranks: I64, row_ts: F64, seed: int) -> I64:
        """Key ids of key ranks drawn at times `row_ts` (one time per row)."""
        epochs = np.floor(row_ts / self.drift_s).astype(np.int64)
        return np.asarray((ranks + self.shifts(epochs, seed)) % self.key_space, dtype=np.int64)
