"""Admin-only deployment attributes: what only an `admin` token may set, and the record the worker checks.

A write token registers and changes deployments, and the worker then acts on them. Some attributes would let a
write token use what is not its own — the password in a variable of the worker's environment, sent to the hosts
the deployment names — so they are admin-only. `ADMIN_ATTRIBUTES` is the one place that says which:

* each attribute reads its value out of a deployment's document (`kind`, `connection`, `replay_allowed`, ...;
  None: the deployment does not use it);
* the API (`check_and_record`) lets a write token keep a value as an admin set it, or drop it, but a new or
  changed value needs an admin token (403 naming the attribute's field) — and records it in
  `deployment_grants` when an admin sets it;
* the worker reads the record (`granted`) and acts on the attribute only when the deployment's row still says
  what the record says (a row written straight into the database, or changed since, is refused before any
  connection is made).

The attributes: the password variable a Cassandra connection names, bound to its login and contact points
(`PASSWORD`), and `replay_allowed` (`REPLAY_ALLOWED`): the live replay (`control.replay`) drives real load at the
deployment's live system, writing scratch tables or keys there, so only an admin may allow it.

An admin token is minted only by `tailtune serve --create-token admin` on the service host: no API route mints
tokens, and `TAILTUNE_API_TOKENS` holds no admin scope.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.common import now
from control.db import DeploymentGrantRow
from control.errors import Forbidden

__all__ = [
    "ADMIN_ATTRIBUTES",
    "PASSWORD",
    "REPLAY_ALLOWED",
    "AdminAttribute",
    "check_and_record",
    "granted",
    "password_binding",
    "password_grant_problem",
    "replay_grant_problem",
]

#: How an error tells the reader to get an admin token.
_HOW = "an admin token (`tailtune serve --create-token admin` on the service host)"


@dataclass(frozen=True)
class AdminAttribute:
    """One admin-only attribute of a deployment."""

    #: The key of its record in `deployment_grants`.
    name: str
    #: The field an error names.
    field: str
    #: The attribute's value in a deployment's document (None: not used by this deployment).
    value_of: Callable[[Mapping[str, Any]], Any]
    #: What a message may say of a value (never a secret).
    describe: Callable[[Any], str]


def password_binding(connection: Mapping[str, Any]) -> dict[str, Any] | None:
    """The password variable a Cassandra connection names, with the login and the hosts it would be sent to;
    None when the connection names no password."""
    env = connection.get("password_env")
    if not env:
        return None
    return {
        "password_env": str(env),
        "username": None if connection.get("username") is None else str(connection.get("username")),
        "contact_points": [str(h) for h in connection.get("contact_points") or []],
        "port": int(connection.get("port", 9042)),
        # the live replay's JMX login (docs/replay.md § Alternating): bound only where a deployment names the port
        **({"jmx_port": int(connection["jmx_port"])} if connection.get("jmx_port") else {}),
    }


def _describe_password(value: Any) -> str:
    hosts = ", ".join(f"{h}:{value['port']}" for h in value["contact_points"]) or "no contact point"
    return f"the password in {value['password_env']} (sent as {value['username']!r} to {hosts})"


PASSWORD = AdminAttribute(
    name="password",
    field="connection.password_env",
    value_of=lambda doc: password_binding(doc.get("connection") or {}),
    describe=_describe_password,
)

REPLAY_ALLOWED = AdminAttribute(
    name="replay_allowed",
    field="replay_allowed",
    value_of=lambda doc: True if doc.get("replay_allowed") is True else None,
    describe=lambda _value: "replay_allowed (the live replay driving load at the deployment's live system)",
)

#: Every admin-only attribute of a deployment.
ADMIN_ATTRIBUTES: tuple[AdminAttribute, ...] = (PASSWORD, REPLAY_ALLOWED)


def _record(s: Session, deployment_id: int, name: str) -> DeploymentGrantRow | None:
    return s.scalar(
        select(DeploymentGrantRow).where(
            DeploymentGrantRow.deployment_id == deployment_id, DeploymentGrantRow.attribute == name
        )
    )


def granted(s: Session, deployment_id: int, attribute: AdminAttribute) -> Any | None:
    """The value an admin set for this attribute of the deployment (None: none)."""
    row = _record(s, deployment_id, attribute.name)
    return None if row is None else row.value


def check_and_record(
    s: Session, deployment_id: int | None, doc: Mapping[str, Any], *, admin: bool, by: str, record: bool = True
) -> None:
    """Refuse (Forbidden, naming the attribute's field) a new or changed admin-only value unless `admin`; with
    `record`, store what an admin set and drop the record of a value the deployment no longer uses.
    `deployment_id` None: a deployment being created (nothing recorded yet)."""
    for attr in ADMIN_ATTRIBUTES:
        value = attr.value_of(doc)
        row = None if deployment_id is None else _record(s, deployment_id, attr.name)
        if value is None or (row is not None and row.value == value):
            continue
        if not admin:
            verb = "changing" if row is not None else "setting"
            raise Forbidden(
                f"{verb} {attr.describe(value)} needs {_HOW}: a write token may keep an admin-only attribute as an "
                "admin set it, or remove it, but not set or change it",
                field=attr.field,
            )
    if not record or deployment_id is None:
        return
    for attr in ADMIN_ATTRIBUTES:
        value = attr.value_of(doc)
        row = _record(s, deployment_id, attr.name)
        if value is None:
            if row is not None:
                s.delete(row)
        elif row is None:
            s.add(DeploymentGrantRow(deployment_id=deployment_id, attribute=attr.name, value=value,
                                     granted_by=by, granted_at=now()))
        elif row.value != value:
            row.value, row.granted_by, row.granted_at = value, by, now()
    s.flush()


def password_grant_problem(connection: Mapping[str, Any], grant: Any | None) -> str | None:
    """Worker side: why the password the connection names may not be sent where it says (None: it may — the
    connection names no password, or exactly what an admin bound it to). Names the variable, never its value."""
    value = password_binding(connection)
    if value is None or value == grant:
        return None
    if grant is None:
        return (f"{value['password_env']} is not bound to this deployment: an admin binds a password variable to "
                f"the deployment that may send it ({_HOW} registers or updates the deployment)")
    return (f"{value['password_env']} is bound to other contact points, port, JMX port or username than the "
            f"deployment now names: {_HOW} must set them")


def replay_grant_problem(allowed: bool, grant: Any | None) -> str | None:
    """Why the live replay may not drive a deployment whose row says `allowed` and whose admin record is `grant`
    (None: it may — the row allows it and an admin set it so)."""
    if not allowed:
        return (f"the deployment does not allow the live replay: {_HOW} sets `replay_allowed: true` on it (a write "
                "token cannot)")
    if grant is not True:
        return (f"the deployment's replay_allowed was not set by an admin (no record of it in deployment_grants): "
                f"{_HOW} must set it")
    return None
