"""Cron schedules: slots in the schedule's time zone, once per slot across restarts and schedulers, catch up
once.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import select, update

from control.db import Database, JobRow, ScheduleRow
from control.schedules import latest_slot, next_slot
from jobs.scheduler import tick
from tests.app_fixtures import Svc, memcached_deployment

pytestmark = pytest.mark.db_backends  # each test runs on SQLite and on PostgreSQL

API = "/api/v1"


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_slots_follow_the_time_zone() -> None:
    # Berlin is UTC+2 in July and UTC+1 in January: 02:00 local is 00:00Z / 01:00Z.
    assert next_slot("0 2 * * *", "Europe/Berlin", ts("2026-07-01T01:00:00")) == ts("2026-07-02T00:00:00")
    assert next_slot("0 2 * * *", "Europe/Berlin", ts("2026-01-15T12:00:00")) == ts("2026-01-16T01:00:00")
    assert latest_slot("0 2 * * *", "Europe/Berlin", ts("2026-07-01T00:00:00")) == ts("2026-07-01T00:00:00")
    assert latest_slot("0 2 * * *", "Europe/Berlin", ts("2026-06-30T23:59:59")) == ts("2026-06-30T00:00:00")
    assert latest_slot("30 6 * * 1", "America/New_York", ts("2026-07-08T12:00:00")) == ts("2026-07-06T10:30:00")


def _schedule(svc: Svc, cron: str, created: str, tz: str | None = None) -> int:
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("sched", ["h:1"]), headers=svc.write).json()
    body: dict[str, object] = {"deployment_id": dep["id"], "cron": cron}
    if tz:
        body["timezone"] = tz
    sid = int(svc.client.post(f"{API}/schedules", json=body, headers=svc.write).json()["id"])
    with svc.db.session() as s:
        s.execute(update(ScheduleRow).where(ScheduleRow.id == sid).values(created_at=ts(created)))
    return sid


def _jobs(svc: Svc) -> list[tuple[str | None, dict[str, object]]]:
    with svc.db.session() as s:
        return [(j.dedupe_key, j.payload) for j in s.scalars(select(JobRow).order_by(JobRow.id))]


def test_fires_once_per_slot_across_restarts(svc: Svc) -> None:
    sid = _schedule(svc, "0 2 * * *", "2026-06-30T00:00:00", tz="Europe/Berlin")
    assert tick(svc.db, svc.settings, at=ts("2026-06-30T23:00:00")) == []  # 01:00 Berlin: not yet
    fired = tick(svc.db, svc.settings, at=ts("2026-07-01T00:00:30"))
    assert [(f.schedule_id, f.slot) for f in fired] == [(sid, ts("2026-07-01T00:00:00"))]
    restarted = Database(svc.settings.resolved_database_url)  # a new process: state comes from the DB only
    try:
        assert tick(restarted, svc.settings, at=ts("2026-07-01T00:00:31")) == []
        assert tick(restarted, svc.settings, at=ts("2026-07-01T23:59:00")) == []
    finally:
        restarted.dispose()
    jobs = _jobs(svc)
    assert len(jobs) == 1
    key, payload = jobs[0]
    assert key == f"schedule:{sid}:{int(ts('2026-07-01T00:00:00'))}"
    assert payload["slot"] == "2026-07-01T02:00:00+02:00" and payload["traces"] == 1


def test_concurrent_schedulers_fire_a_slot_once(svc: Svc) -> None:
    _schedule(svc, "0 * * * *", "2026-07-01T08:10:00")
    barrier = threading.Barrier(4)
    results: list[int] = []

    def run() -> None:
        db = Database(svc.settings.resolved_database_url, run_migrations=False)
        barrier.wait()
        results.append(len(tick(db, svc.settings, at=ts("2026-07-01T10:30:00"))))
        db.dispose()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 0, 0, 1] and len(_jobs(svc)) == 1


def test_outage_catches_up_once_and_skips_stale_slots(svc: Svc) -> None:
    sid = _schedule(svc, "0 * * * *", "2026-07-01T08:10:00")
    assert len(tick(svc.db, svc.settings, at=ts("2026-07-01T11:00:05"))) == 1  # slot 11:00
    # down from 11:01 to 15:20: slots 12, 13, 14, 15 were missed → one run, for 15:00
    fired = tick(svc.db, svc.settings, at=ts("2026-07-01T15:20:00"))
    assert [(f.slot, f.job_id is not None) for f in fired] == [(ts("2026-07-01T15:00:00"), True)]
    assert len(_jobs(svc)) == 2
    svc.settings.scheduler_catchup_s = 600.0
    fired = tick(svc.db, svc.settings, at=ts("2026-07-01T16:30:00"))  # 16:00 is 30 min old > 10 min
    assert [(f.slot, f.job_id) for f in fired] == [(ts("2026-07-01T16:00:00"), None)]
    assert len(_jobs(svc)) == 2
    with svc.db.session() as s:
        row = s.get(ScheduleRow, sid)
        assert row is not None and row.last_slot == ts("2026-07-01T16:00:00")


def test_disabled_schedule_never_fires(svc: Svc) -> None:
    sid = _schedule(svc, "* * * * *", "2026-07-01T08:10:00")
    svc.client.patch(f"{API}/schedules/{sid}", json={"enabled": False}, headers=svc.write)
    assert tick(svc.db, svc.settings, at=ts("2026-07-01T10:30:00")) == [] and _jobs(svc) == []


def test_the_worker_loop_fires_due_schedules(svc: Svc) -> None:
    import time

    from jobs.handlers import default_handlers
    from jobs.worker import Worker

    # yearly slot (Jan 1st 00:00 UTC): no new slot can appear between the two calls below
    sid = _schedule(svc, "0 0 1 1 *", "2020-01-01T00:00:00")
    svc.settings.scheduler_catchup_s = 2 * 366 * 86400.0
    assert latest_slot("0 0 1 1 *", "UTC", time.time()) > ts("2020-01-01T00:00:00")
    w = Worker(svc.settings, svc.db, "w-s", handlers=default_handlers(), schedule=True)
    assert w.run_once() == "failed"  # the fired nightly job ran: the deployment has no trace yet
    assert (
        Worker(svc.settings, svc.db, "w-s2", handlers=default_handlers(), schedule=True).run_once() is None
    )  # same slot: nothing new
    jobs = _jobs(svc)
    assert len(jobs) == 1 and str(jobs[0][0]).startswith(f"schedule:{sid}:")


def test_a_broken_schedule_does_not_stop_the_others(svc: Svc) -> None:
    good = _schedule(svc, "0 2 * * *", "2026-07-01T00:00:00")
    with svc.db.session() as s:
        dep_id = s.scalar(select(ScheduleRow.deployment_id).where(ScheduleRow.id == good))
        bad = ScheduleRow(deployment_id=dep_id, cron="0 2 * * *", timezone="Gone/Zone", enabled=True, traces=1,
                          last_slot=None, created_at=ts("2026-07-01T00:00:00"))
        s.add(bad)
        s.flush()
        s.execute(update(ScheduleRow).where(ScheduleRow.id == bad.id).values(id=0))  # ticked first
    fired = tick(svc.db, svc.settings, at=ts("2026-07-02T01:00:00"))
    assert [f.schedule_id for f in fired] == [good]
