"""The deployment kinds: the one list of them (`KINDS`), and each kind's model half.

A deployment kind (Cassandra, memcached, …) has two halves at two layers of the import contract:

- its **model** (this layer): the deployment options the simulator replays (`deployment`), its policy vocabulary
  (`policies`), how a config of it is checked (`checks`), which tuner evaluator replays it (`evaluator`), the
  tuner's space, rendering and reference configs (`tuner`), how `tailtune simulate` replays it (`simulate`), and
  a few plain facts (`servers`, `replays_timestamps`, `calibrated_service_rate`) — what `tuner`, `analysis` and
  `tailtune simulate` need, importing nothing above the simulation layer;
- its **operations** (`kinds/<name>/`, above the control plane): connection and egress checks, discovery,
  calibration, capture, the model it builds from what it found, publish / read back / fence, verify signals,
  the live replay's driver. `operations` names that package's class as `module:Class`; the control plane's
  `control.kinds.operations(name)` imports it (the list stays here, the code of each kind in its own package).

Every field naming code is a `module:attr` reference, imported on first use (`resolve_ref`): the code it names may
live in a layer above this one (the tuner, the CLI, the kinds' packages), which this layer never imports itself.
Each layer reads the references it owns through one typed accessor: `deployment_class` and `policy_names` here,
`simulation.config_check` the checks, `tuner.kinds.tuner_kind` the tuner's part,
`tailtune.cli.commands.simulate` the command's run, `control.kinds.operations` the operations.

Callers dispatch through this registry (`model_kind(name)`, `find_kind(name)`, `kind_names()`,
`kind_of_policy(policy)`): nothing outside the kinds' own modules compares a deployment's kind with a kind's name
(`tests/test_kind_dispatch.py` reads every product module's syntax tree for such comparisons). A kind is added by
one `ModelKind` row and the modules its references name (docs/architecture.md § Adding a deployment kind); tests
register a third one with `register` and run every contract test over it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from base.errors import BadInputError

__all__ = [
    "KINDS",
    "ModelKind",
    "find_kind",
    "kind_names",
    "kind_of_policy",
    "model_kind",
    "register",
    "resolve_ref",
    "unregister",
]


@dataclass(frozen=True, kw_only=True)
class ModelKind:
    """A deployment kind's model half (module doc). Every `str` field but `name` and `evaluator` is a
    `module:attr` reference (`resolve_ref`)."""

    name: str
    #: Its deployment options: a frozen dataclass with `from_dict` / `as_dict` (`deployment_class`).
    deployment: str
    #: Its operations: a `control.kind.DeploymentKind` subclass (`control.kinds.operations`).
    operations: str
    #: Every policy name a deployment of it runs (`--policy`, a config's `policy`), in listing order: a tuple of
    #: names, or a callable returning one (`policy_names`).
    policies: str
    #: How a config of it is checked: a `simulation.config_check.KindChecks` (its parameters, its target).
    checks: str
    #: The tuner's evaluator replaying it: a name registered in `tuner.evaluators.EVALUATORS`, or a
    #: `module:callable` factory (`build_evaluator`).
    evaluator: str
    #: The tuner's part: a `tuner.kinds.TunerKind` (search space, rendering, paper default, default baseline).
    tuner: str
    #: `tailtune simulate`'s replay of it: a `tailtune.cli.commands.simulate.SimulateKind`.
    simulate: str
    #: The server builds a deployment of it may run, the default first (a tune tunes one and searches the other
    #: as its alternative); empty: a single build, which has no `server` setting.
    servers: tuple[str, ...] = ()
    #: Its replay can take a trace's own timestamps as arrivals (`use_timestamps`).
    replays_timestamps: bool = False
    #: Its evaluator's `service_rate` option (ops/s per slot) is what a calibration of the service time
    #: measures: a tune reports the chosen config at both ends of the calibration's interval.
    calibrated_service_rate: bool = False

    def deployment_class(self) -> type[Any]:
        """The class `deployment` names."""
        cls = resolve_ref(self.deployment)
        if not isinstance(cls, type):
            raise TypeError(f"deployment kind {self.name!r}: {self.deployment} is not a class")
        return cls

    def policy_names(self) -> tuple[str, ...]:
        """The names `policies` gives (module doc of `policies`)."""
        found = resolve_ref(self.policies)
        names = found() if callable(found) else found
        if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"deployment kind {self.name!r}: {self.policies} gives no tuple of names")
        return names


#: Every deployment kind, in the order they are listed to users (the first is the default of `--store`, and the
#: kind `tailtune simulate` replays a policy no kind lists with, so that kind's own check names the problem).
KINDS: dict[str, ModelKind] = {
    "cassandra": ModelKind(
        name="cassandra",
        deployment="simulation.cassandra:CassandraDeployment",
        operations="kinds.cassandra:Cassandra",
        policies="simulation.registry:cassandra_policies",
        checks="simulation.config_check:CASSANDRA_CHECKS",
        evaluator="kvsim-cassandra",
        tuner="tuner.kinds:CASSANDRA",
        simulate="tailtune.cli.commands.simulate:CASSANDRA",
        servers=("stock", "rein-patched"),
        replays_timestamps=True,
        calibrated_service_rate=True,
    ),
    "memcached": ModelKind(
        name="memcached",
        deployment="simulation.memcached:MemcachedDeployment",
        operations="kinds.memcached:Memcached",
        policies="simulation.memcached:MEMCACHED_POLICIES",
        checks="simulation.config_check:MEMCACHED_CHECKS",
        evaluator="kvsim-memcached",
        tuner="tuner.kinds:MEMCACHED",
        simulate="tailtune.cli.commands.simulate:MEMCACHED",
    ),
}


def resolve_ref(ref: str) -> Any:
    """The attribute a `module:attr` reference names, its module imported on first use (a ValueError for a
    reference without `:`; ImportError / AttributeError as importing and reading it raise them)."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"not a module:attr reference: {ref!r}")
    return getattr(importlib.import_module(module), attr)


def kind_names() -> tuple[str, ...]:
    """The registered kinds' names, in `KINDS` order."""
    return tuple(KINDS)


def find_kind(name: object) -> ModelKind | None:
    """The registered kind `name`, or None (a caller naming the problem its own way)."""
    return KINDS.get(name) if isinstance(name, str) else None


def model_kind(name: object, *, field: str = "kind") -> ModelKind:
    """The registered kind `name`; a BadInputError naming `field` and the kinds there are otherwise."""
    found = find_kind(name)
    if found is None:
        shown = repr(name) if isinstance(name, str) and len(name) <= 64 else "this value"
        raise BadInputError.single(field, f"unknown deployment kind {shown} (one of {', '.join(KINDS)})", field=field)
    return found


def kind_of_policy(policy: str) -> ModelKind | None:
    """The first kind (in `KINDS` order) whose policies include `policy`, or None."""
    return next((k for k in KINDS.values() if policy in k.policy_names()), None)


def register(kind: ModelKind) -> None:
    """Add a kind (tests register a third one this way); a name already taken is a ValueError."""
    if kind.name in KINDS:
        raise ValueError(f"deployment kind {kind.name!r} is already registered")
    KINDS[kind.name] = kind


def unregister(name: str) -> None:
    """Remove a kind `register` added."""
    KINDS.pop(name, None)
