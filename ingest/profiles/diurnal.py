"""`diurnal`: SoundCloud-shaped multigets arriving non-stationarily: a daily cycle, seeded bursts, drifting hot keys."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ingest.profiles.base import Components
from ingest.profiles.soundcloud import SoundcloudOptions, SoundcloudProfile
from ingest.profiles.timing import CyclicArrivals, KeyDrift

__all__ = ["DiurnalOptions", "DiurnalProfile"]


@dataclass(frozen=True)
class DiurnalOptions(SoundcloudOptions):
    period_s: float = 1000.0  # one "day" per 1 M requests at the default 1000 req/s (86400 for wall-clock days)
    amplitude: float = 0.5  # rate (1 - a·cos): trough 0.5×, peak 1.5× the cycle mean (peak/trough 3)
    bursts: float = 8.0  # expected bursts per period
    burst_s: float = 10.0  # length of a burst slot, seconds
    burst_factor: float = 2.0  # rate multiplier inside a burst
    drift_s: float = 50.0  # the hot set moves every drift_s seconds (0 = never)

    def problems(self) -> list[tuple[str, str]]:
        out = super().problems()
        if not self.period_s > 0.0:
            out.append(("period_s", f"expected a positive number, got {self.period_s:g}"))
        if not 0.0 <= self.amplitude < 1.0:
            out.append(("amplitude", f"expected a number in [0, 1), got {self.amplitude:g}"))
        if self.bursts < 0.0:
            out.append(("bursts", f"expected a non-negative number, got {self.bursts:g}"))
        if not self.burst_s > 0.0:
            out.append(("burst_s", f"expected a positive number, got {self.burst_s:g}"))
        elif self.period_s > 0.0 and self.bursts * self.burst_s > self.period_s:
            out.append(("bursts", f"{self.bursts:g} bursts of {self.burst_s:g} s do not fit in a period of "
                                  f"{self.period_s:g} s"))  # fmt: skip
        if self.burst_factor < 1.0:
            out.append(("burst_factor", f"expected a number >= 1, got {self.burst_factor:g}"))
        if self.drift_s < 0.0:
            out.append(("drift_s", f"expected a non-negative number, got {self.drift_s:g}"))
        return out


class DiurnalProfile(SoundcloudProfile):
    name = "diurnal"
    title = "soundcloud multigets with a daily rate cycle, seeded bursts and drifting hot keys (non-stationary)"
    source = "sizes, keys, values: soundcloud; time shape: chosen (docs/profiles.md § diurnal)"
    options_type = DiurnalOptions

    def build(self, options: SoundcloudOptions) -> Components:
        assert isinstance(options, DiurnalOptions)
        base = super().build(options)
        arrivals = CyclicArrivals(options.period_s, options.amplitude, options.bursts, options.burst_s,
                                  options.burst_factor)  # fmt: skip
        drift = KeyDrift(options.drift_s, options.key_space) if options.drift_s > 0.0 else None
        return dataclasses.replace(base, arrivals=arrivals, drift=drift)
