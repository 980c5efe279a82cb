"""The peak check of a sampled study: before a config is recommended from a sample, candidates are replayed over
the stretches around the trace's most intense bursts (the burst stretches), and one that storms there is not
recommended.

Why: short windows start with the queues the previous window left and hold a burst only in part, so a config
whose extra reads (speculative retry, driver speculative executions) feed back into slower reads and more extra
reads at a burst looks as good as any on the windows, and storms on the whole trace. The burst stretches
(`tuner.sampling.burst_windows`: 3 pieces, the sampled fraction of the span in all, each starting a quarter of a
piece before one of the most intense bursts) are replayed laid end to end, at the absolute rate they have in the
trace.

The rule (docs/sampling.md § The peak check):

1. **Floor.** The `top` best distinct candidates of the sample (in the order the recommendation is picked in,
   `recommend.rank_trials`), the current config, and each of these with its extra reads off (`without_extra_reads`:
   a config that sends each read once cannot feed a storm) are replayed over the stretches on the study's seeds.
   The floor is the lowest p99 among them.
2. **Storm.** A candidate storms when its p99 over the stretches exceeds `storm_factor` × the floor.
3. **Pick.** The candidates are taken in rank order (replayed over the stretches beyond the `top` as needed, at
   most `limit` in all); the first that does not storm is the one the recommendation is picked from. None within
   the limit: the first calm twin (of the best, else of the next ones, else of the current config) is, replayed
   on the sample for its figures there (tuner/tune.py); no calm twin: the current config is kept.

The estimate (`estimate`): a sample's windows hold the trace's bursts only in part, and on a bursty trace the
whole trace's tail is set by its bursts. So the whole trace's p50 / p99 of the recommended config are estimated
from two strata: the burst stretches, weighted by their share of the trace's requests, and the rest of the trace,
which the sample stands for (`mixture_quantiles`). The error of this estimate is what
`tuner.sampling.CALIBRATION` measures.

The verdict (`storm_verdict`): the sample cannot show a storm, so when the current config storms over the burst
stretches and the picked candidate does not, the verdict may also rest on the stretches: recommend when the
picked candidate's p99 there is lower by a one-sided paired t-test over the study's seeds (p < 0.05, at least 2
seeds), even if the sample alone does not show a significant improvement.

`first_calm`, `without_extra_reads`, `mixture_quantiles`, `estimate` and `storm_verdict` are pure; `check`
replays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from simulation.stock_knobs import DRIVER_DEFAULT, EXTRA_READS_OFF, EXTRA_READS_ONLY, knob
from tuner.evaluators import Evaluator
from tuner.objective import Metrics, Objective
from tuner.recommend import Verdict, metrics_block, paired_test, rank_trials
from tuner.space import Candidate

__all__ = [
    "LIMIT",
    "STORM_FACTOR",
    "TOP",
    "PeakCheck",
    "PeakReplays",
    "PeakStretch",
    "check",
    "estimate",
    "first_calm",
    "mixture_quantiles",
    "storm_verdict",
    "without_extra_reads",
]

#: The best distinct candidates of the sample that, with the current config and their extra-reads-off twins, set
#: the floor.
TOP: Final = 3
#: At most this many candidates of the ranking are replayed over the stretches looking for one that does not storm.
LIMIT: Final = 20
#: A candidate storms when its p99 over the burst stretches exceeds this × the floor.
STORM_FACTOR: Final = 2.0

Key = tuple[str, tuple[tuple[str, Any], ...]]


@dataclass(frozen=True, slots=True)
class PeakStretch:
    """The stretches around a trace's most intense bursts, written as one trace file (laid end to end), and how to
    replay it."""

    path: str
    windows: tuple[tuple[float, float], ...]
    requests: int
    #: requests in the stretches / requests in the trace
    share: float
    #: evaluator options of the stretches' replay (the study's, with the load at their absolute rate)
    options: Mapping[str, Any]
    load_factor: float | None

    def block(self) -> dict[str, Any]:
        return {"windows": [list(w) for w in self.windows], "requests": self.requests, "share": self.share,
                "load_factor": self.load_factor, "trace": self.path}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PeakCheck:
    """The outcome: the key of the ranked candidate the recommendation is picked from (empty: every one checked
    storms), else the twin that replaces them (`fallback`: the first calm twin, in the order of the candidates it
    is the twin of; None: none is calm), and the recommendation's block."""

    allowed: frozenset[Key]
    block: dict[str, Any]
    fallback: Candidate | None = None


@dataclass(slots=True)
class PeakReplays:
    """The replays over the burst stretches made so far, by candidate key: the whole ones' mean metrics and per-seed
    p99, and for the stopped ones the bound their p99 is above. One per tune job (the same stretches, evaluator
    and seeds for every study's check), so a candidate two checks need (the current config, a twin) is replayed
    once."""

    metrics: dict[Key, dict[str, float]] = field(default_factory=dict)
    per_seed: dict[Key, list[float]] = field(default_factory=dict)
    above: dict[Key, float] = field(default_factory=dict)


def without_extra_reads(cand: Candidate) -> Candidate | None:
    """`cand` with the knobs that make extra reads at their off values (`EXTRA_READS_OFF`) and those that act only
    with extra reads on (`EXTRA_READS_ONLY`) at their driver's defaults, so twins that behave alike are one
    candidate (replayed once); None when it sends each read once already (or carries none of those knobs)."""
    off = {k: v for k, v in EXTRA_READS_OFF.items() if k in cand.params and cand.params[k] != v}
    if not off:
        return None
    driver = str(cand.params.get("driver", DRIVER_DEFAULT))
    inert = {k: spec.default_for(driver) for k in EXTRA_READS_ONLY
             if k in cand.params and (spec := knob(k)) is not None}  # fmt: skip
    return Candidate(cand.policy, {**cand.params, **off, **inert})


def first_calm(peak_p99: Sequence[float], floor: float, factor: float = STORM_FACTOR) -> int | None:
    """The index of the first p99 (in rank order) not above `factor` × `floor`; None when all are above."""
    return next((i for i, v in enumerate(peak_p99) if v <= factor * floor), None)


def check(
    ev: Evaluator, stretch: PeakStretch, trials: Sequence[Any], objective: Objective, current: Candidate,
    seeds: Sequence[int], *, top: int = TOP, limit: int = LIMIT, factor: float = STORM_FACTOR,
    replays: PeakReplays | None = None,
) -> PeakCheck:
    """The rule of the module docstring: `ev` replays the burst stretches; `trials` are the study's.

    The references (the current config and the twins) are replayed first, whole; their lowest p99 is a floor
    the final one can only be below. A ranked candidate is then replayed with `ev.evaluate_below` at `factor` ×
    the floor known so far: a replay stops once its p99 is certainly above that, and a candidate whose replays
    all stopped storms whatever the final floor (recorded with `peak_p99_above_ms`, its p99 unknown). One with
    some seeds stopped and some not is replayed whole on the stopped ones (the mean over the seeds decides).
    `replays`: those made already over the same stretches on the same seeds (updated)."""
    ranked: list[tuple[Candidate, Any]] = []
    for t in rank_trials(trials, objective):
        cand = Candidate.from_dict(t.user_attrs["candidate"])
        if all(cand.key() != c.key() for c, _ in ranked):
            ranked.append((cand, t))
    done = replays if replays is not None else PeakReplays()
    peak, per_seed, above = done.metrics, done.per_seed, done.above

    def replay(cand: Candidate, bound: float | None = None) -> None:
        key = cand.key()
        if key in peak or (key in above and bound is not None and above[key] >= bound):
            return  # known: whole, or above a bound at least this one
        got: list[Metrics | None] = [ev.evaluate(cand, s) if bound is None else ev.evaluate_below(cand, s, bound)
                                     for s in seeds]  # fmt: skip
        if bound is not None and all(m is None for m in got):
            above[key] = bound
            return
        whole = [m if m is not None else ev.evaluate(cand, s) for m, s in zip(got, seeds, strict=True)]
        above.pop(key, None)
        peak[key] = Metrics.mean_of(whole).as_dict()
        per_seed[key] = [m.p99_ms for m in whole]

    def p99(cand: Candidate) -> float:
        """The p99 over the stretches (infinite when only known to be above a storm's bound)."""
        return peak[cand.key()]["p99_ms"] if cand.key() in peak else math.inf

    bases = [c for c, _ in ranked[:top]] + [current]
    twins = [tw for tw in (without_extra_reads(c) for c in bases) if tw is not None]
    for cand in (current, *twins):
        replay(cand)
    floor = min(p99(c) for c in (current, *twins))
    for cand, _ in ranked[:top]:
        replay(cand, factor * floor)
    floor = min(p99(c) for c in bases + twins)
    checked: list[tuple[Candidate, Any]] = []
    calm: int | None = None
    for cand, t in ranked[:limit]:  # the top ones (replayed already), then on until one does not storm
        if len(checked) >= top and calm is not None:
            break
        replay(cand, factor * floor)
        checked.append((cand, t))
        calm = first_calm([p99(c) for c, _ in checked], floor, factor)
    seen = {c.key() for c, _ in checked}
    references: list[Candidate] = []
    for cand in (current, *twins):
        if cand.key() not in seen:
            seen.add(cand.key())
            references.append(cand)

    def row(cand: Candidate, sample: Any) -> dict[str, Any]:
        m = peak.get(cand.key(), {})
        return {**metrics_block(cand, {}), "current": cand.key() == current.key(),
                "sample_p99_ms": sample.user_attrs["metrics"]["p99_ms"] if sample is not None else None,
                "peak_p50_ms": m.get("p50_ms"), "peak_p99_ms": m.get("p99_ms"),
                "peak_p99_per_seed_ms": per_seed.get(cand.key(), []),
                "peak_p99_above_ms": above.get(cand.key()), "storms": p99(cand) > factor * floor}  # fmt: skip

    picked = checked[calm][0] if calm is not None else None
    fallback = None if picked is not None else next((tw for tw in twins if p99(tw) <= factor * floor), None)
    return PeakCheck(frozenset([picked.key()] if picked is not None else []), fallback=fallback, block={
        **stretch.block(), "storm_factor": factor, "top": top, "limit": limit, "floor_p99_ms": floor,
        "checked": [row(c, t) for c, t in checked],
        "references": [row(c, None) for c in references],
        "rejected": sum(1 for c, _ in checked if p99(c) > factor * floor),
        "stopped": sum(1 for c, _ in checked if c.key() in above),
        "picked_rank": calm,
        "picked_twin": fallback.as_dict() if fallback is not None else None,
        "current_storms": p99(current) > factor * floor,
    })  # fmt: skip


def mixture_quantiles(
    sample: npt.NDArray[np.float64], bursts: npt.NDArray[np.float64], burst_share: float,
    qs: Sequence[float] = (0.5, 0.99),
) -> list[float]:
    """Quantiles of the whole trace's latencies estimated from two strata: the burst stretches (`bursts`, a
    `burst_share` of the trace's requests) and the rest of the trace, which the sample's windows stand for
    (`sample`): each latency weighs its stratum's share over its stratum's count. The quantile q is the smallest
    latency whose cumulative weight reaches q."""
    share = 0.0 if bursts.size == 0 else 1.0 if sample.size == 0 else min(max(burst_share, 0.0), 1.0)
    parts = [(a, w / a.size) for a, w in ((sample, 1.0 - share), (bursts, share)) if a.size and w > 0.0]
    if not parts:
        raise ValueError("no latencies to estimate from")
    values = np.concatenate([a for a, _ in parts])
    weights = np.concatenate([np.full(a.size, w) for a, w in parts])
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    picks = [min(int(np.searchsorted(cum, q * cum[-1], side="left")), values.size - 1) for q in qs]
    return [float(values[order][i]) for i in picks]


def estimate(
    sample: Sequence[npt.NDArray[np.float64]], bursts: Sequence[npt.NDArray[np.float64]], burst_share: float
) -> dict[str, Any]:
    """The whole trace's p50 / p99 estimate of a config from its measured latencies on the sample and over the burst
    stretches, one array per seed (`mixture_quantiles` per seed, then the mean over the seeds)."""
    per_seed = [mixture_quantiles(w, b, burst_share) for w, b in zip(sample, bursts, strict=True)]
    return {"p50_ms": float(np.mean([p[0] for p in per_seed])),
            "p99_ms": float(np.mean([p[1] for p in per_seed])),
            "burst_share": burst_share,
            "method": "two strata: the burst stretches and the sample's windows"}  # fmt: skip


def storm_verdict(block: Mapping[str, Any], best: Candidate, current: Candidate, *,
                  alpha: float = 0.05) -> Verdict | None:
    """A recommend verdict on the burst stretches' evidence (see the module docstring), or None when it does not
    apply: the current config does not storm there, `best` is not the picked candidate or is the current config,
    fewer than 2 seeds, or the paired test is not significant."""
    rank, twin = block["picked_rank"], block.get("picked_twin")
    if not block["current_storms"] or best.key() == current.key():
        return None
    rows = [block["checked"][rank]] if rank is not None else [
        r for r in block["references"] if twin is not None and Candidate.from_dict(r) == Candidate.from_dict(twin)]
    if not rows or Candidate.from_dict(rows[0]).key() != best.key():
        return None
    picked = rows[0]
    cur = next(r for r in [*block["checked"], *block["references"]] if r["current"])
    b, c = cur["peak_p99_per_seed_ms"], picked["peak_p99_per_seed_ms"]
    if len(c) < 2 or len(c) != len(b):
        return None
    p = paired_test(c, b)
    mb, mc = sum(b) / len(b), sum(c) / len(c)
    if p >= alpha or mc >= mb:
        return None
    impr = (mb - mc) / mb * 100.0
    return Verdict(True, f"the current config storms over the trace's burst stretches (p99 {mb:.3f} ms there against "
                         f"{mc:.3f} ms, {impr:.1f}% lower; paired t-test p={p:.3g} over {len(c)} seeds); the sample "
                         "alone does not show it", p, impr)  # fmt: skip
