"""`bimodal`: Héron/TailX-style heterogeneous values — small 1 KB values and a fraction of large ones."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ingest.profiles.base import Components, Profile, ProfileOptions
from ingest.profiles.popularity import MAX_ZIPF_KEY_SPACE, ZipfKeys, zipf_pmf
from ingest.profiles.sizes import MixtureSizes
from ingest.profiles.values import BimodalValueSizes

__all__ = ["BimodalOptions", "BimodalProfile"]


@dataclass(frozen=True)
class BimodalOptions(ProfileOptions):
    small_size: int = 1024  # Héron §II-C / §V: small values of 1 KB
    large_size: int = 512 * 1024  # Héron: large values of 512 KB (TailX uses 2 MB)
    large_fraction: float = 0.10  # fraction of *keys* holding a large value (Héron varies 0-20%)
    zipf_alpha: float = 0.99  # Héron §V-A and TailX §4.1: Zipfian access, 0.99
    key_space: int = 100_000
    keys: int = 1  # keys per request: Héron's YCSB reads are single-key
    long_keys: int = 100  # TailX §4.2: "long" multigets of 100 keys ...
    long_fraction: float = 0.0  # ... in 20% of requests with keys=5 (off by default)

    def problems(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for name, value in (("small_size", self.small_size), ("large_size", self.large_size)):
            if value < 0:
                out.append((name, f"expected a non-negative integer, got {value}"))
        for name, fraction in (
            ("large_fraction", self.large_fraction),
            ("long_fraction", self.long_fraction),
        ):
            if not 0.0 <= fraction <= 1.0:
                out.append((name, f"expected a fraction in [0, 1], got {fraction:g}"))
        if self.zipf_alpha < 0.0:
            out.append(("zipf_alpha", f"expected a non-negative number, got {self.zipf_alpha:g}"))
        for name, count in (("keys", self.keys), ("long_keys", self.long_keys)):
            if not 1 <= count <= 1_000_000:
                out.append((name, f"expected an integer in 1..1000000, got {count}"))
        if not 1 <= self.key_space <= MAX_ZIPF_KEY_SPACE:
            out.append(("key_space", f"expected an integer in 1..{MAX_ZIPF_KEY_SPACE}, got {self.key_space}"))
        elif self.key_space < max(self.keys, self.long_keys):
            out.append(("key_space", f"must be at least keys and long_keys, got {self.key_space}"))
        return out


class BimodalProfile(Profile[BimodalOptions]):
    name = "bimodal"
    title = "1 KB values plus 10% of keys with 512 KB values (size is per key), Zipf(0.99) keys, single-key"
    source = "Héron (SRDS'18) §II-C and §V-A; TailX §4.1-4.2 (multiget variant via keys/long_keys/long_fraction)"
    options_type = BimodalOptions

    def build(self, options: BimodalOptions) -> Components:
        return Components(
            sizes=MixtureSizes(options.keys, options.long_keys, options.long_fraction),
            keys=ZipfKeys(options.zipf_alpha, options.key_space),
            values=BimodalValueSizes(options.small_size, options.large_size, options.large_fraction),
        )

    def expected(self) -> dict[str, float]:
        """Adds the large-value shares: of the key space, and of accesses (single draws, before dedup)."""
        out = super().expected()
        values = self.components.values
        assert isinstance(values, BimodalValueSizes)
        large = values.is_large(np.arange(self.options.key_space, dtype=np.int64))
        out["large_key_share"] = float(large.mean())
        out["large_access_share"] = float(zipf_pmf(self.options.zipf_alpha, self.options.key_space)[large].sum())
        return out
