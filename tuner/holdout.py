"""The held-out later stretch of a trace with timestamps: the study tunes on the earlier part, the verdict is
confirmed on the later one (tuner/confirm.py), as production applies a config to future traffic.

The split is by time: the last `fraction` of the trace's span (setting `tune_holdout_fraction`, default 0.2)
is held out, whole requests by their first timestamp. Both parts are written once under
`TAILTUNE_HOME/samples/` like a sample (tuner/sampling.py), so the study's `reproduce` commands replay the
earlier part. A trace without timestamps, or whose held-out part is too short for the confirmation's batches
(`tune_holdout_min_requests`), is not split: the confirmation then replays fresh seeds of the whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tailtune.base.settings import Settings
from tailtune.simulation.source import WorkloadSource
from tuner import sampling

__all__ = ["Split", "split_source"]


@dataclass(frozen=True)
class Split:
    early: WorkloadSource
    late: WorkloadSource
    record: dict[str, Any]


def split_source(source: WorkloadSource, fraction: float, settings: Settings, *, min_requests: int) -> Split | None:
    """The earlier and the held-out later part of `source` (None: no timestamps, no fraction, or too short)."""
    if not 0.0 < fraction < 1.0 or not source.has_timestamps(settings):
        return None
    cut: dict[str, float] = {}

    def early(t0: float, t1: float, _: Any) -> tuple[sampling.Window, ...]:
        cut["at"], cut["t0"], cut["t1"] = t0 + (1.0 - fraction) * (t1 - t0), t0, t1
        return (sampling.Window(0, t0, cut["at"]),)

    def late(t0: float, t1: float, _: Any) -> tuple[sampling.Window, ...]:
        return (sampling.Window(0, t0 + (1.0 - fraction) * (t1 - t0), t1 + max(1e-9, 1e-9 * abs(t1))),)

    late_path, late_info = sampling._write_sample(source, settings, late)
    if late_info.requests < min_requests:
        return None
    early_path, early_info = sampling._write_sample(source, settings, early)
    record = {"fraction": fraction, "requests": late_info.requests, "tuned_on_requests": early_info.requests,
              "from_s": cut["at"] - cut["t0"], "to_s": cut["t1"] - cut["t0"]}
    return Split(WorkloadSource(trace=str(early_path)), WorkloadSource(trace=str(late_path)), record)
