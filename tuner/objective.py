"""What a study minimizes: latency metrics, weighted sums, several objectives (Pareto), constraints vs baseline.

Spec strings (the `--objective` / `--constraint` options):
- `p99` (default) — one metric; metrics: p50, p95, p99, p999, mean (all in ms);
- `0.3*p50+0.7*p99` — a weighted sum (one objective);
- `p50,p99` — several objectives (multi-objective study, Pareto front), each may be a weighted sum;
- constraint `p50<=5%` — the mean p50 over the seeds may be at most 5 % above the baseline's (`p99<=0%`:
  never worse). A constraint is satisfied when its value `mean/baseline - 1 - x` is <= 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from base.errors import BadInputError

__all__ = [
    "METRICS",
    "Constraint",
    "Metrics",
    "Objective",
    "Term",
    "mean_ci",
    "parse_objective",
]

METRICS = ("p50", "p95", "p99", "p999", "mean")


@dataclass(frozen=True, slots=True)
class Metrics:
    """Latency figures of one replay (ms)."""

    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    mean_ms: float

    def get(self, metric: str) -> float:
        if metric not in METRICS:
            raise KeyError(metric)
        return float(getattr(self, f"{metric}_ms"))

    def as_dict(self) -> dict[str, float]:
        return {f"{m}_ms": self.get(m) for m in METRICS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Metrics:
        return cls(**{f"{m}_ms": float(d[f"{m}_ms"]) for m in METRICS})

    @classmethod
    def mean_of(cls, ms: Sequence[Metrics]) -> Metrics:
        if not ms:
            raise ValueError("no metrics to average")
        return cls(**{f"{m}_ms": sum(x.get(m) for x in ms) / len(ms) for m in METRICS})


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the Student-t confidence interval (0 for one value)."""
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    from scipy import stats

    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return mean, half


@dataclass(frozen=True, slots=True)
class Term:
    """A weighted sum of metrics (one objective), minimized."""

    weights: tuple[tuple[str, float], ...]

    def value(self, m: Metrics) -> float:
        return sum(w * m.get(name) for name, w in self.weights)

    @property
    def label(self) -> str:
        if len(self.weights) == 1 and self.weights[0][1] == 1.0:
            return self.weights[0][0]
        return "+".join(f"{w:g}*{name}" for name, w in self.weights)


@dataclass(frozen=True, slots=True)
class Constraint:
    """`metric` (mean over seeds) must not exceed the baseline's by more than `max_worse_pct` percent."""

    metric: str
    max_worse_pct: float

    def value(self, m: Metrics, baseline: Metrics) -> float:
        """<= 0 when satisfied (Optuna's convention)."""
        base = baseline.get(self.metric)
        if base <= 0:
            return 0.0 if m.get(self.metric) <= 0 else math.inf
        return m.get(self.metric) / base - 1.0 - self.max_worse_pct / 100.0

    @property
    def label(self) -> str:
        return f"{self.metric}<={self.max_worse_pct:g}%"


@dataclass(frozen=True, slots=True)
class Objective:
    """One or more terms (all minimized) and constraints against the baseline."""

    terms: tuple[Term, ...]
    constraints: tuple[Constraint, ...] = ()

    @property
    def multi(self) -> bool:
        return len(self.terms) > 1

    @property
    def directions(self) -> list[Literal["minimize", "maximize"]]:
        return ["minimize"] * len(self.terms)

    @property
    def labels(self) -> list[str]:
        return [t.label for t in self.terms]

    @property
    def spec(self) -> str:
        return ",".join(self.labels)

    def values(self, m: Metrics) -> list[float]:
        return [t.value(m) for t in self.terms]

    def constraint_values(self, m: Metrics, baseline: Metrics | None) -> list[float]:
        if baseline is None:
            return [0.0 for _ in self.constraints]
        return [c.value(m, baseline) for c in self.constraints]

    def feasible(self, m: Metrics, baseline: Metrics | None) -> bool:
        return all(v <= 0 for v in self.constraint_values(m, baseline))

    def violated(self, m: Metrics, baseline: Metrics | None) -> list[str]:
        """Labels of the constraints `m` breaks."""
        vals = self.constraint_values(m, baseline)
        return [c.label for c, v in zip(self.constraints, vals, strict=True) if v > 0]


_TERM = re.compile(r"^\s*(?:(?P<w>[0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*\*\s*)?(?P<m>[a-z0-9]+)\s*$")
_CONSTRAINT = re.compile(r"^\s*(?P<m>[a-z0-9]+)\s*<=\s*\+?(?P<x>[0-9]*\.?[0-9]+)\s*%\s*$")


def _bad(field: str, problem: str) -> BadInputError:
    return BadInputError.single("command line", problem, field=field)


def parse_objective(spec: str = "p99", constraints: Sequence[str] = ()) -> Objective:
    """Parse `--objective` and `--constraint` strings (see the module docstring)."""
    terms: list[Term] = []
    for part in spec.split(","):
        weights: list[tuple[str, float]] = []
        for piece in part.split("+"):
            mt = _TERM.match(piece.lower())
            if mt is None or mt["m"] not in METRICS:
                raise _bad("objective", f"{piece.strip()!r} is not METRIC or WEIGHT*METRIC (metrics: "
                                        f"{', '.join(METRICS)})")
            w = float(mt["w"]) if mt["w"] else 1.0
            if w <= 0:
                raise _bad("objective", f"weight of {mt['m']} must be > 0")
            weights.append((mt["m"], w))
        terms.append(Term(tuple(weights)))
    cons: list[Constraint] = []
    for c in constraints:
        mc = _CONSTRAINT.match(c.lower())
        if mc is None or mc["m"] not in METRICS:
            raise _bad("constraint", f"{c!r} is not METRIC<=X% (e.g. p50<=5%)")
        cons.append(Constraint(mc["m"], float(mc["x"])))
    return Objective(tuple(terms), tuple(cons))
