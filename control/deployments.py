"""Deployments: register, list, show, update, delete — with the same checks for the API and the CLI."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from base.settings import Settings
from control.common import now
from control.configs import validate_config
from control.db import DeploymentRow
from control.deployment_spec import DeploymentCreate, DeploymentPatch
from control.egress import Egress, EgressRefused
from control.errors import Conflict, Invalid, Missing
from control.grants import check_and_record
from control.kinds import all_endpoints, operations
from control.model import declared_fields
from control.tokens import Principal

__all__ = ["create", "delete", "get", "get_by_name", "list_all", "patch"]


def _check_egress(settings: Settings, connection: dict[str, object]) -> None:
    """The password variable and the endpoints a write token names (every kind's reading of the connection:
    `control.kinds.all_endpoints`), against the operator's egress rules (control.egress): a variable the worker
    may not read, or an address outside the networks it may reach, is refused here with what to do instead."""
    try:
        egress = Egress.of(settings)
    except EgressRefused as exc:
        raise Invalid(str(exc), field="connection") from None
    name = connection.get("password_env")
    if name is not None:
        problem = egress.password_env_problem(str(name))
        if problem is not None:
            raise Invalid(problem, field="connection.password_env")
    for endpoint in all_endpoints(connection):
        problem = egress.host_problem(endpoint.named)
        if problem is not None:
            raise Invalid(problem, field=endpoint.field)


def _document(row: DeploymentRow) -> dict[str, object]:
    """The deployment as `control.grants` reads its admin-only attributes."""
    return {"kind": row.kind, "connection": dict(row.connection or {}), "replay_allowed": bool(row.replay_allowed)}


def _check_confirm_on(s: Session, name: str, kind: str, confirm_on: str | None) -> None:
    """`confirm_on` names the deployment itself or an existing deployment of the same kind (Invalid naming the
    field otherwise). Whether that deployment allows the live replay is checked when a nightly runs it, against
    the admin's record (`jobs/confirm.py`), as every replay is."""
    if confirm_on is None or confirm_on == name:
        return
    target = s.scalar(select(DeploymentRow).where(DeploymentRow.name == confirm_on))
    if target is None:
        raise Invalid(f"no deployment is named {confirm_on!r} (register the staging deployment first, or name "
                      "this deployment itself)", field="confirm_on")
    if target.kind != kind:
        raise Invalid(f"deployment {confirm_on!r} is a {target.kind} deployment, this one {kind}: a recommendation "
                      "is confirmed on a deployment of its own kind", field="confirm_on")


def create(s: Session, settings: Settings, body: DeploymentCreate, who: Principal) -> DeploymentRow:
    if body.current_config is not None:
        validate_config(
            body.current_config,
            body.kind,
            settings.config_max_bytes,
            driver=body.driver,
            max_depth=settings.config_max_depth,
        )
    _check_egress(settings, body.connection.model_dump())
    if s.scalar(select(DeploymentRow.id).where(DeploymentRow.name == body.name)) is not None:
        raise Conflict(f"deployment {body.name!r} already exists", field="name")
    doc = {"kind": body.kind, "connection": body.connection.model_dump(), "replay_allowed": body.replay_allowed}
    check_and_record(s, None, doc, admin=who.admin, by=who.name)
    _check_confirm_on(s, body.name, body.kind, body.confirm_on)
    row = DeploymentRow(
        name=body.name,
        kind=body.kind,
        timezone=body.timezone,
        topology=body.topology.model_dump(exclude_unset=True),  # what the operator said, nothing more
        connection=body.connection.model_dump(),
        objective=body.objective.model_dump(),
        constraints=body.constraints.model_dump(),
        current_config=body.current_config,
        publish_status="none",
        publish_error=None,
        created_at=now(),
        server=body.server,
        driver=body.driver,
        tables=list(body.tables),
        replay_allowed=body.replay_allowed,
        confirm_on=body.confirm_on,
        model={"declared": declared_fields(body.topology.model_dump(), body.topology.model_fields_set),
               "given": sorted({"server", "driver"} & body.model_fields_set)},
    )
    s.add(row)
    s.flush()
    check_and_record(s, row.id, doc, admin=who.admin, by=who.name)
    return row


def get(s: Session, deployment_id: int) -> DeploymentRow:
    row = s.get(DeploymentRow, deployment_id)
    if row is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    return row


def get_by_name(s: Session, name: str) -> DeploymentRow:
    row = s.scalar(select(DeploymentRow).where(DeploymentRow.name == name))
    if row is None:
        raise Missing(f"deployment {name!r} not found", field="deployment")
    return row


def list_all(s: Session, *, limit: int = 100, offset: int = 0) -> Sequence[DeploymentRow]:
    return s.scalars(select(DeploymentRow).order_by(DeploymentRow.id).limit(limit).offset(offset)).all()


def patch(s: Session, settings: Settings, deployment_id: int, body: DeploymentPatch, who: Principal) -> DeploymentRow:
    row = get(s, deployment_id)
    fields = body.model_dump(exclude_unset=True)
    if fields.get("current_config") is not None:
        driver = fields.get("driver") or row.driver
        validate_config(
            fields["current_config"], row.kind, settings.config_max_bytes, driver=driver,
            max_depth=settings.config_max_depth,
        )
    ops = operations(row.kind)
    if fields.get("connection") is not None:
        ops.check_connection(fields["connection"])
        _check_egress(settings, fields["connection"])
        doc = {**_document(row), "connection": fields["connection"]}
        check_and_record(s, row.id, doc, admin=who.admin, by=who.name, record=False)
    if fields.get("replay_allowed") is not None:
        doc = {**_document(row), "replay_allowed": fields["replay_allowed"]}
        check_and_record(s, row.id, doc, admin=who.admin, by=who.name, record=False)
    for key in ("timezone", "topology", "connection", "objective", "constraints", "server", "driver", "tables",
                "replay_allowed"):
        if key in fields and fields[key] is None:
            raise Invalid("must not be null (only current_config can be cleared)", field=key)
    ops.check_body(fields, creating=False)
    if fields.get("confirm_on") is not None:
        _check_confirm_on(s, row.name, row.kind, fields["confirm_on"])
    if body.topology is not None:
        model = {k: v for k, v in (row.model or {}).items() if k != "operator"}  # the key's former name
        row.model = {**model, "declared": declared_fields(fields["topology"], body.topology.model_fields_set)}
    for key, value in fields.items():
        setattr(row, key, value)
    s.flush()
    check_and_record(s, row.id, _document(row), admin=who.admin, by=who.name)
    return row


def delete(s: Session, deployment_id: int) -> None:
    s.delete(get(s, deployment_id))
    s.flush()
