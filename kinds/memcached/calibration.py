"""Calibration of a memcached pool: the client overhead per request (`client_overhead.us`), measured by the
profiler on a scratch key range it removes afterwards (`analysis.memcached_profile.profile_address`, as
discovery's `--profile-servers`), marked `calibrated` (`control.calibration` stores it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from base.linereader import LineCaps
from control.egress import Egress
from control.kind import Calibrated
from kinds.memcached.discovery import KIND, discover_memcached

__all__ = ["calibrate_memcached"]


def calibrate_memcached(connection: Mapping[str, Any], *, egress: Egress, timeout_s: float, reps: int,
                        caps: LineCaps, log: Callable[[str], None]) -> Calibrated:
    """Profile the pool's first server (discovery with `profile_servers`) and keep its client overhead as the
    calibrated input; raises DiscoveryFailed."""
    found = discover_memcached(connection, egress=egress, timeout_s=timeout_s, profile_servers=True,
                               profile_reps=reps, caps=caps, log=log)
    out = Calibrated(KIND, found.at, readings={"profile": found.readings.get("profile")})
    entry = found.inputs.get("client_overhead")
    if entry is None:
        out.notes.append("client overhead not calibrated: the profiler found no server to profile")
    else:
        out.put("client_overhead", entry["value"], str(entry.get("how", "the profiler")))
    return out
