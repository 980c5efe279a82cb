"""Evaluator for the memcached deployment kind: kvsim's memcached replay, client batching vs Chisel, through the
simulation layer (`simulation.memcached`) that `tailtune simulate` uses too.

The trace is reduced once to (keys per request, arrival time); each seed draws the request → server mapping
and the service-time noise (`service_cv`) — and, with `inter_arrival_us`, Poisson arrivals — so every candidate
replayed on one seed sees the same workload (common random numbers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from base.errors import BadInputError
from simulation import memcached
from simulation.memcached import MEMCACHED_POLICIES, MemcachedDeployment, MemcachedTrace
from simulation.source import WorkloadSource
from tuner.evaluators.base import Evaluator, EvaluatorSpec
from tuner.objective import Metrics
from tuner.space import Candidate

if TYPE_CHECKING:
    import kvsim

__all__ = ["KvsimMemcachedEvaluator"]


class KvsimMemcachedEvaluator(Evaluator):
    """Replays a trace on a memcached pool (default 2 servers × 4 worker threads, the Chisel paper's setup, with
    service-time noise `service_cv` 0.5). Keyword options are the fields of `MemcachedDeployment`."""

    deployment = "memcached"

    def __init__(self, source: Mapping[str, Any], **options: Any) -> None:
        self.source = WorkloadSource.from_dict(source)
        self.options: dict[str, Any] = {**MemcachedDeployment(service_cv=0.5).as_dict(), **options}
        self.setup = MemcachedDeployment.from_dict(self.options)
        self._trace: MemcachedTrace | None = None

    def _replay(self, candidate: Candidate, seed: int, fraction: float) -> kvsim.MemcachedResult:
        if candidate.policy not in self.policies():
            raise BadInputError.single("candidate", f"unknown memcached policy {candidate.policy!r}",
                                       field="policy")
        if self._trace is None:
            self._trace = memcached.prepare(self.source.load(), source=self.source.label)
        return memcached.replay(self._trace, self.setup, candidate.policy, candidate.params, seed,
                                fraction=fraction, where="candidate")

    def policies(self) -> tuple[str, ...]:
        return MEMCACHED_POLICIES

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        r = self._replay(candidate, seed, fraction)
        return Metrics(r.p50_ms, r.p95_ms, r.p99_ms, r.p999_ms, r.mean_ms)

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        return np.asarray(self._replay(candidate, seed, 1.0).latencies_ms, dtype=np.float64)

    def reference(self, seed: int) -> Candidate:
        """Chisel's own analyzer levels for this workload (the `chisel` reference)."""
        r = self._replay(Candidate("chisel", {}), seed, 1.0)
        return Candidate("chisel", dict(r.params))

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec("kvsim-memcached", {"source": self.source.as_dict(), **self.options})

    def deployment_record(self) -> dict[str, Any]:
        return {"kind": "memcached", "source": self.source.as_dict(), **self.setup.as_dict()}

    def simulate_args(self, candidate: Candidate, seed: int) -> list[str]:
        params = [a for k, v in sorted(candidate.params.items()) for a in ("--param", f"{k}={v}")]
        return ["simulate", *self.source.cli_args(), *self.setup.cli_args(), "--policy", candidate.policy,
                *params, "--seed", str(seed)]
