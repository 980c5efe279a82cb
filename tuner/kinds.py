"""The tuner's part of each deployment kind, found through the kinds' registry (`simulation.kinds`).

A kind's `ModelKind.tuner` names its `TunerKind` (`module:attr`): the default search space built from an
analysis summary, the rendering of a config for the kind's clients and servers, the paper's default config (the
reference a tune replays when its evaluator has none of its own) and the current config assumed when the user
gives none. Its evaluator is the `ModelKind.evaluator` name. `space_for`, `render` and `check_timestamps` are
the tuner's dispatch on a kind: nothing in the tuner compares a kind with a kind's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from base.errors import BadInputError
from simulation.kinds import KINDS, ModelKind, find_kind, kind_names, model_kind, resolve_ref
from tuner.recommend import render_cassandra, render_memcached
from tuner.space import Candidate, SearchSpace, cassandra_space, memcached_space

__all__ = ["CASSANDRA", "MEMCACHED", "TunerKind", "check_timestamps", "render", "space_for", "tuner_kind"]


@dataclass(frozen=True)
class TunerKind:
    """What the tuner needs of one deployment kind (module doc)."""

    #: The default search space of the kind from an analysis summary (None: the documented defaults).
    space: Callable[[Mapping[str, Any] | None], SearchSpace]
    #: A config rendered for the kind's clients and servers (the recommendation's `render`).
    render: Callable[[Candidate], dict[str, Any]]
    #: The paper's default config, replayed as a reference when the evaluator has no `reference` of its own.
    paper_default: Candidate
    #: The current config a tune assumes when it is given none.
    baseline: Candidate
    #: What to do when every trial gives the same p99 (the model's servers idle at the load: `tuner.flat`).
    idle_remedy: str = "tune at a higher --load (a what-if offered load)"


#: Cassandra: the scheduler space (kvsim's queue policies, Heron, the replica selectors); Rein's defaults
#: (K=4, R=3, r_q1=5, rate_step=1, τ1=1) as the paper default; FIFO as the current config.
CASSANDRA = TunerKind(
    space=cassandra_space,
    render=render_cassandra,
    paper_default=Candidate("rein", {"k": 4, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0}),
    baseline=Candidate("fifo"),
    idle_remedy="calibrate the servers' capacity (set the deployment's connection.jmx_port, then run `tailtune "
    "deployments calibrate`) or tune at a higher --load",
)
#: memcached: batching vs chisel; Chisel's analyzer choice for the workload as the paper default (its levels
#: filled in by the evaluator's `reference`); client batching as the current config.
MEMCACHED = TunerKind(
    space=memcached_space,
    render=render_memcached,
    paper_default=Candidate("chisel", {}),
    baseline=Candidate("batching"),
    idle_remedy="measure the client overhead (`tailtune deployments discover --profile-servers`) or tune at a "
    "higher --load",
)


def tuner_kind(name: object, *, field: str = "kind") -> TunerKind:
    """The tuner's part of the registered kind `name` (`model_kind`'s BadInputError naming `field` for another
    name)."""
    kind = model_kind(name, field=field)
    found = resolve_ref(kind.tuner)
    if not isinstance(found, TunerKind):
        raise TypeError(f"deployment kind {kind.name!r}: {kind.tuner} is not a TunerKind")
    return found


def space_for(deployment: str, summary: Mapping[str, Any] | None = None) -> SearchSpace:
    """The default space of a deployment kind (a registered kind: `simulation.kinds`)."""
    if find_kind(deployment) is None:
        raise BadInputError.single(
            "command line", f"unknown deployment {deployment!r} (one of {', '.join(kind_names())})", field="store"
        )
    return tuner_kind(deployment).space(summary)


def render(deployment: str, cand: Candidate) -> dict[str, Any]:
    """`cand` rendered for a `deployment` kind's clients and servers."""
    return tuner_kind(deployment).render(cand)


def check_timestamps(deployment: str) -> None:
    """Refuses `use_timestamps` for a kind whose replay does not take a trace's timestamps (any name that is no
    registered kind too), naming the kinds that do."""
    kind: ModelKind | None = find_kind(deployment)
    if kind is None or not kind.replays_timestamps:
        names = ", ".join(k.name for k in KINDS.values() if k.replays_timestamps)
        raise BadInputError.single("--use-timestamps", f"only the {names} store replays trace timestamps",
                                   field="use_timestamps")
