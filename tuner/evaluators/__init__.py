"""Evaluators: replay one candidate configuration on one seed (contract in `tuner.evaluators.base`).

Shaped like Optuna's samplers: the base imports no implementation; each implementation lives in a private
module and is re-exported here; `build_evaluator` makes one from a JSON-able spec (parallel workers, Spark
executors). A spec's `kind` is a registered name or `module:callable` (a factory taking the options).
"""

from __future__ import annotations

import importlib

from tuner.evaluators._kvsim_cassandra import KvsimCassandraEvaluator
from tuner.evaluators._kvsim_memcached import KvsimMemcachedEvaluator
from tuner.evaluators.base import Evaluator, EvaluatorSpec

__all__ = [
    "EVALUATORS",
    "Evaluator",
    "EvaluatorSpec",
    "KvsimCassandraEvaluator",
    "KvsimMemcachedEvaluator",
    "build_evaluator",
]

#: Registered evaluator kinds.
EVALUATORS: dict[str, type[Evaluator]] = {
    "kvsim-cassandra": KvsimCassandraEvaluator,
    "kvsim-memcached": KvsimMemcachedEvaluator,
}


def build_evaluator(spec: EvaluatorSpec) -> Evaluator:
    """The evaluator of a spec: a registered kind or a `module:callable` factory."""
    if spec.kind in EVALUATORS:
        return EVALUATORS[spec.kind](**spec.options)
    module, sep, name = spec.kind.partition(":")
    if not sep:
        raise ValueError(f"unknown evaluator kind {spec.kind!r} (one of {sorted(EVALUATORS)} or module:callable)")
    ev = getattr(importlib.import_module(module), name)(**spec.options)
    if not isinstance(ev, Evaluator):
        raise TypeError(f"{spec.kind} did not return an Evaluator")
    return ev
