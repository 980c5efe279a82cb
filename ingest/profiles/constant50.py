"""`constant50`: Rein's short-tailed synthetic workload — every request asks for 50 keys (Bing's fan-out)."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.profiles.base import Components, Profile, ProfileOptions
from ingest.profiles.popularity import MAX_UNIFORM_KEY_SPACE, UniformKeys
from ingest.profiles.sizes import ConstantSizes
from ingest.profiles.values import EtcValueSizes

__all__ = ["Constant50Options", "Constant50Profile"]


@dataclass(frozen=True)
class Constant50Options(ProfileOptions):
    size: int = 50  # Rein §5.1: "a constant multiget size of 50 ... the fan-out factor ... in Bing's cluster"
    key_space: int = 100_000  # Rein §5.1 dataset of 100,000 rows

    def problems(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if not 1 <= self.size <= 1_000_000:
            out.append(("size", f"expected an integer in 1..1000000, got {self.size}"))
        if not 1 <= self.key_space <= MAX_UNIFORM_KEY_SPACE:
            out.append(("key_space", f"expected an integer in 1..{MAX_UNIFORM_KEY_SPACE}, got {self.key_space}"))
        elif self.key_space < self.size:
            out.append(("key_space", f"must be at least size ({self.size}), got {self.key_space}"))
        return out


class Constant50Profile(Profile[Constant50Options]):
    name = "constant50"
    title = "every request 50 keys (Bing fan-out), uniform keys, Facebook ETC value sizes"
    source = "Rein (EuroSys'17) §5.1 'Synthetic workloads' (Constant & Uniform)"
    options_type = Constant50Options

    def build(self, options: Constant50Options) -> Components:
        return Components(
            sizes=ConstantSizes(options.size),
            keys=UniformKeys(options.key_space),
            values=EtcValueSizes(),
        )
