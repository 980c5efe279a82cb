"""Schedules: create, list, show, update, delete (firing them is `jobs/scheduler.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from base.settings import Settings
from control.common import now
from control.db import DeploymentRow, ScheduleRow
from control.jobspec import check_capture, check_capture_kind
from control.schedules import next_slot
from service.errors import Missing
from service.schedules.schemas import ScheduleCreate, ScheduleOut, SchedulePatch

__all__ = ["create", "delete", "get", "list_all", "out", "patch"]


def out(row: ScheduleRow) -> ScheduleOut:
    after = max(row.last_slot or 0.0, now())
    return ScheduleOut.of(row, next_slot(row.cron, row.timezone, after) if row.enabled else None)


def create(s: Session, settings: Settings, body: ScheduleCreate) -> ScheduleRow:
    dep = s.get(DeploymentRow, body.deployment_id)
    if dep is None:
        raise Missing(f"deployment {body.deployment_id} not found", field="deployment_id")
    check_capture(body.capture, settings)
    check_capture_kind(body.capture, dep.kind)
    row = ScheduleRow(
        deployment_id=dep.id,
        cron=body.cron,
        timezone=body.timezone or dep.timezone,
        traces=body.traces,
        capture=body.capture.model_dump() if body.capture is not None else None,
        enabled=body.enabled,
        last_slot=None,
        created_at=now(),
    )
    s.add(row)
    s.flush()
    return row


def get(s: Session, schedule_id: int) -> ScheduleRow:
    row = s.get(ScheduleRow, schedule_id)
    if row is None:
        raise Missing(f"schedule {schedule_id} not found", field="schedule_id")
    return row


def list_all(
    s: Session, deployment_id: int | None = None, *, limit: int = 100, offset: int = 0
) -> Sequence[ScheduleRow]:
    q = select(ScheduleRow).order_by(ScheduleRow.id).limit(limit).offset(offset)
    if deployment_id is not None:
        q = q.where(ScheduleRow.deployment_id == deployment_id)
    return s.scalars(q).all()


def patch(s: Session, settings: Settings, schedule_id: int, body: SchedulePatch) -> ScheduleRow:
    """Fields left out (or null) stay as they are, except `capture`, which null turns off."""
    row = get(s, schedule_id)
    changes = body.model_dump(exclude_unset=True)
    if "capture" in body.model_fields_set and body.capture is not None:
        check_capture(body.capture, settings)
        dep = s.get(DeploymentRow, row.deployment_id)
        check_capture_kind(body.capture, dep.kind if dep is not None else "unknown")
    for key, value in changes.items():
        if value is not None or key == "capture":
            setattr(row, key, value)
    s.flush()
    return row


def delete(s: Session, schedule_id: int) -> None:
    s.delete(get(s, schedule_id))
    s.flush()
