"""Key-popularity models: which key ids (0..key_space-1) requests draw, with replacement.

Key id r is written as the key string `k<r>`. For Zipf models id r is the popularity rank (0 = hottest), which
keeps traces easy to read and tests exact; the simulator hashes key strings, so ranks imply no placement.
Within one multiget keys are made distinct by the generator (duplicates are redrawn), see docs/profiles.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from ingest.profiles.inversion import invert_cdf

__all__ = [
    "MAX_UNIFORM_KEY_SPACE",
    "MAX_ZIPF_KEY_SPACE",
    "KeyPopularity",
    "UniformKeys",
    "ZipfKeys",
    "zipf_pmf",
]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

#: Zipf draws invert an exact CDF table (8 bytes per key): 10 M keys = 80 MB.
MAX_ZIPF_KEY_SPACE = 10_000_000
#: Uniform draws need no table; the bound keeps (request, key) packing inside int64.
MAX_UNIFORM_KEY_SPACE = 1 << 40


class KeyPopularity(ABC):
    """A distribution over key ids 0..key_space-1."""

    def __init__(self, key_space: int) -> None:
        self.key_space = key_space

    @abstractmethod
    def draw(self, rng: np.random.Generator, n: int) -> I64:
        """n key ids, independently (with replacement)."""

    @abstractmethod
    def pmf(self) -> F64:
        """P(key id = r) for r = 0..key_space-1."""


class UniformKeys(KeyPopularity):
    """Every key equally likely."""

    def draw(self, rng: np.random.Generator, n: int) -> I64:
        return rng.integers(0, self.key_space, n, dtype=np.int64)

    def pmf(self) -> F64:
        return np.full(self.key_space, 1.0 / self.key_space)


@lru_cache(maxsize=8)
def _zipf_cdf(alpha: float, key_space: int) -> F64:
    cdf = np.cumsum(zipf_pmf(alpha, key_space))
    cdf[-1] = 1.0
    cdf.setflags(write=False)
    return cdf


def zipf_pmf(alpha: float, key_space: int) -> F64:
    """P(rank r) ∝ (r + 1)^-alpha for r = 0..key_space-1 (exact, normalised)."""
    w = np.arange(1, key_space + 1, dtype=np.float64) ** -alpha
    return np.asarray(w / w.sum(), dtype=np.float64)


class ZipfKeys(KeyPopularity):
    """Zipf(alpha) over key_space ranks, drawn exactly by inverting the tabulated CDF."""

    def __init__(self, alpha: float, key_space: int) -> None:
        super().__init__(key_space)
        self.alpha = alpha

    def draw(self, rng: np.random.Generator, n: int) -> I64:
        return invert_cdf(_zipf_cdf(self.alpha, self.key_space), rng.random(n))

    def pmf(self) -> F64:
        return zipf_pmf(self.alpha, self.key_space)
