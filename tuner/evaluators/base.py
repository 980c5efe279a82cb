"""The evaluator: replays one candidate configuration on one seed and returns its latency metrics.

Contract of every `Evaluator` (the study, the references and the tests rely on it):

1. **Deterministic**: `evaluate(c, seed, fraction)` returns the same `Metrics` for the same arguments, in any
   process, in any order of calls.
2. **Common random numbers**: for one `seed`, every candidate sees the same materialized workload (arrivals,
   request → server mapping, service demands); only the policy and its parameters differ. So the difference of
   two candidates on one seed is a paired sample.
3. **Prefix**: `fraction` in (0, 1] replays only the first `ceil(fraction × requests)` requests (pruning).
4. **Errors**: a candidate the evaluator cannot replay (unknown policy, parameter out of range) raises
   `base.errors.BadInputError` naming the parameter; the study turns it into a failed trial.
5. **Rebuildable**: `spec()` returns an `EvaluatorSpec` (JSON-able) from which `build_evaluator` makes an equal
   evaluator in another process (parallel workers, Spark executors).
6. **Stopping**: `evaluate_below(c, seed, p99_ms)` is `evaluate(c, seed)`, or None when the evaluator stopped
   the replay once its p99 was certainly above `p99_ms` (by default it never stops); a None is a fact, not an
   estimate.
7. `latencies_ms(c, seed)` returns every request's latency (ms) for the before/after CDF plots;
   `keep_latencies(candidates, seed)` is a hint that those will be asked for after their `evaluate` on `seed`
   (an evaluator may keep them from that replay instead of replaying again; by default nothing is kept).

8. `adapt_summary(summary)` returns the analysis summary the search space is derived from, adapted to what
   this evaluator replays (the Cassandra evaluator puts in the fan-out of the simulated cluster).
9. `reference(seed)` returns the evaluator's own reference configuration (memcached: Chisel's analyzer levels
   for the workload), or None for the deployment kind's paper defaults.
10. `replay_requests()` is the number of requests of a whole replay (None: unknown; the study then keeps one
    prefix rung). `deployment_record()` describes the deployment replayed (source, cluster, load, warm-up ...)
    as JSON, and `simulate_args(candidate, seed)` the `tailtune simulate` arguments that replay `candidate` on
    `seed` exactly.

This module imports no implementation: they live in private modules of `tuner.evaluators`, which re-exports
them and builds evaluators from specs (`build_evaluator`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tuner.objective import Metrics
from tuner.space import Candidate

__all__ = ["Evaluator", "EvaluatorSpec"]


@dataclass(frozen=True, slots=True)
class EvaluatorSpec:
    """How to build an evaluator: a registered kind (or `module:callable`) and its JSON options."""

    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "options": dict(self.options)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EvaluatorSpec:
        return cls(str(d["kind"]), dict(d.get("options") or {}))


class Evaluator(ABC):
    """Replays candidates; see the module docstring for the contract."""

    #: The deployment kind it replays: a registered kind's name (`simulation.kinds`).
    deployment: str = ""

    @abstractmethod
    def policies(self) -> tuple[str, ...]:
        """Policy names this evaluator can replay."""

    @abstractmethod
    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        """Latency metrics of `candidate` on the workload of `seed` (first `fraction` of the requests)."""

    def evaluate_below(self, candidate: Candidate, seed: int, p99_ms: float) -> Metrics | None:
        """The metrics of the whole workload of `seed`, or None when the replay stopped as soon as its p99 was
        certainly above `p99_ms` (default: never stops)."""
        return self.evaluate(candidate, seed)

    @abstractmethod
    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        """Every request's latency in ms (arrival order) for the whole workload of `seed`."""

    def keep_latencies(self, candidates: Iterable[Candidate], seed: int) -> None:  # noqa: B027 (optional hook)
        """Hint: `latencies_ms(c, seed)` will be asked for each of `candidates` after its `evaluate(c, seed)`."""

    @abstractmethod
    def spec(self) -> EvaluatorSpec:
        """A JSON-able description from which `build_evaluator` rebuilds an equal evaluator."""

    def describe(self) -> dict[str, Any]:
        """What to record about the evaluator (tracking): its spec by default."""
        return self.spec().as_dict()

    def adapt_summary(self, summary: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The summary the search space is derived from (default: as given)."""
        return summary

    def reference(self, seed: int) -> Candidate | None:
        """The evaluator's own reference configuration, or None for the paper defaults."""
        return None

    def deployment_record(self) -> dict[str, Any]:
        """The replayed deployment as JSON (default: the spec's options)."""
        return dict(self.spec().options)

    def warmup_fraction(self) -> float:
        """Fraction of the first requests (by arrival) the metrics leave out (default: none)."""
        return 0.0

    def replay_requests(self) -> int | None:
        """Requests a whole replay of one seed replays (the study lays out its prefix rungs by it), or None."""
        return None

    def simulate_args(self, candidate: Candidate, seed: int) -> list[str] | None:
        """`tailtune simulate` arguments that replay `candidate` on `seed` exactly; None if there are none."""
        return None

    def overloaded(self, candidate: Candidate) -> str | None:
        """Why `candidate` overloads the deployment in the replays evaluated so far (extra reads it sends push
        the servers' utilisation past the deployment's limit, or requests time out), or None. The study prunes
        such a candidate even when its latencies look good (a replay of seconds may not show the queue that keeps
        growing), and asks after every rung, so a candidate that overloads its prefix replays nothing more."""
        return None
