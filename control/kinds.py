"""The deployment kinds' operations, by name: `operations(kind)` is what every caller on the control plane's side
(the API, the worker's jobs, the CLI) asks instead of comparing a kind with a kind's name.

The list of kinds is `simulation.kinds.KINDS` (the model half); each row names its operations as `module:Class`
(`kinds.cassandra:Cassandra`), imported here with importlib — the control plane imports no kind's package
statically, since `kinds` sits above it in the layers — checked to be a `control.kind.DeploymentKind` of that name
and made once. A kind registered later (the tests' third kind) is found the same way.
"""

from __future__ import annotations

import threading

from control.kind import CAPABILITIES, DeploymentKind, Endpoint, kind_class
from simulation.kinds import kind_names, model_kind

__all__ = ["all_endpoints", "operations", "supports"]

_made: dict[tuple[str, str], DeploymentKind] = {}
_lock = threading.Lock()


def operations(name: object, *, field: str = "kind") -> DeploymentKind:
    """The operations of registered kind `name` (one instance per kind and operations class, shared). Raises
    BadInputError naming `field` and the kinds there are for an unregistered name; TypeError when the kind's
    `operations` names no `DeploymentKind` of that name (a mistake in its registration)."""
    kind = model_kind(name, field=field)
    key = (kind.name, kind.operations)
    with _lock:
        made = _made.get(key)
        if made is None:
            made = _made[key] = kind_class(kind.name)()
    return made


def supports(name: str, capability: str) -> bool:
    """Whether kind `name` has optional capability `capability` (`control.kind.CAPABILITIES`); an unregistered
    name has none."""
    flag, _ = CAPABILITIES[capability]
    return name in kind_names() and bool(getattr(operations(name), flag))


def all_endpoints(connection: dict[str, object]) -> list[Endpoint]:
    """Every address a connection names, as each registered kind reads it (`DeploymentKind.endpoints`), kinds in
    their registered order: the body's connection has one shape for every kind, so an address in it is checked
    whichever kind's field holds it."""
    return [ep for name in kind_names() for ep in operations(name).endpoints(connection)]
