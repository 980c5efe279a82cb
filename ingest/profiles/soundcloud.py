"""`soundcloud`: multigets shaped like Rein's SoundCloud production trace (Rein, EuroSys'17, §2.2, Fig. 3)."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.profiles.base import Components, Profile, ProfileOptions
from ingest.profiles.popularity import MAX_ZIPF_KEY_SPACE, ZipfKeys
from ingest.profiles.sizes import SinglesPlusPowerLawSizes, power_law_exponent_for_mean
from ingest.profiles.values import FixedValueSizes

__all__ = ["SoundcloudOptions", "SoundcloudProfile"]


@dataclass(frozen=True)
class SoundcloudOptions(ProfileOptions):
    mean_size: float = 8.6  # Rein §2.2: "the average size is 8.6 keys"
    multi_fraction: float = 0.40  # "~40% of requests involve more than a single key"
    max_size: int = 2000  # "the maximum is as high as ~2000 keys"
    zipf_alpha: float = 0.6  # chosen: top key ≈ 1000 accesses per 1 M, most keys accessed once (Fig. 3b)
    key_space: int = 3_000_000
    value_size: int = 1000  # "values ... of fixed size" (size not published; YCSB's default record is 1000 B)

    def problems(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if not 0.0 < self.multi_fraction <= 1.0:
            out.append(("multi_fraction", f"expected a fraction in (0, 1], got {self.multi_fraction:g}"))
        if not 2 <= self.max_size <= 1_000_000:
            out.append(("max_size", f"expected an integer in 2..1000000, got {self.max_size}"))
        if self.zipf_alpha < 0.0:
            out.append(("zipf_alpha", f"expected a non-negative number, got {self.zipf_alpha:g}"))
        if not 1 <= self.key_space <= MAX_ZIPF_KEY_SPACE:
            out.append(("key_space", f"expected an integer in 1..{MAX_ZIPF_KEY_SPACE}, got {self.key_space}"))
        elif self.key_space < self.max_size:
            out.append(("key_space", f"must be at least max_size ({self.max_size}), got {self.key_space}"))
        if self.value_size < 0:
            out.append(("value_size", f"expected a non-negative integer, got {self.value_size}"))
        if not out:
            conditional = (self.mean_size - (1.0 - self.multi_fraction)) / self.multi_fraction
            try:
                power_law_exponent_for_mean(conditional, 2, self.max_size)
            except ValueError:
                out.append(
                    ("mean_size", f"{self.mean_size:g} is not reachable with multi_fraction "
                     f"{self.multi_fraction:g} and max_size {self.max_size}")
                )  # fmt: skip
        return out


class SoundcloudProfile(Profile[SoundcloudOptions]):
    name = "soundcloud"
    title = "Rein's SoundCloud trace: mean 8.6 keys, 40% multi-key, tail to 2000 keys; mostly-unique keys"
    source = "Rein (EuroSys'17) §2.2 and Fig. 3a/3b; Chisel (ICAC'19) §II for the 99th percentile (~100 keys)"
    options_type = SoundcloudOptions

    def build(self, options: SoundcloudOptions) -> Components:
        return Components(
            sizes=SinglesPlusPowerLawSizes(options.mean_size, options.multi_fraction, options.max_size),
            keys=ZipfKeys(options.zipf_alpha, options.key_space),
            values=FixedValueSizes(options.value_size),
        )
