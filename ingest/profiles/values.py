"""Value-size models: the size in bytes of the value stored at a key.

A value size is a property of the key, never of the access: it is a pure function of the key id (and the
model's parameters), so the same key always has the same size in a trace, and traces drawn with different
seeds describe the same store. Per-key randomness is a SplitMix64 hash of the key id, not the request stream.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "ETC_GPD_LOCATION",
    "ETC_GPD_SCALE",
    "ETC_GPD_SHAPE",
    "ETC_HEAD",
    "ETC_MAX_VALUE",
    "BimodalValueSizes",
    "EtcValueSizes",
    "FixedValueSizes",
    "ValueSizes",
    "key_uniform",
]

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]

#: Facebook ETC value sizes (Atikoglu et al., SIGMETRICS'12, §5.2 / Table 5): P(size = b) for b = 0..14 bytes.
#: The table as published in mutilate (Generator.cc, createFacebookValue) and YCSB's
#: FacebookFieldLengthGenerator (fb.txt, total 0.44155). Sizes >= 15 bytes follow the generalized Pareto tail.
ETC_HEAD: Final[tuple[float, ...]] = (
    0.00536, 0.00047, 0.17820, 0.09239, 0.00018, 0.02740, 0.00065, 0.00606,
    0.00023, 0.00837, 0.00837, 0.08989, 0.00092, 0.00326, 0.01980,
)  # fmt: skip
ETC_GPD_LOCATION: Final = 15.0
ETC_GPD_SCALE: Final = 214.476
ETC_GPD_SHAPE: Final = 0.348238
#: memcached's default item size limit (1 MiB): the GPD tail is clipped there (P ≈ 1e-9 of being reached).
ETC_MAX_VALUE: Final = 1 << 20

_GOLDEN: Final = np.uint64(0x9E3779B97F4A7C15)
_M1: Final = np.uint64(0xBF58476D1CE4E5B9)
_M2: Final = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: U64) -> U64:
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return np.asarray(z ^ (z >> np.uint64(31)), dtype=np.uint64)


def key_uniform(keys: I64, salt: int) -> F64:
    """A uniform number in [0, 1) per key id: a pure function of (key id, salt)."""
    mixed = _splitmix64(keys.astype(np.uint64) ^ np.uint64(salt & 0xFFFFFFFFFFFFFFFF))
    return np.asarray((mixed >> np.uint64(11)).astype(np.float64) * 2.0**-53, dtype=np.float64)


class ValueSizes(ABC):
    """Maps key ids to value sizes in bytes."""

    @abstractmethod
    def __call__(self, keys: I64) -> I64:
        """The value size of each key id."""


class FixedValueSizes(ValueSizes):
    """Every value has `size` bytes."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, keys: I64) -> I64:
        return np.full(keys.shape, self.size, dtype=np.int64)


class EtcValueSizes(ValueSizes):
    """Facebook ETC: discrete head for 0..14 bytes, else floor(15 + GPD(σ=214.476, ξ=0.348238)) ≤ 1 MiB."""

    SALT: Final = 0x45544356  # "ETCV"

    def __init__(self) -> None:
        self.head_cdf = np.cumsum(np.array(ETC_HEAD, dtype=np.float64))
        self.head_mass = float(self.head_cdf[-1])

    def __call__(self, keys: I64) -> I64:
        return self.from_uniform(key_uniform(keys, self.SALT))

    def from_uniform(self, u: F64) -> I64:
        """Inverse CDF of the whole ETC distribution (one uniform per value)."""
        head = np.searchsorted(self.head_cdf, u, side="right")
        tail_u = (u - self.head_mass) / (1.0 - self.head_mass)  # uniform on [0, 1) given u >= head mass
        survival = np.clip(1.0 - tail_u, 1e-300, 1.0)
        tail = ETC_GPD_LOCATION + ETC_GPD_SCALE * (survival**-ETC_GPD_SHAPE - 1.0) / ETC_GPD_SHAPE
        tail = np.minimum(np.floor(tail), ETC_MAX_VALUE)
        return np.where(u < self.head_mass, head, tail).astype(np.int64)


class BimodalValueSizes(ValueSizes):
    """Each key is large with probability `large_fraction`, decided by a hash of its id; otherwise small."""

    SALT: Final = 0x42494D4F  # "BIMO"

    def __init__(self, small: int, large: int, large_fraction: float) -> None:
        self.small = small
        self.large = large
        self.large_fraction = large_fraction

    def is_large(self, keys: I64) -> npt.NDArray[np.bool_]:
        return np.asarray(key_uniform(keys, self.SALT) < self.large_fraction, dtype=np.bool_)

    def __call__(self, keys: I64) -> I64:
        return np.where(self.is_large(keys), self.large, self.small).astype(np.int64)
