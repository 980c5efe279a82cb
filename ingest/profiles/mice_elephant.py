"""`mice-elephant`: Chisel's skewed mix — mice of m keys and elephants of 100 keys (Chisel, ICAC'19, §V-A)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ingest.profiles.base import Components, Profile, ProfileOptions
from ingest.profiles.popularity import MAX_UNIFORM_KEY_SPACE, UniformKeys
from ingest.profiles.sizes import MixtureSizes
from ingest.profiles.values import FixedValueSizes

__all__ = ["MiceElephantOptions", "MiceElephantProfile", "parse_mix"]

_MIX = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_mix(mix: str) -> tuple[int, int]:
    """'9:1' → (9, 1): mice per elephant. Raises ValueError on anything else."""
    match = _MIX.match(mix)
    if match is None or int(match[1]) + int(match[2]) == 0:
        raise ValueError(mix)
    return int(match[1]), int(match[2])


@dataclass(frozen=True)
class MiceElephantOptions(ProfileOptions):
    mice: int = 5  # Chisel §V-A: mice of 1, 5 or 10 keys
    elephants: int = 100  # "elephant requests ask for 100 keys in all scenarios"
    mix: str = "9:1"  # "9 to 1 and 5 to 1 ratios" of mice to elephants
    key_space: int = 100_000  # not given by Chisel (chosen); keys uniform
    value_size: int = 1000  # not given by Chisel (chosen)

    def problems(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if not 1 <= self.mice <= 1_000_000:
            out.append(("mice", f"expected an integer in 1..1000000 (Chisel used 1, 5, 10), got {self.mice}"))
        if not 1 <= self.elephants <= 1_000_000:
            out.append(("elephants", f"expected an integer in 1..1000000, got {self.elephants}"))
        try:
            parse_mix(self.mix)
        except ValueError:
            out.append(("mix", f'expected MICE:ELEPHANTS such as "9:1" or "5:1", got "{self.mix}"'))
        if not 1 <= self.key_space <= MAX_UNIFORM_KEY_SPACE:
            out.append(("key_space", f"expected an integer in 1..{MAX_UNIFORM_KEY_SPACE}, got {self.key_space}"))
        elif self.key_space < max(self.mice, self.elephants):
            out.append(("key_space", f"must be at least mice and elephants, got {self.key_space}"))
        if self.value_size < 0:
            out.append(("value_size", f"expected a non-negative integer, got {self.value_size}"))
        return out


class MiceElephantProfile(Profile[MiceElephantOptions]):
    name = "mice-elephant"
    title = "Chisel's mix: mice of 5 keys and elephants of 100 keys, 9:1 (or 5:1), uniform keys"
    source = "Chisel (ICAC'19) §II-A and §V-A 'Scenarios'"
    options_type = MiceElephantOptions

    def build(self, options: MiceElephantOptions) -> Components:
        mice, elephants = parse_mix(options.mix)
        return Components(
            sizes=MixtureSizes(options.mice, options.elephants, elephants / (mice + elephants)),
            keys=UniformKeys(options.key_space),
            values=FixedValueSizes(options.value_size),
        )
