"""Evaluator for the memcached deployment kind: kvsim's memcached replay, client batching vs Chisel.

The trace is reduced once to (keys per request, arrival time); each seed draws the request → server mapping
and the service-time noise (`service_cv`) — and, with `inter_arrival_us`, Poisson arrivals — so every candidate
replayed on one seed sees the same workload (common random numbers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from tailtune.base.errors import BadInputError
from tuner.evaluator import Evaluator, EvaluatorSpec
from tuner.objective import Metrics
from tuner.source import WorkloadSource
from tuner.space import Candidate

__all__ = ["KvsimMemcachedEvaluator"]


class KvsimMemcachedEvaluator(Evaluator):
    """Replays a trace on a memcached pool (default 2 servers × 4 worker threads, the Chisel paper's setup)."""

    deployment = "memcached"

    def __init__(
        self,
        source: Mapping[str, Any],
        *,
        servers: int = 2,
        worker_threads: int = 4,
        query_threads: int | None = None,
        client_overhead_us: float = 0.0,
        setup_us: float = 0.0,
        service_cv: float = 0.5,
        inter_arrival_us: float | None = None,
    ) -> None:
        self.source = WorkloadSource.from_dict(source)
        self.options: dict[str, Any] = {
            "servers": servers, "worker_threads": worker_threads, "query_threads": query_threads,
            "client_overhead_us": client_overhead_us, "setup_us": setup_us, "service_cv": service_cv,
            "inter_arrival_us": inter_arrival_us,
        }
        self._sizes: npt.NDArray[np.int64] | None = None
        self._arrivals: npt.NDArray[np.float64] | None = None

    def _prepare(self) -> None:
        if self._sizes is not None:
            return
        from kvsim import chisel

        table = self.source.load()
        where = self.source.label
        for col in ("request_id", "ts"):
            if col not in table.column_names:
                raise BadInputError.single(where, "required column is missing", line=1, field=col)
        if table.num_rows == 0:
            raise BadInputError.single(where, "the trace has no rows")
        sizes, arrivals = chisel.requests_from_long(
            table.column("request_id").to_numpy(zero_copy_only=False),
            table.column("ts").to_numpy(zero_copy_only=False),
        )
        self._sizes, self._arrivals = sizes, arrivals - arrivals[0]

    def _arrivals_for(self, seed: int) -> npt.NDArray[np.float64]:
        assert self._arrivals is not None
        ia = self.options["inter_arrival_us"]
        if ia is None:
            return self._arrivals
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x417]))
        gaps = rng.exponential(float(ia) * 1e-6, size=self._arrivals.size)
        out: npt.NDArray[np.float64] = np.cumsum(gaps) - gaps[0]
        return out

    def _replay(self, candidate: Candidate, seed: int, fraction: float) -> dict[str, Any]:
        from kvsim import chisel

        self._prepare()
        assert self._sizes is not None
        if candidate.policy not in self.policies():
            raise BadInputError.single("candidate", f"unknown memcached policy {candidate.policy!r}",
                                       field="policy")
        params: dict[str, int] = {}
        for k, v in candidate.params.items():
            if isinstance(v, str) or float(v) != int(float(v)):
                raise BadInputError.single("candidate", f"must be an integer, got {v!r}", field=k)
            params[k] = int(float(v))
        n = self._sizes.size if fraction >= 1.0 else max(1, math.ceil(fraction * self._sizes.size))
        o = self.options
        try:
            return chisel.replay_memcached(
                self._sizes[:n], self._arrivals_for(seed)[:n], policy=candidate.policy, params=params,
                servers=o["servers"], worker_threads=o["worker_threads"], query_threads=o["query_threads"],
                client_overhead_us=float(o["client_overhead_us"]), setup_us=float(o["setup_us"]),
                service_cv=float(o["service_cv"]), seed=int(seed),
            )
        except ValueError as exc:
            raise BadInputError.single("candidate", str(exc)) from None

    def policies(self) -> tuple[str, ...]:
        return ("batching", "chisel")

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        r = self._replay(candidate, seed, fraction)
        return Metrics(r["p50_ms"], r["p95_ms"], r["p99_ms"], r["p999_ms"], r["mean_ms"])

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        return np.asarray(self._replay(candidate, seed, 1.0)["latencies_ms"], dtype=np.float64)

    def analyzer_choice(self, seed: int = 0) -> Candidate:
        """Chisel's own analyzer levels for this workload (the `chisel` reference)."""
        r = self._replay(Candidate("chisel", {}), seed, 1.0)
        return Candidate("chisel", dict(r["params"]))

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec("kvsim-memcached", {"source": self.source.as_dict(), **self.options})
