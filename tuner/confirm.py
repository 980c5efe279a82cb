"""Held-out confirmation: the verdict is decided on replays the study never saw.

The study picks its best among many trials on its own seeds; the same seeds cannot then say whether the winner
is better (the winner's curse: the best of many noisy equals looks significant). So the pick and the current
config are replayed again on **fresh seeds** (`HOLDOUT_SEED_BASE + i`, disjoint from the study's `0..S-1`), and
for a trace with timestamps on the **later stretch** of the trace the study did not replay (the study tunes on
the earlier part; production applies the config to future traffic). Held-out seeds and stretch are the
confirmation's; the study's seeds stay the reproducible `expected.per_seed`.

**The test: paired batch means pooled over the held-out seeds.** Each held-out replay's measured requests
(after the warm-up cut, in arrival order) are cut into contiguous batches (`tuner.evidence`); batch b of seed s
of the candidate and of the current config hold the same requests, arrivals and demands (common random
numbers), so they form a pair. With S seeds and B batches there are S×B pairs, instead of S values across seeds
alone (a 2-seed test has one degree of freedom and almost never recommends). Consecutive batches of one replay
are not independent — a queue carries over a batch boundary; the lag-1 autocorrelation of the differences was
0.34 on the validation workload, and a t-test that ignores it recommended 15 % of equal candidates. So the
variance of the mean difference is inflated as for an AR(1) series: with ρ the lag-1 autocorrelation of the
differences estimated within each seed's series (clipped to [0, 0.9]), var × (1 + ρ)/(1 − ρ), on
n_eff = n (1 − ρ)/(1 + ρ) − 1 degrees of freedom. `validation/verdict_error_rates.py` measures the
false-recommend rate this gives on candidates equal in truth, and the power at known effects
(validation/RESULTS.md § The verdict's error rates).

The effect is the relative change of the objective (the first term; p99 by default): improvement
= mean(baseline − candidate) / mean(baseline), with a two-sided 95 % Student-t interval (the baseline's mean
taken as fixed), a one-sided p-value (candidate lower), and the smallest improvement this many pairs with this
spread detect with 80 % power at the test's level (`min_detectable_pct`), all on the corrected variance and
degrees of freedom.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.evaluators import Evaluator
from tuner.evidence import batch_metrics
from tuner.objective import Objective
from tuner.space import Candidate

__all__ = ["HOLDOUT_SEED_BASE", "Confirmation", "confirm", "holdout_seeds", "lag1"]

#: Held-out seeds start here: far from the study's seeds 0..S-1 (at most `tune_max_seeds`).
HOLDOUT_SEED_BASE = 100_000
#: Power the smallest detectable effect is stated at.
POWER = 0.8
#: The largest lag-1 autocorrelation the variance correction takes (a larger estimate is clipped to it).
MAX_RHO = 0.9


def holdout_seeds(count: int) -> tuple[int, ...]:
    return tuple(HOLDOUT_SEED_BASE + i for i in range(count))


@dataclass(frozen=True)
class Confirmation:
    seeds: list[int]
    #: the held-out stretch of the trace (`{"fraction", "requests", "from_s", "to_s"}`), or None: fresh seeds only
    holdout: dict[str, Any] | None
    method: str
    metric: str
    pairs: int
    baseline_value: float | None
    candidate_value: float | None
    improvement_pct: float | None
    interval_pct: list[float] | None
    p_value: float | None
    min_detectable_pct: float | None
    alpha: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds), "holdout": self.holdout, "method": self.method, "metric": self.metric,
            "pairs": self.pairs, "baseline": self.baseline_value, "candidate": self.candidate_value,
            "improvement_pct": self.improvement_pct, "interval_pct": self.interval_pct, "p_value": self.p_value,
            "min_detectable_pct": self.min_detectable_pct, "alpha": self.alpha,
        }

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < self.alpha and (self.improvement_pct or 0.0) > 0

    def where(self) -> str:
        """`3 held-out seeds and the last 20 % of the trace`."""
        seeds = f"{len(self.seeds)} held-out seed{'s' if len(self.seeds) != 1 else ''}"
        if self.holdout is None:
            return seeds
        return f"{seeds} and the last {100 * float(self.holdout['fraction']):.0f} % of the trace"

    def sentence(self) -> str:
        """`p99 −47.0 % [−52.1 %, −41.3 %] on 3 held-out seeds and the last 20 % of the trace (...)`."""
        if self.improvement_pct is None or self.interval_pct is None:
            return f"{self.metric}: not estimated on {self.where()} ({self.method})"
        lo, hi = self.interval_pct
        mde = (f"; the smallest change it detects is −{self.min_detectable_pct:.1f} %"
               if self.min_detectable_pct is not None else "")
        return (f"{self.metric} {-self.improvement_pct:+.1f} % [{-hi:+.1f} %, {-lo:+.1f} %] on {self.where()} "
                f"({self.pairs} paired batches, p={self.p_value:.3g}{mde})")


def _pairs(ev: Evaluator, candidate: Candidate, baseline: Candidate, seeds: Sequence[int],
           objective: Objective) -> tuple[list[float], list[float], list[int]]:
    """The candidate's and the baseline's batch values, pooled over the seeds, and each seed's batch count."""
    warm = ev.warmup_fraction()
    cand: list[float] = []
    base: list[float] = []
    runs: list[int] = []
    for seed in seeds:
        b = batch_metrics(ev.latencies_ms(baseline, seed), warm)
        c = batch_metrics(ev.latencies_ms(candidate, seed), warm)
        if not b or len(b) != len(c):
            continue
        base += [objective.values(m)[0] for m in b]
        cand += [objective.values(m)[0] for m in c]
        runs.append(len(b))
    return cand, base, runs


def lag1(diffs: Sequence[float], runs: Sequence[int]) -> float:
    """The lag-1 autocorrelation of `diffs` (consecutive runs of lengths `runs`, one per seed) around their pooled
    mean, from consecutive pairs within each run, clipped to [0, 0.9]."""
    mean = sum(diffs) / len(diffs)
    den = sum((d - mean) ** 2 for d in diffs)
    num = 0.0
    at = 0
    for r in runs:
        part = diffs[at:at + r]
        num += sum((a - mean) * (b - mean) for a, b in itertools.pairwise(part))
        at += r
    rho = num / den if den > 0 else 0.0
    return min(max(rho, 0.0), MAX_RHO)


def confirm(
    ev: Evaluator,
    candidate: Candidate,
    baseline: Candidate,
    seeds: Sequence[int],
    objective: Objective,
    *,
    alpha: float = 0.05,
    holdout: dict[str, Any] | None = None,
) -> Confirmation:
    """Replay `candidate` and `baseline` on the held-out `seeds` of `ev` (the held-out stretch, when there is
    one) and test the candidate's improvement of the first objective term (see the module docstring)."""
    from scipy import stats

    cand, base, runs = _pairs(ev, candidate, baseline, seeds, objective)
    n = len(cand)
    method = "paired batch means pooled over held-out seeds, AR(1)-corrected (one-sided Student-t)"
    label = objective.labels[0]
    if n < 2:
        return Confirmation(list(seeds), holdout, method + ": too few measured requests for two batches", label,
                            n, None, None, None, None, None, None, alpha)
    diffs = [b - c for b, c in zip(base, cand, strict=True)]
    mean_b = sum(base) / n
    mean_c = sum(cand) / n
    mean_d = sum(diffs) / n
    sd = math.sqrt(sum((d - mean_d) ** 2 for d in diffs) / (n - 1))
    rho = lag1(diffs, runs)
    inflate = (1.0 + rho) / (1.0 - rho)
    se = sd / math.sqrt(n) * math.sqrt(inflate)
    df = max(1.0, n / inflate - 1.0)
    method += f"; lag-1 autocorrelation {rho:.2f}, {df:.1f} degrees of freedom"
    if mean_b <= 0:
        return Confirmation(list(seeds), holdout, method, label, n, mean_b, mean_c, None, None, None, None, alpha)
    if se == 0.0:
        p = 0.0 if mean_d > 0 else 1.0
        half = 0.0
    else:
        p = float(stats.t.sf(mean_d / se, df))
        half = float(stats.t.ppf(0.975, df)) * se
    mde = (float(stats.t.ppf(1 - alpha, df)) + float(stats.t.ppf(POWER, df))) * se
    impr = 100.0 * mean_d / mean_b
    interval = [100.0 * (mean_d - half) / mean_b, 100.0 * (mean_d + half) / mean_b]
    return Confirmation(list(seeds), holdout, method, label, n, mean_b, mean_c, impr, interval, p,
                        100.0 * mde / mean_b, alpha)
