"""Discovery: read a deployment's live system with the credentials it already has, and store what was found as
the deployment's model (`control.model`).

What is read is the deployment's kind's (`DeploymentKind.discover`, in `kinds/<name>/discovery.py`): Cassandra's
nodes, tokens, replication, `concurrent_reads`, table options and read latencies over CQL; memcached's `stats`
and, with `profile_servers`, a profile of multigets on scratch keys. This module holds what every kind shares:
the checks every value read goes through, the timing of requests one at a time, and storing what was found.

Every read happens first; the model is written in one transaction at the end, so a failure (a node down, a
login refused, a missing permission, an unsupported version) leaves the deployment as it was, and is one line
naming the node and what to do (`DiscoveryFailed`).

What a live system reports is not trusted: every model input read goes through the ranges an operator's value
goes through (`control.model.INPUT_RANGES`: `checked`), every number is parsed as one (`integer`), and a value that
fails is a permanent `DiscoveryFailed` naming the node and the field (`refused`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import select

from base.settings import Settings
from control.db import Database, DeploymentRow
from control.egress import Egress, EgressRefused
from control.errors import Missing
from control.grants import PASSWORD, granted
from control.kind import Discovered, DiscoveryFailed, Target
from control.kinds import operations
from control.model import ModelTooLarge, check_input, check_model_size

__all__ = [
    "DIGITS_MAX",
    "Discovered",
    "DiscoveryFailed",
    "checked",
    "discover",
    "discover_deployment",
    "integer",
    "merge_model",
    "refused",
    "shown",
    "timed_rounds",
]

#: The most digits of an integer read from a live system (2^127 has 39).
DIGITS_MAX = 40


# --- what a live system reports, checked ----------------------------------------------------------------------
def shown(value: Any) -> str:
    """`value` as a message shows it: its repr, at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def refused(node: str, field_: str, problem: str) -> DiscoveryFailed:
    """A value a live system reported that the model cannot take: permanent (reading again reads it again)."""
    return DiscoveryFailed(
        f"{node}: field '{field_}': {problem}: the live system reports a value the model does not accept "
        "(check the node; an operator's value in the deployment's topology takes precedence)",
        permanent=True,
    )


def checked(name: str, value: Any, node: str, field_: str | None = None) -> Any:
    """`value` as model input `name`, within the operator's range (`INPUT_RANGES`); else `refused`."""
    problem = check_input(name, value)
    if problem is not None:
        raise refused(node, field_ or name, problem)
    return value


def integer(text: Any, node: str, field_: str) -> int:
    """An integer as a live system writes one (ASCII digits, a sign, at most 40 digits); else `refused`."""
    if isinstance(text, int) and not isinstance(text, bool):
        if len(str(abs(text))) > DIGITS_MAX:
            raise refused(node, field_, f"expected an integer of at most {DIGITS_MAX} digits, got {shown(text)}")
        return text
    t = str(text).strip()
    digits = t[1:] if t[:1] in ("-", "+") else t
    if not (digits.isascii() and digits.isdigit()) or len(digits) > DIGITS_MAX:
        raise refused(node, field_, f"expected an integer of at most {DIGITS_MAX} digits, got {shown(text)}")
    return int(t)


def timed_rounds(requests: Sequence[Callable[[], object]], rounds: int, *, warmup: int = 5,
                 clock: Callable[[], float] = time.perf_counter) -> list[list[float]]:
    """Client-side times (ms) of each of `requests` over `rounds` rounds, one request at a time, the kinds
    alternating (a round runs every request once, in order), after `warmup` uncounted rounds. Alternating makes
    every kind meet the same machine: a change of the client's or the server's noise during the measurement
    reaches all kinds alike, so a difference of their moments does not pick it up."""
    out: list[list[float]] = [[] for _ in requests]
    for i in range(rounds + warmup):
        for times, request in zip(out, requests, strict=True):
            t0 = clock()
            request()
            elapsed = clock() - t0
            if i >= warmup:
                times.append(elapsed * 1000.0)
    return out


# --- the deployment -----------------------------------------------------------------------------------------
def discover(
    kind: str,
    connection: Mapping[str, Any],
    tables: Sequence[str],
    settings: Settings,
    *,
    server: str = "stock",
    profile_servers: bool = False,
    password_grant: Any = None,
    name: str = "",
    log: Callable[[str], None] = lambda _: None,
) -> Discovered:
    """What the live system of a deployment of `kind` reports (its kind's `discover`); `password_grant` is the
    admin's binding of its password (`control.grants.granted`), without which no password is sent. Raises
    DiscoveryFailed."""
    try:
        egress = Egress.of(settings).bound(password_grant)
    except EgressRefused as exc:
        raise DiscoveryFailed(str(exc), permanent=True) from None
    target = Target(name, connection, egress, tuple(tables), server)
    return operations(kind).discover(target, settings, profile_servers=profile_servers, log=log)


def merge_model(model: Mapping[str, Any] | None, found: Discovered) -> dict[str, Any]:
    """The deployment's model with what `found` read: `declared` kept as is; each discovered input replaces the
    discovered one of its name (a calibrated one is kept: calibration wins); an input discovery looked for and
    did not find drops its stale discovered value; readings replaced key by key."""
    old = dict(model or {})
    inputs = {k: dict(v) for k, v in (old.get("inputs") or {}).items() if isinstance(v, Mapping)}
    for name in found.missing:
        if inputs.get(name, {}).get("source") == "discovered":
            del inputs[name]
    for name, entry in found.inputs.items():
        if inputs.get(name, {}).get("source") == "calibrated":
            continue
        inputs[name] = dict(entry)
    out = {k: v for k, v in old.items() if k not in ("inputs", "readings", "discovery")}
    out["inputs"] = inputs
    out["readings"] = {**(old.get("readings") or {}), **found.readings}
    out["discovery"] = {"at": found.at, "notes": list(found.notes),
                        "current_config": (old.get("discovery") or {}).get("current_config")}
    return out


def discover_deployment(
    db: Database,
    settings: Settings,
    deployment_id: int,
    *,
    profile_servers: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Discover deployment `deployment_id` and store its model in one transaction; returns what was found
    (inputs, notes, the current_config discovery set or None). Raises DiscoveryFailed (nothing written)."""
    from control.configs import validate_config

    with db.session() as s:
        row = s.get(DeploymentRow, deployment_id)
        if row is None:
            raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
        name, kind, connection = row.name, row.kind, dict(row.connection)
        tables, server, driver = list(row.tables or []), row.server or "stock", row.driver or "java4"
        grant = granted(s, deployment_id, PASSWORD)
    found = discover(kind, connection, tables, settings, server=server, profile_servers=profile_servers,
                     password_grant=grant, name=name, log=log)
    config = found.current_config
    if config is not None:
        try:
            validate_config(config, kind, settings.config_max_bytes, driver=driver)
        except Exception as exc:
            found.notes.append(f"current_config not set: {exc}")
            config = None
    set_config = False
    with db.session() as s:
        row = s.scalar(select(DeploymentRow).where(DeploymentRow.id == deployment_id).with_for_update())
        if row is None:
            raise Missing(f"deployment {deployment_id} was deleted during its discovery", field="deployment_id")
        previous = (dict(row.model or {}).get("discovery") or {}).get("current_config")
        model = merge_model(row.model, found)
        try:
            check_model_size(model, settings.model_max_bytes)
        except ModelTooLarge as exc:
            raise DiscoveryFailed(f"{kind}: {exc}", permanent=True) from None
        if config is not None:
            if row.current_config is None or row.current_config == previous:
                row.current_config = config
                model["discovery"]["current_config"] = config
                set_config = True
            else:
                found.notes.append("current_config kept: it was set by the operator or a publish, not by discovery")
                model["discovery"]["notes"] = list(found.notes)
        row.model = model
        s.flush()
    for note in found.notes:
        log(f"note: {note}")
    return {
        "deployment": name,
        "kind": kind,
        "at": found.at,
        "inputs": found.inputs,
        "current_config": config if set_config else None,
        "notes": found.notes,
    }
