"""The worker: runs jobs from the durable queue in the metadata DB.

* **Claim with a lease.** A job is claimed by one conditional UPDATE (queued and due, or running with an
  expired lease) that sets `lease_owner` and `lease_expires`; only the worker whose UPDATE matched runs it.
* **Heartbeat.** While a job runs, a thread extends the lease every `lease/3` s and records the worker's
  liveness.
* **Steps are checkpoints.** Each step's output is stored on the job; a job resumed after its worker died
  (lease expired) skips the steps already done and re-runs only the interrupted one (the tuner's Optuna study
  resumes from its storage) — nothing lost, no finished step run twice.
* **Exactly-once completion.** Every write of a running job is guarded by `lease_owner = me AND status =
  'running'`; a worker that lost its lease cannot complete, fail or log on the job any more.
* **Retry with backoff.** A failed attempt is re-queued after `job_backoff_s * 2**(attempt-1)` s until
  `max_attempts`; bad input (`BadInputError`, `JobFailed`) fails at once.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from jobs.context import Handler, JobCancelled, JobContext, JobFailed, LeaseLost
from tailtune.base.errors import BadInputError, TailtuneError
from tailtune.base.settings import Settings
from tailtune.control.db import Database, JobRow, WorkerRow

__all__ = ["Worker"]

log = logging.getLogger("tailtune.worker")

#: The width of `jobs.lease_owner` / `workers.id` (PostgreSQL enforces VARCHAR lengths; SQLite does not).
WORKER_ID_MAX = 100


class Worker:
    """Claims and runs jobs; also ticks the cron scheduler when `schedule` is set."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        worker_id: str | None = None,
        *,
        handlers: Mapping[str, Handler],
        schedule: bool = True,
    ):
        self.settings = settings
        self.db = db
        if worker_id and len(worker_id) > WORKER_ID_MAX:
            raise BadInputError.single(
                "command line", f"worker id must be at most {WORKER_ID_MAX} characters", field="--id"
            )
        self.id = worker_id or f"{socket.gethostname()[:64]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.lease_s = settings.worker_lease_s
        self.schedule = schedule
        self.handlers = dict(handlers)

    # --- liveness -------------------------------------------------------------------------------------------
    def beat(self, job_id: int | None = None) -> None:
        """Record this worker's liveness: one atomic upsert on SQLite and PostgreSQL."""
        dialect = self.db.engine.dialect.name
        with self.db.session() as s:
            if dialect in ("sqlite", "postgresql"):
                insert = sqlite_insert if dialect == "sqlite" else pg_insert
                stmt = insert(WorkerRow).values(id=self.id, heartbeat_at=time.time(), current_job_id=job_id)
                s.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["id"],
                        set_={"heartbeat_at": stmt.excluded.heartbeat_at, "current_job_id": job_id},
                    )
                )
            else:
                row = s.get(WorkerRow, self.id)
                if row is None:
                    s.add(WorkerRow(id=self.id, heartbeat_at=time.time(), current_job_id=job_id))
                else:
                    row.heartbeat_at, row.current_job_id = time.time(), job_id

    # --- queue ----------------------------------------------------------------------------------------------
    def _claimable(self, now: float) -> Any:
        return or_(
            and_(JobRow.status == "queued", JobRow.run_after <= now),
            and_(JobRow.status == "running", JobRow.lease_expires < now),
        )

    def claim(self) -> JobRow | None:
        now = time.time()
        with self.db.session() as s:
            ids = s.scalars(select(JobRow.id).where(self._claimable(now)).order_by(JobRow.id).limit(10)).all()
        for job_id in ids:
            with self.db.session() as s:
                n = s.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, self._claimable(now))
                    .values(
                        status="running",
                        lease_owner=self.id,
                        lease_expires=now + self.lease_s,
                        attempts=JobRow.attempts + 1,
                        started_at=now,
                    )
                ).rowcount  # type: ignore[attr-defined]
                if not n:
                    continue
                job = s.get(JobRow, job_id)
                assert job is not None
                if job.attempts > job.max_attempts:
                    job.status, job.finished_at, job.lease_owner = "failed", now, None
                    job.error = f"gave up after {job.max_attempts} attempts (workers lost or failed)"
                    continue
                return job
        return None

    def _heartbeat_loop(self, job_id: int, stop: threading.Event, lost: threading.Event) -> None:
        while not stop.wait(self.lease_s / 3):
            try:
                with self.db.session() as s:
                    n = s.execute(
                        update(JobRow)
                        .where(JobRow.id == job_id, JobRow.lease_owner == self.id, JobRow.status == "running")
                        .values(lease_expires=time.time() + self.lease_s)
                    ).rowcount  # type: ignore[attr-defined]
                if not n:
                    lost.set()
                    return
                self.beat(job_id)
            except Exception:  # a DB hiccup: try again at the next beat; the lease has slack
                log.exception("heartbeat of job %s failed", job_id)

    def execute(self, job: JobRow) -> str:
        """Run one claimed job to its end state; returns the status written (or 'lost')."""
        ctx = JobContext(self.db, self.settings, self.id, job)
        stop, lost = threading.Event(), threading.Event()
        hb = threading.Thread(target=self._heartbeat_loop, args=(job.id, stop, lost), daemon=True)
        hb.start()
        try:
            ctx.log(f"claimed by {self.id}")
            handler = self.handlers.get(job.kind)
            if handler is None:
                raise JobFailed(f"no handler for job kind {job.kind!r}")
            result = handler(ctx)
            return self._finish(ctx, "succeeded", result=result, error=None)
        except LeaseLost:
            log.warning("job %s: lease lost; another worker continues it", job.id)
            return "lost"
        except JobCancelled:
            return self._finish(ctx, "cancelled", error="cancelled by request")
        except Exception as exc:
            return self._failed(ctx, job, exc)
        finally:
            stop.set()
            hb.join()
            self.beat(None)

    def _finish(self, ctx: JobContext, status: str, **values: Any) -> str:
        fields: dict[str, Any] = {"finished_at": time.time(), "lease_owner": None, "lease_expires": None}
        fields.update(values)
        try:
            ctx._update(status=status, **fields)
        except LeaseLost:
            return "lost"
        return status

    def _failed(self, ctx: JobContext, job: JobRow, exc: Exception) -> str:
        message = f"{type(exc).__name__}: {exc}"
        permanent = isinstance(exc, (BadInputError, JobFailed)) or getattr(exc, "permanent", False)
        try:
            ctx.log(f"attempt {job.attempts} failed: {message}")
            if not isinstance(exc, TailtuneError):
                ctx.log("".join(traceback.format_exception(exc, limit=-3)).rstrip())
        except LeaseLost:
            return "lost"
        if permanent or job.attempts >= job.max_attempts:
            return self._finish(ctx, "failed", error=message)
        delay = self.settings.job_backoff_s * 2 ** (job.attempts - 1)
        status = self._finish(ctx, "queued", error=message, run_after=time.time() + delay, finished_at=None)
        if status == "queued":
            log.info("job %s: retry in %.1fs", job.id, delay)
        return status

    # --- loop -----------------------------------------------------------------------------------------------
    def run_once(self) -> str | None:
        """Tick the scheduler, then claim and run one job if any; returns its end status or None when idle."""
        self.beat()
        if self.schedule:
            from jobs.scheduler import tick

            tick(self.db, self.settings)
        job = self.claim()
        return None if job is None else self.execute(job)

    def run(self, stop: threading.Event | None = None, *, max_jobs: int | None = None) -> int:
        stop = stop or threading.Event()
        done = 0
        log.info("worker %s started (lease %.0fs)", self.id, self.lease_s)
        while not stop.is_set():
            try:
                status = self.run_once()
            except Exception:
                log.exception("worker loop error")
                status = None
            if status is None:
                stop.wait(self.settings.worker_poll_s)
                continue
            done += 1
            if max_jobs is not None and done >= max_jobs:
                break
        return done
