"""A study whose trials are all equal: every complete trial's p99 the same to within the figures' rounding (3
significant digits, as every report shows them). At a load where the model's servers are idle no knob moves the
tail, and "keep current" alone would hide why: the verdict's reason says so and what to do (the kind's
`TunerKind.idle_remedy`: measure the servers' capacity, or tune at a higher `--load`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["IDLE", "idle_reason"]

#: The reason's head (a contract of the human outputs and the console).
IDLE = "the model's servers are idle at this load: every knob gives the same p99"


def _p99(t: Any) -> float | None:
    metrics = t.user_attrs.get("metrics") if t.state.name == "COMPLETE" else None
    value = metrics.get("p99_ms") if isinstance(metrics, dict) else None
    return float(value) if isinstance(value, int | float) else None


def idle_reason(trials: Sequence[Any], remedy: str) -> str | None:
    """The reason of a study of at least two complete trials whose p99s round to one figure; else None."""
    values = [v for v in (_p99(t) for t in trials) if v is not None]
    shown = {f"{v:.3g}" for v in values}
    if len(values) < 2 or len(shown) != 1:
        return None
    return f"{IDLE} ({len(values)} trials, all {shown.pop()} ms): {remedy}"
