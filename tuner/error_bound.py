"""`expected.error_bound`: one interval around a recommendation's expected p50 and p99 that carries every
uncertainty tailtune measured about it (docs/tuner.md § The error bound).

Three parts, each measured, none fitted:
- **the replay** — the 95 % half-width h of the expected figure over the study's seeds (`expected.ci`; p99 only,
  the confidence interval is computed for the objective's metrics);
- **the calibration** — the figure replayed with the calibrated service time at each end of its 95 % interval
  (`expected.calibration`, a Cassandra deployment whose service time was calibrated): [C_lo, C_hi];
- **the sampling** — a sampled tune's calibrated error s % (`sampling.error_bound.{p50,p99}_pct`).

Combined conservatively (the parts are not independent in any way tailtune can show, so they are added, not
taken in quadrature): low = min(E − h, C_lo) / (1 + s/100), high = max(E + h, C_hi) × (1 + s/100). Where a part is
absent it contributes nothing (h = 0, [C_lo, C_hi] = [E, E], s = 0). The verify step's expected band
(control/verify.py) widens the same interval by the model's own error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["combined_bound"]

METRICS = ("p50", "p99")


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _pair(v: Any) -> tuple[float, float] | None:
    if not isinstance(v, list | tuple) or len(v) != 2:
        return None
    a, b = _num(v[0]), _num(v[1])
    return (min(a, b), max(a, b)) if a is not None and b is not None else None


def _block(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def combined_bound(expected: Mapping[str, Any], sampling: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """`{p50_ms: [low, high], p99_ms: [low, high], parts: {...}, method}` for a recommendation's `expected` block
    and its `sampling` block (None: the whole trace); None when `expected` states no p99."""
    if _num(expected.get("p99_ms")) is None:
        return None
    ci, cal = _block(expected.get("ci")), _block(expected.get("calibration"))
    smp = _block((sampling or {}).get("error_bound"))
    out: dict[str, Any] = {}
    parts: dict[str, Any] = {}
    for m in METRICS:
        e = _num(expected.get(f"{m}_ms"))
        if e is None:
            continue
        h = _num(ci.get(m)) or 0.0
        c = _pair(cal.get(f"{m}_ms")) or (e, e)
        s = max(0.0, _num(smp.get(f"{m}_pct")) or 0.0)
        widen = 1.0 + s / 100.0
        out[f"{m}_ms"] = [max(0.0, min(e - h, c[0])) / widen, max(e + h, c[1]) * widen]
        parts[m] = {"replay_ci_ms": h, "calibration_ms": list(c) if cal.get(f"{m}_ms") is not None else None,
                    "sampling_pct": s}
    out["parts"] = parts
    out["method"] = ("min(E − h, calibration low) / (1 + s) to max(E + h, calibration high) × (1 + s): the replay's "
                     "95 % half-width h, the calibrated service time's 95 % interval replayed, the sampling error s")
    return out
