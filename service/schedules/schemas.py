"""Request/response bodies of /api/v1/schedules."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field, field_validator

from control.common import DbId, RequestBody, to_dt
from control.db import ScheduleRow
from control.deployment_spec import check_timezone
from control.jobspec import CaptureOptions

__all__ = ["CRON_MAX", "NIGHTLY", "ScheduleCreate", "ScheduleOut", "SchedulePatch", "check_cron"]

#: The default schedule: every night at 02:00 in the deployment's time zone.
NIGHTLY = "0 2 * * *"
CRON_MAX = 100


def check_cron(expr: str) -> str:
    from croniter import CroniterError, croniter

    if len(expr) > CRON_MAX:  # schedules.cron is VARCHAR(100): PostgreSQL enforces it
        raise ValueError(f"a cron expression has at most {CRON_MAX} characters")
    if len(expr.split()) != 5 or not croniter.is_valid(expr):
        raise ValueError(f"{expr!r} is not a 5-field cron expression (minute hour day month weekday)")
    try:  # valid fields that no date matches (day 31 of February): croniter finds no next time
        croniter(expr, 0.0).get_next(float)
    except CroniterError:
        raise ValueError(f"{expr!r} never fires: no date has that day in that month") from None
    return expr


class ScheduleCreate(RequestBody):
    deployment_id: DbId
    cron: str = NIGHTLY
    timezone: str | None = Field(default=None, description="IANA zone; default: the deployment's time zone.")
    traces: int = Field(default=1, ge=1, le=20, description="How many of the newest ready traces to use.")
    capture: CaptureOptions | None = Field(
        default=None,
        description="Each run captures the deployment's memcached servers for duration_s seconds and tunes on "
        "that, instead of the newest uploaded trace(s).",
    )
    enabled: bool = True

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        return check_cron(v)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str | None) -> str | None:
        return None if v is None else check_timezone(v)


class SchedulePatch(RequestBody):
    cron: str | None = None
    timezone: str | None = None
    traces: int | None = Field(default=None, ge=1, le=20)
    capture: CaptureOptions | None = Field(default=None, description="null: back to uploaded traces.")
    enabled: bool | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        return None if v is None else check_cron(v)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str | None) -> str | None:
        return None if v is None else check_timezone(v)


class ScheduleOut(BaseModel):
    id: int
    deployment_id: int
    cron: str
    timezone: str
    traces: int
    capture: CaptureOptions | None
    enabled: bool
    last_slot: datetime | None
    next_run: datetime | None
    created_at: datetime | None

    @classmethod
    def of(cls, r: ScheduleRow, next_run: float | None) -> ScheduleOut:
        return cls(
            id=r.id,
            deployment_id=r.deployment_id,
            cron=r.cron,
            timezone=r.timezone,
            traces=r.traces,
            capture=CaptureOptions.model_validate(r.capture) if r.capture is not None else None,
            enabled=r.enabled,
            last_slot=to_dt(r.last_slot),
            next_run=to_dt(next_run),
            created_at=to_dt(r.created_at),
        )
