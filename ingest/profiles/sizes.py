"""Multiget-size distributions: how many keys each request asks for.

Every model draws sizes as int64 arrays from a numpy Generator and knows its exact probability mass function,
so tests and `Profile.expected()` compare measured statistics with the model instead of hard-coded numbers.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ingest.profiles.inversion import invert_cdf

__all__ = [
    "ConstantSizes",
    "LognormalSizes",
    "MixtureSizes",
    "RequestSizes",
    "SinglesPlusPowerLawSizes",
    "power_law_exponent_for_mean",
]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class RequestSizes(ABC):
    """A distribution of multiget sizes on 1..max_size."""

    @property
    @abstractmethod
    def max_size(self) -> int:
        """The largest size this model can draw."""

    @abstractmethod
    def pmf(self) -> F64:
        """P(size = k) for k = 0, 1, ... (covers 1..max_size; index 0 is always 0)."""

    def draw(self, rng: np.random.Generator, n: int) -> I64:
        """n sizes by inversion of the exact CDF (one uniform per request)."""
        return invert_cdf(self._cdf, rng.random(n))

    @cached_property
    def _cdf(self) -> F64:
        cdf = np.cumsum(self.pmf())
        cdf /= cdf[-1]
        return cdf

    def mean(self) -> float:
        p = self.pmf()
        return float(np.dot(p, np.arange(p.size)))

    def multi_fraction(self) -> float:
        """P(size > 1)."""
        return float(1.0 - self.pmf()[1])


class ConstantSizes(RequestSizes):
    """Every request asks for exactly `size` keys."""

    def __init__(self, size: int) -> None:
        self.size = size

    @property
    def max_size(self) -> int:
        return self.size

    def pmf(self) -> F64:
        p = np.zeros(self.size + 1)
        p[self.size] = 1.0
        return p

    def draw(self, rng: np.random.Generator, n: int) -> I64:
        return np.full(n, self.size, dtype=np.int64)


class MixtureSizes(RequestSizes):
    """Each request independently has `large` keys with probability `large_probability`, else `small` keys."""

    def __init__(self, small: int, large: int, large_probability: float) -> None:
        self.small = small
        self.large = large
        self.large_probability = large_probability

    @property
    def max_size(self) -> int:
        """The larger size that has positive probability."""
        if self.large_probability <= 0.0:
            return self.small
        if self.large_probability >= 1.0:
            return self.large
        return max(self.small, self.large)

    def pmf(self) -> F64:
        p = np.zeros(max(self.small, self.large) + 1)
        p[self.small] += 1.0 - self.large_probability
        p[self.large] += self.large_probability
        return p

    def draw(self, rng: np.random.Generator, n: int) -> I64:
        is_large = rng.random(n) < self.large_probability
        return np.where(is_large, self.large, self.small).astype(np.int64)


class LognormalSizes(RequestSizes):
    """round(exp(N(mu, sigma))), at least 1, at most `cap` (the cap only bounds a vanishing tail)."""

    def __init__(self, mu: float, sigma: float, cap: int) -> None:
        self.mu = mu
        self.sigma = sigma
        self.cap = cap

    @property
    def max_size(self) -> int:
        return self.cap

    def pmf(self) -> F64:
        # P(round(X) = k) = P(k - 0.5 <= X < k + 0.5); below 1.5 rounds/clips to 1, from cap - 0.5 up to cap.
        edges = np.arange(self.cap + 1, dtype=np.float64) + 0.5  # 0.5, 1.5, ..., cap + 0.5
        z = (np.log(edges) - self.mu) / (self.sigma * math.sqrt(2.0))
        cdf = 0.5 * (1.0 + np.array([math.erf(v) for v in z]))
        p = np.zeros(self.cap + 1)
        p[1:] = np.diff(cdf)
        p[1] += cdf[0]  # X < 0.5 is clipped up to 1
        p[self.cap] += 1.0 - cdf[-1]  # X >= cap + 0.5 is clipped down to cap
        return p

    def draw(self, rng: np.random.Generator, n: int) -> I64:
        x = np.rint(rng.lognormal(self.mu, self.sigma, n))
        return np.clip(x, 1, self.cap).astype(np.int64)


class SinglesPlusPowerLawSizes(RequestSizes):
    """`1 - multi_fraction` of the requests have one key; the rest follow P(k) ∝ k^-exponent on 2..max_size.

    The exponent is solved so that the overall mean is exactly `mean` (see `power_law_exponent_for_mean`).
    """

    def __init__(self, mean: float, multi_fraction: float, max_size: int) -> None:
        self.target_mean = mean
        self.multi = multi_fraction
        self._max = max_size
        conditional = (mean - (1.0 - multi_fraction)) / multi_fraction
        self.exponent = power_law_exponent_for_mean(conditional, 2, max_size)

    @property
    def max_size(self) -> int:
        return self._max

    def pmf(self) -> F64:
        k = np.arange(2, self._max + 1, dtype=np.float64)
        w = k**-self.exponent
        p = np.zeros(self._max + 1)
        p[1] = 1.0 - self.multi
        p[2:] = self.multi * w / w.sum()
        return p


def _power_law_mean(exponent: float, k: F64) -> float:
    w = k**-exponent
    return float(np.dot(w, k) / w.sum())


def power_law_exponent_for_mean(mean: float, low: int, high: int) -> float:
    """The exponent a >= 0 for which P(k) ∝ k^-a on low..high has mean `mean` (bisection; falls with a).

    Raises ValueError when `mean` is outside what a in [0, 20] can reach.
    """
    k = np.arange(low, high + 1, dtype=np.float64)
    lo, hi = 0.0, 20.0
    if not _power_law_mean(hi, k) <= mean <= _power_law_mean(lo, k):
        raise ValueError(
            f"a mean of {mean:g} is not reachable on {low}..{high} "
            f"(reachable: {_power_law_mean(hi, k):.3f}..{_power_law_mean(lo, k):.1f})"
        )
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if _power_law_mean(mid, k) > mean:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
