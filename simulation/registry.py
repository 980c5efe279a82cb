"""The policy registry as the rest of tailtune sees it: kvsim's own tables of queue policies and replica
selectors (names, parameters, defaults), plus the selector policies of this layer; `all_policies` lists every
registered deployment kind's (`simulation.kinds`).
The CLI help and the tuner's search spaces enumerate from here, so a policy added to kvsim's registry appears
in both without another edit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.kinds import KINDS
from simulation.policies import REPLICA_POLICY, SELECTOR_POLICIES

if TYPE_CHECKING:
    import kvsim

__all__ = [
    "NOT_TUNABLE",
    "all_policies",
    "cassandra_policies",
    "cassandra_queue_policies",
    "coordinator_spec",
    "memcached_policy_specs",
    "policy_defaults",
    "policy_specs",
    "replica_selectors",
    "selector_defaults",
    "selector_spec",
]

#: Queue policies outside the tuner's scheduler space: the oracle is not deployable (it reads every server's
#: queue); duplicate and speculative are redundancy baselines, not schedulers to tune; stock is what an unpatched
#: Cassandra does — its knobs are a search of their own, not one scheduler among the patched ones.
NOT_TUNABLE = frozenset({"oracle", "duplicate", "speculative", "stock"})


def cassandra_queue_policies() -> tuple[str, ...]:
    """kvsim's queue policies, in its registry's order."""
    import kvsim

    return tuple(kvsim.policy_names())


def replica_selectors() -> tuple[str, ...]:
    """kvsim's replica selectors, in its registry's order."""
    import kvsim

    return tuple(kvsim.replica_names())


def policy_specs() -> list[kvsim.PolicySpec]:
    """kvsim's queue policies with their parameters (defaults, valid and search ranges), in registry order."""
    import kvsim

    return kvsim.policy_specs()


def coordinator_spec() -> kvsim.PolicySpec:
    """kvsim's coordinator section (the Cassandra-wide parameters the queue policies accept besides their own)
    with its parameters' valid ranges."""
    import kvsim

    return kvsim.coordinator_spec()


def memcached_policy_specs() -> list[kvsim.PolicySpec]:
    """kvsim's memcached policies (batching, chisel) with their parameters' valid ranges."""
    import kvsim

    return kvsim.memcached_policy_specs()


def selector_spec(name: str) -> kvsim.PolicySpec:
    import kvsim

    return kvsim.replica_spec(name)


def policy_defaults(name: str) -> dict[str, float]:
    """A queue policy's parameters and their defaults (kvsim.ParameterError for an unknown name)."""
    import kvsim

    return kvsim.policy_defaults(name)


def selector_defaults(name: str) -> dict[str, float]:
    import kvsim

    return kvsim.replica_defaults(name)


def cassandra_policies() -> tuple[str, ...]:
    """Every policy a Cassandra deployment runs: kvsim's queue policies, the selector policies (fifo + that replica
    selector) and the replica policy (`simulation.kinds`: the kind's `policies`)."""
    return (*cassandra_queue_policies(), *SELECTOR_POLICIES, REPLICA_POLICY)


def all_policies() -> dict[str, tuple[str, ...]]:
    """Every `--policy` name by deployment kind (`simulation.kinds`: each registered kind's, in `KINDS` order)."""
    return {name: kind.policy_names() for name, kind in KINDS.items()}
