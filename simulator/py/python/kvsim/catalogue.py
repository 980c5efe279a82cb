"""The catalogue of policies and replica selectors, read from the core's registries: every policy's and selector's
parameters with their meaning, default, valid range and the range a tuner searches. The CLI's help and the
tuner's search spaces enumerate from here. And the simulated cluster's defaults (`cluster_defaults()`), which
`kvsim.Cluster` and tailtune's deployments read.

    >>> spec = kvsim.policy_spec("rein")
    >>> spec.param("k").search
    SearchSpec(kind='int', low=2.0, high=8.0, step=None, log=False, choices=None)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kvsim import _kvsim
from kvsim._kvsim import ClusterConfig, ComponentSpec, ParameterError, ParamSpec, SearchSpec

__all__ = [
    "ClusterConfig",
    "ParamSpec",
    "PolicySpec",
    "SearchSpec",
    "cluster_defaults",
    "coordinator_defaults",
    "coordinator_spec",
    "memcached_policy_specs",
    "policy_defaults",
    "policy_names",
    "policy_spec",
    "policy_specs",
    "replica_defaults",
    "replica_names",
    "replica_spec",
    "replica_specs",
]

Kind = Literal["policy", "replica selector", "memcached policy", "coordinator section"]


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy or replica selector of the registry: its name, whether the engine's event loop is monomorphized
    for it (`fast_loop`; otherwise `loop_note` says why it runs the general loop) and its parameters (the
    binding's `ParamSpec` records, each with its `SearchSpec`)."""

    name: str
    kind: Kind
    fast_loop: bool
    loop_note: str
    params: tuple[ParamSpec, ...]

    def param(self, name: str) -> ParamSpec:
        """The parameter `name` (ParameterError naming the valid ones otherwise)."""
        for p in self.params:
            if p.name == name:
                return p
        valid = ", ".join(p.describe() for p in self.params) or "none (it has no parameters)"
        raise ParameterError(f"unknown parameter '{name}' for {self.kind} '{self.name}': valid {valid}")

    def defaults(self) -> dict[str, float]:
        return {p.name: p.default for p in self.params}

    def searched(self) -> tuple[ParamSpec, ...]:
        """The parameters a tuner searches by default."""
        return tuple(p for p in self.params if p.search is not None)

    @classmethod
    def of(cls, component: ComponentSpec, kind: Kind) -> PolicySpec:
        """The registry's `component` as a `kind`."""
        return cls(component.name, kind, component.fast_loop, component.loop_note, component.params)

    def help(self) -> str:
        """One line per parameter: name, default, valid range and meaning (for CLI help)."""
        lines = [f"{self.name}:" if self.params else f"{self.name}: no parameters"]
        lines += [f"  {p.name} = {p.default:g}  ({p.valid})  {p.doc}" for p in self.params]
        return "\n".join(lines)


def _specs(raw: Sequence[ComponentSpec], kind: Kind) -> list[PolicySpec]:
    return [PolicySpec.of(e, kind) for e in raw]


def policy_specs() -> list[PolicySpec]:
    """Every Cassandra scheduling policy, in registry order."""
    return _specs(_kvsim.policy_specs(), "policy")


def replica_specs() -> list[PolicySpec]:
    """Every replica selector, in registry order."""
    return _specs(_kvsim.replica_specs(), "replica selector")


def memcached_policy_specs() -> list[PolicySpec]:
    """The memcached policies (batching, chisel)."""
    return _specs(_kvsim.memcached_policy_specs(), "memcached policy")


def _one(specs: list[PolicySpec], name: str, what: str) -> PolicySpec:
    for s in specs:
        if s.name == name:
            return s
    raise ParameterError(f"parameter '{what}' = {name} is out of range: valid one of {[s.name for s in specs]}")


def policy_spec(name: str) -> PolicySpec:
    """The Cassandra policy `name` (ParameterError listing the policies otherwise)."""
    return _one(policy_specs(), name, "policy")


def replica_spec(name: str) -> PolicySpec:
    """The replica selector `name` (ParameterError listing the selectors otherwise)."""
    return _one(replica_specs(), name, "replica")


def policy_names() -> list[str]:
    """Policies of the core engine."""
    return list(_kvsim.policy_names())


def policy_defaults(name: str) -> dict[str, float]:
    """Default parameters of a policy (raises ParameterError for an unknown name)."""
    return dict(_kvsim.policy_defaults(name))


def coordinator_defaults(name: str) -> dict[str, float]:
    """The coordinator section a replay of policy `name` starts from: the Cassandra-wide parameters (speculative
    retry, driver, multiget shape) it accepts besides its own, with their defaults — off for the queue policies,
    Cassandra's for `stock`; empty for `duplicate` and `speculative`, which take none. `ReplayConfig.params` may
    name them next to the policy's own."""
    return dict(_kvsim.coordinator_defaults(name))


def coordinator_spec() -> PolicySpec:
    """The coordinator section's parameters (`spec_kind`, `read_timeout_ms`, `se_max`, `chunk`, ...) with their
    queue-policy defaults and valid ranges: what every queue policy but `duplicate` and `speculative` accepts
    besides its own (`coordinator_defaults` gives a policy's starting values)."""
    return PolicySpec.of(_kvsim.coordinator_spec(), "coordinator section")


def replica_names() -> list[str]:
    """Replica selectors of the core engine."""
    return list(_kvsim.replica_names())


def replica_defaults(name: str) -> dict[str, float]:
    """Default parameters of a replica selector (raises ParameterError for an unknown name)."""
    return dict(_kvsim.replica_defaults(name))


def cluster_defaults() -> ClusterConfig:
    """The simulated cluster's defaults, the core's (`ClusterConfig::default()`, Rein's cluster; the network in ns):
    the one statement of them, which `kvsim.Cluster` (in µs) and tailtune's deployments read."""
    return _kvsim.cluster_defaults()
