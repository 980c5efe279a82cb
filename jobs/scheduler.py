"""Cron schedules: fire each slot once, in the schedule's time zone, across restarts and several schedulers.

Slot arithmetic uses croniter on time-zone-aware datetimes (so 02:00 Europe/Berlin stays 02:00 local across
DST). Firing a slot is one transaction: enqueue a `nightly` job whose `dedupe_key` is `schedule:<id>:<slot
epoch>` (unique in the DB) and move `last_slot` forward. A second scheduler, or the same one after a restart,
hits the unique key and fires nothing — so a slot runs at most once. After an outage only the newest missed
slot runs (catch up once), and only if it is younger than `scheduler_catchup_s`; older missed slots are
skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError

from base.settings import Settings
from control.common import now as clock
from control.db import Database, ScheduleRow
from control.queue import enqueue
from control.schedules import latest_slot, local_time

__all__ = ["Fired", "tick"]

log = logging.getLogger("tailtune.scheduler")


@dataclass(frozen=True)
class Fired:
    schedule_id: int
    slot: float
    job_id: int | None  # None: the slot was too old and skipped


def tick(db: Database, settings: Settings, at: float | None = None) -> list[Fired]:
    """Fire every schedule whose newest slot (≤ now) has not fired yet. Safe to run from several processes."""
    at = clock() if at is None else at
    fired: list[Fired] = []
    with db.session() as s:
        schedules = [
            (r.id, r.cron, r.timezone, r.last_slot, r.created_at, r.deployment_id, r.traces, r.capture)
            for r in s.scalars(select(ScheduleRow).where(ScheduleRow.enabled.is_(True)))
        ]
    for sid, cron, tz, last, created, dep_id, traces, capture in schedules:
        try:
            slot = latest_slot(cron, tz, at)
        except Exception:  # one broken row (a zone gone from tzdata, a cron croniter refuses) must not stop the rest
            log.exception("schedule %s: cannot compute its slot (cron %r, zone %r); skipped", sid, cron, tz)
            continue
        if slot <= created or (last is not None and slot <= last):
            continue
        too_old = at - slot > settings.scheduler_catchup_s
        try:
            with db.session() as s:
                moved = s.execute(
                    update(ScheduleRow)
                    .where(
                        ScheduleRow.id == sid,
                        or_(ScheduleRow.last_slot.is_(None), ScheduleRow.last_slot < slot),
                    )
                    .values(last_slot=slot)
                ).rowcount  # type: ignore[attr-defined]
                if not moved:
                    continue
                job_id = None
                if not too_old:
                    payload: dict[str, object] = {
                        "traces": traces,
                        "publish": True,
                        "schedule_id": sid,
                        "slot": local_time(slot, tz).isoformat(),
                    }
                    if capture is not None:
                        payload["capture"] = dict(capture)
                    job_id = enqueue(
                        s,
                        settings,
                        "nightly",
                        payload,
                        deployment_id=dep_id,
                        dedupe_key=f"schedule:{sid}:{int(slot)}",
                    ).id
        except IntegrityError:
            continue  # another scheduler fired this slot first
        if too_old:
            log.warning(
                "schedule %s: slot %s missed by more than %ss; skipped", sid, local_time(slot, tz), int(at - slot)
            )
        else:
            log.info("schedule %s: fired slot %s as job %s", sid, local_time(slot, tz), job_id)
        fired.append(Fired(sid, slot, job_id))
    return fired
