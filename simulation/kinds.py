"""The deployment kinds: the one list of them (`KINDS`), and each kind's model half.

A deployment kind (Cassandra, memcached, …) has two halves at two layers of the import contract:

- its **model** (this layer): the deployment options the simulator replays (`deployment`), its policy vocabulary,
  how a config of it is checked, which tuner evaluator replays it — what `tuner`, `analysis` and `tailtune
  simulate` need, importing nothing above the simulation layer;
- its **operations** (`kinds/<name>/`, above the control plane): connection and egress checks, discovery,
  calibration, capture, the model it builds from what it found, publish / read back / fence, verify signals,
  the live replay's driver. `operations` names that package's class as `module:Class`; the control plane's
  `control.kinds.operations(name)` imports it (the list stays here, the code of each kind in its own package).

Callers dispatch through this registry (`model_kind(name)`, `kind_names()`): nothing outside the kinds' own
modules compares a deployment's kind with a kind's name (`tests/test_kind_dispatch.py` reads every product
module's syntax tree for such comparisons). A kind is added by one `ModelKind` row (docs/architecture.md §
Adding a deployment kind); tests register a third one with `register` and run every contract test over it.
"""

from __future__ import annotations

from dataclasses import dataclass

from base.errors import BadInputError

__all__ = ["KINDS", "ModelKind", "kind_names", "model_kind", "register", "unregister"]


@dataclass(frozen=True)
class ModelKind:
    """A deployment kind's model half (module doc). `deployment` is `module:Class` of its deployment options
    (a frozen dataclass with `from_dict` / `as_dict`); `operations` is `module:Class` of its operations
    (a `control.kind.DeploymentKind`)."""

    name: str
    deployment: str
    operations: str


#: Every deployment kind, in the order they are listed to users (the first is the default of `--store`).
KINDS: dict[str, ModelKind] = {
    "cassandra": ModelKind(
        "cassandra", deployment="simulation.cassandra:CassandraDeployment", operations="kinds.cassandra:Cassandra"
    ),
    "memcached": ModelKind(
        "memcached", deployment="simulation.memcached:MemcachedDeployment", operations="kinds.memcached:Memcached"
    ),
}


def kind_names() -> tuple[str, ...]:
    """The registered kinds' names, in `KINDS` order."""
    return tuple(KINDS)


def model_kind(name: object, *, field: str = "kind") -> ModelKind:
    """The registered kind `name`; a BadInputError naming `field` and the kinds there are otherwise."""
    found = KINDS.get(name) if isinstance(name, str) else None
    if found is None:
        shown = repr(name) if isinstance(name, str) and len(name) <= 64 else "this value"
        raise BadInputError.single(field, f"unknown deployment kind {shown} (one of {', '.join(KINDS)})", field=field)
    return found


def register(kind: ModelKind) -> None:
    """Add a kind (tests register a third one this way); a name already taken is a ValueError."""
    if kind.name in KINDS:
        raise ValueError(f"deployment kind {kind.name!r} is already registered")
    KINDS[kind.name] = kind


def unregister(name: str) -> None:
    """Remove a kind `register` added."""
    KINDS.pop(name, None)
