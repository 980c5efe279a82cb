"""A deterministic stand-in evaluator for the study mechanics tests (fast, no simulator)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

from tuner.evaluators.base import Evaluator, EvaluatorSpec
from tuner.objective import Metrics
from tuner.space import Candidate


def fake_p99(cand: Candidate, seed: int, fraction: float = 1.0) -> float:
    """Known landscape: rein is best at k=4, range_factor=3, rate_step=1 (p99 = 2 ms + seed shift); fifo 10 ms."""
    shift = 0.01 * seed + (0.5 if fraction < 1.0 else 0.0)
    if cand.policy == "fifo":
        return 10.0 + shift
    p = cand.params
    return (2.0 + abs(float(p["k"]) - 4) + abs(float(p["range_factor"]) - 3) + abs(float(p["rate_step"]) - 1)
            + shift)


class FakeEvaluator(Evaluator):
    deployment = "cassandra"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls: list[tuple[str, int, float]] = []

    def policies(self) -> tuple[str, ...]:
        return ("fifo", "rein")

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        if self.delay_s:
            time.sleep(self.delay_s)
        self.calls.append((candidate.label(), seed, fraction))
        p99 = fake_p99(candidate, seed, fraction)
        return Metrics(p50_ms=p99 / 4, p95_ms=p99 / 2, p99_ms=p99, p999_ms=p99 * 2, mean_ms=p99 / 3)

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        return np.linspace(0.0, fake_p99(candidate, seed), 50)

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec("tests.tuner.fakes:make", {"delay_s": self.delay_s})


def make(**options: Any) -> FakeEvaluator:
    return FakeEvaluator(**options)
