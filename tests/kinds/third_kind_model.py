"""The model half of `filekv`, a deployment kind that exists only in the tests: the proof that a kind is added by
one `ModelKind` row and the modules it names, with no edit anywhere else.

Its cluster (`tests.kinds.third_kind_ops.FileKv`, the operations half) is a directory; its model is a deployment
class of its own (`FileKvDeployment`: a pool of servers × worker threads with service-time noise) replayed by
the memcached engine under policy names of its own (`filekv-batching`, `filekv-chisel`). This module holds
everything the registry's references name: the policies, the config checks, the tuner's evaluator and its
space / rendering / reference configs, and `tailtune simulate`'s run.

`register_third()` registers `THIRD` for the length of a `with` block (and removes it after, whatever happens).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from base.errors import BadInputError
from simulation import memcached
from simulation.config_check import MEMCACHED_CHECKS, KindChecks, Where
from simulation.kinds import ModelKind, register, unregister
from simulation.source import WorkloadSource
from tailtune.cli.commands.simulate import SimulateKind, Simulation
from tuner.evaluators.base import Evaluator, EvaluatorSpec
from tuner.kinds import TunerKind
from tuner.objective import Metrics
from tuner.space import Candidate, SearchSpace, memcached_space

if TYPE_CHECKING:
    import kvsim

__all__ = [
    "CHECKS",
    "NAME",
    "POLICIES",
    "SIMULATE",
    "THIRD",
    "TUNER",
    "FileKvDeployment",
    "FileKvEvaluator",
    "register_third",
    "replay",
]

NAME = "filekv"
#: This module, as the registry's references name it.
_MODULE = "tests.kinds.third_kind_model"
#: The kind's policies: the memcached engine's, under names of their own.
POLICIES = ("filekv-batching", "filekv-chisel")
_PREFIX = "filekv-"


@dataclass(frozen=True)
class FileKvDeployment:
    """A filekv pool: `servers` × `worker_threads`, service times with coefficient of variation `service_cv`."""

    servers: int = 2
    worker_threads: int = 4
    service_cv: float = 0.5

    def engine(self) -> memcached.MemcachedDeployment:
        """The memcached engine's pool replaying it."""
        return memcached.MemcachedDeployment(servers=self.servers, worker_threads=self.worker_threads,
                                             service_cv=self.service_cv)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FileKvDeployment:
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise BadInputError.single("deployment", f"unknown option(s) {unknown}", field=unknown[0])
        return cls(**d)


def _engine_policy(policy: str, where: str = "candidate") -> str:
    if policy not in POLICIES:
        raise BadInputError.single(where, f"unknown {NAME} policy {policy!r} (one of {', '.join(POLICIES)})",
                                   field="policy")
    return policy.removeprefix(_PREFIX)


def replay(trace: memcached.MemcachedTrace, deployment: FileKvDeployment, policy: str,
           params: Mapping[str, Any], seed: int, *, fraction: float = 1.0,
           where: str = "simulate") -> kvsim.MemcachedResult:
    """One replay of `policy` on `seed` (the memcached engine's)."""
    return memcached.replay(trace, deployment.engine(), _engine_policy(policy, where), params, seed,
                            fraction=fraction, where=where)


# ------------------------------------------------------------------------------------------------ checks


def _check_params(policy: str, params: Mapping[str, Any], replica_params: Mapping[str, Any], driver: str | None,
                  where: Where) -> None:
    if policy not in POLICIES:
        raise where.policy(f"unknown {NAME} policy {policy!r} (one of {', '.join(POLICIES)})")
    MEMCACHED_CHECKS.params(policy.removeprefix(_PREFIX), params, replica_params, driver, where)


def _check_target(config: Mapping[str, Any], policy: str, params: Mapping[str, Any], driver: str | None) -> None:
    """The config file the operations write holds the config as it is: nothing more to check."""


CHECKS = KindChecks(_check_params, _check_target)


# ------------------------------------------------------------------------------------------------ the tuner's


class FileKvEvaluator(Evaluator):
    """Replays a source on a `FileKvDeployment` (options: its fields)."""

    deployment = NAME

    def __init__(self, source: Mapping[str, Any], **options: Any) -> None:
        self.source = WorkloadSource.from_dict(source)
        self.setup = FileKvDeployment.from_dict(options)
        self._trace: memcached.MemcachedTrace | None = None

    def _replay(self, candidate: Candidate, seed: int, fraction: float) -> kvsim.MemcachedResult:
        if self._trace is None:
            self._trace = memcached.prepare(self.source.load(), source=self.source.label)
        return replay(self._trace, self.setup, candidate.policy, candidate.params, seed, fraction=fraction,
                      where="candidate")

    def policies(self) -> tuple[str, ...]:
        return POLICIES

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        r = self._replay(candidate, seed, fraction)
        return Metrics(r.p50_ms, r.p95_ms, r.p99_ms, r.p999_ms, r.mean_ms)

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        return np.asarray(self._replay(candidate, seed, 1.0).latencies_ms, dtype=np.float64)

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec(f"{_MODULE}:FileKvEvaluator", {"source": self.source.as_dict(), **self.setup.as_dict()})

    def deployment_record(self) -> dict[str, Any]:
        return {"kind": NAME, "source": self.source.as_dict(), **self.setup.as_dict()}


def _space(summary: Mapping[str, Any] | None) -> SearchSpace:
    """memcached's space (from the summary's multiget sizes) over the kind's own policy names."""
    engine = memcached_space(summary)
    return SearchSpace(NAME, tuple(replace(p, policy=_PREFIX + p.policy) for p in engine.policies))


def _render(cand: Candidate) -> dict[str, Any]:
    """The config file's content."""
    return {"json": {NAME: {"policy": cand.policy, **dict(sorted(cand.params.items()))}}}


TUNER = TunerKind(space=_space, render=_render, paper_default=Candidate("filekv-chisel", {}),
                  baseline=Candidate("filekv-batching"))


# ------------------------------------------------------------------------------------------------ the CLI's


def _simulate(sim: Simulation) -> None:
    from base.console import out_console, print_json
    from simulation.config_check import check_params

    check_params(sim.kind.name, sim.policy, sim.params)
    source = sim.source()
    given = {f.name: sim.options[f.name] for f in fields(FileKvDeployment) if sim.options.get(f.name) is not None}
    dep = sim.kind.deployment_class()(**given)
    trace = memcached.prepare(source.load(), source=source.where)
    summary = replay(trace, dep, sim.policy, sim.params, sim.seed).to_json()
    if sim.as_json:
        print_json(summary)
    else:
        out_console.print(f"{sim.policy}: p99 {summary['p99_ms']:.3f} ms")


SIMULATE = SimulateKind(policy_help=lambda: f"{NAME}: {', '.join(POLICIES)}", run=_simulate)


THIRD = ModelKind(
    name=NAME,
    deployment=f"{_MODULE}:FileKvDeployment",
    operations="tests.kinds.third_kind_ops:FileKv",
    policies=f"{_MODULE}:POLICIES",
    checks=f"{_MODULE}:CHECKS",
    evaluator=f"{_MODULE}:FileKvEvaluator",
    tuner=f"{_MODULE}:TUNER",
    simulate=f"{_MODULE}:SIMULATE",
)


@contextmanager
def register_third() -> Iterator[ModelKind]:
    """`THIRD` registered in `simulation.kinds` for the block; removed after it."""
    register(THIRD)
    try:
        yield THIRD
    finally:
        unregister(NAME)
