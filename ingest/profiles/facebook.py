"""`facebook`: Rein's heavy-tailed synthetic workload (Rein §5.1) with Facebook ETC value sizes."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.profiles.base import Components, Profile, ProfileOptions
from ingest.profiles.popularity import MAX_ZIPF_KEY_SPACE, ZipfKeys
from ingest.profiles.sizes import LognormalSizes
from ingest.profiles.values import EtcValueSizes

__all__ = ["FacebookOptions", "FacebookProfile"]


@dataclass(frozen=True)
class FacebookOptions(ProfileOptions):
    mu: float = 2.5  # Rein §5.1: log-normal fit to Facebook's multiget sizes, μ = 2.5
    sigma: float = 1.25  # σ = 1.25
    max_size: int = 10_000  # cap (chosen): P(size > 10 000) ≈ 4e-8 with the defaults
    zipf_alpha: float = 0.99  # YCSB's Zipfian constant, used by Rein §5.1
    key_space: int = 100_000  # Rein §5.1: "a dataset composed of 100,000 rows"

    def problems(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if self.sigma <= 0.0:
            out.append(("sigma", f"expected a positive number, got {self.sigma:g}"))
        if not 1 <= self.max_size <= 1_000_000:
            out.append(("max_size", f"expected an integer in 1..1000000, got {self.max_size}"))
        if self.zipf_alpha < 0.0:
            out.append(("zipf_alpha", f"expected a non-negative number, got {self.zipf_alpha:g}"))
        if not 1 <= self.key_space <= MAX_ZIPF_KEY_SPACE:
            out.append(("key_space", f"expected an integer in 1..{MAX_ZIPF_KEY_SPACE}, got {self.key_space}"))
        elif self.key_space < self.max_size:
            out.append(("key_space", f"must be at least max_size ({self.max_size}), got {self.key_space}"))
        return out


class FacebookProfile(Profile[FacebookOptions]):
    name = "facebook"
    title = "lognormal(2.5, 1.25) multiget sizes, Zipf(0.99) keys, Facebook ETC value sizes"
    source = "Rein (EuroSys'17) §5.1; value sizes: Atikoglu et al. (SIGMETRICS'12) ETC pool"
    options_type = FacebookOptions

    def build(self, options: FacebookOptions) -> Components:
        return Components(
            sizes=LognormalSizes(options.mu, options.sigma, options.max_size),
            keys=ZipfKeys(options.zipf_alpha, options.key_space),
            values=EtcValueSizes(),
        )
