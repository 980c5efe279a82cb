"""The peak check of a sampled study: before a config is recommended from a sample, the sample's best candidates
and the current config are replayed over the trace's busiest stretch, and a candidate that storms there is not
recommended.

Why: short windows start with the queues the previous window left and hold a burst only in part, so a config
whose extra reads (speculative retry, driver speculative executions) feed back into slower reads and more extra
reads at a burst looks as good as any on the windows, and storms on the whole trace. The busiest stretch is the
contiguous stretch of the sampled fraction of the span holding the most ops (`tuner.sampling.peak_window`),
replayed at the absolute rate it has in the trace. Measured (bench/RESULTS.md § "Sampling error"): the configs
that stormed on the whole trace had 10-80x the p99 of the full study's winner there; it had 1.2x its own.

The rule: the `top` best distinct candidates of the sample (in the order the recommendation is picked in) and
the current config are replayed over the stretch on the study's seeds; a candidate *storms* when its p99 there
exceeds `storm_factor` × the lowest p99 among them. The recommendation is picked, by the usual rule, among the
checked candidates that do not storm (docs/sampling.md § The peak check).

`storming` is a pure function of the figures; `check` replays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tuner.evaluators import Evaluator
from tuner.objective import Objective
from tuner.recommend import metrics_block, rank_trials
from tuner.space import Candidate
from tuner.study import evaluate_candidate

__all__ = ["STORM_FACTOR", "TOP", "PeakCheck", "PeakStretch", "check", "storming"]

#: Distinct candidates of the sample replayed over the busiest stretch (the current config is replayed besides).
TOP: Final = 5
#: A checked candidate storms when its p99 over the stretch exceeds this × the lowest one's.
STORM_FACTOR: Final = 2.0


@dataclass(frozen=True, slots=True)
class PeakStretch:
    """The busiest stretch of a trace, written as a trace file, and how to replay it."""

    path: str
    start: float
    end: float
    requests: int
    #: evaluator options of the stretch's replay (the study's, with the load at the stretch's absolute rate)
    options: Mapping[str, Any]
    load_factor: float | None

    def block(self) -> dict[str, Any]:
        return {"window": [self.start, self.end], "requests": self.requests, "load_factor": self.load_factor,
                "trace": self.path}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PeakCheck:
    """The outcome: the keys of the checked candidates that do not storm, and the recommendation's block."""

    allowed: frozenset[tuple[str, tuple[tuple[str, Any], ...]]]
    block: dict[str, Any]


def storming(peak_p99: Mapping[Any, float], factor: float = STORM_FACTOR) -> set[Any]:
    """The keys whose p99 exceeds `factor` × the lowest p99 of `peak_p99` (none when it is empty)."""
    if not peak_p99:
        return set()
    floor = min(peak_p99.values())
    return {k for k, v in peak_p99.items() if v > factor * floor}


def check(
    ev: Evaluator, stretch: PeakStretch, trials: Sequence[Any], objective: Objective, current: Candidate,
    seeds: Sequence[int], *, top: int = TOP, factor: float = STORM_FACTOR,
) -> PeakCheck:
    """Replays the `top` best distinct candidates of `trials` (by `rank_trials`) and `current` over the stretch
    (`ev` replays it) on `seeds`, and flags those that storm (`storming`)."""
    ranked: list[tuple[Candidate, Any]] = []
    for t in rank_trials(trials, objective):
        cand = Candidate.from_dict(t.user_attrs["candidate"])
        if all(cand.key() != c.key() for c, _ in ranked):
            ranked.append((cand, t))
        if len(ranked) == top:
            break
    checked = [(c, t.user_attrs["metrics"]) for c, t in ranked]
    if all(c.key() != current.key() for c, _ in checked):
        checked.append((current, None))
    peak = {c.key(): evaluate_candidate(ev, c, seeds, objective)["metrics"] for c, _ in checked}
    flagged = storming({k: m["p99_ms"] for k, m in peak.items()}, factor)
    rows = []
    for cand, sample in checked:
        m = peak[cand.key()]
        rows.append({
            **metrics_block(cand, {}),
            "current": cand.key() == current.key(),
            "sample_p99_ms": sample["p99_ms"] if sample is not None else None,
            "peak_p50_ms": m["p50_ms"], "peak_p99_ms": m["p99_ms"],
            "storms": cand.key() in flagged,
        })  # fmt: skip
    allowed = frozenset(c.key() for c, _ in checked if c.key() not in flagged)
    return PeakCheck(allowed, {
        **stretch.block(), "storm_factor": factor, "top": top, "checked": rows,
        "rejected": sum(1 for c, _ in ranked if c.key() in flagged),
        "current_storms": current.key() in flagged,
    })
