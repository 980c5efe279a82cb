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
* **Stopping.** A watcher thread (the heartbeat's) polls the job's `cancel_requested` about every second and
  checks the job's time budget (`job_time_budget_s`); either one stops the job through its context: the next
  check raises, and hooks a step registered (Spark's cancelAllJobs) interrupt it at once. Cancel ends the job
  `cancelled`; the budget ends it `failed` (not retried).
* **Schedules never wait for a job.** `run()` ticks the cron scheduler on its own thread, so a slot's job is
  enqueued on time even while this worker runs a long job (it then waits for a free worker: run several).
* **Finalizers.** When a job ends without success by any path (failed, cancelled, given up after lost
  workers), the finalizer of its kind brings the rows it was working on to an end state (a trace `failed`
  instead of `ingesting` forever, an analysis `failed` instead of `running`).
* **What clients see.** Job errors, step errors and logs carry no tracebacks, server paths or credentials
  (`control.redact.public`); the process log has the traceback.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from base.errors import BadInputError, TailtuneError
from base.settings import Settings
from control.db import Database, JobRow, WorkerRow
from control.redact import public
from control.storage import DiskFull, raise_if_disk_full
from jobs.context import Handler, JobCancelled, JobContext, JobFailed, JobOverBudget, LeaseLost

__all__ = ["Finalizer", "Worker"]

#: Called once a job ended without success: (db, settings, job id, kind, payload, status, error).
Finalizer = Callable[[Database, Settings, int, str, dict[str, Any], str, str], None]

#: How often the watcher of a running job looks for a cancel request and the time budget, at most.
WATCH_S = 1.0

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
        finalizers: Mapping[str, Finalizer] | None = None,
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
        self.finalizers = dict(finalizers or {})

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
                    gave_up = (job.id, job.kind, dict(job.payload), job.error)
                else:
                    return job
            self._finalize(*gave_up[:3], "failed", gave_up[3])
        return None

    def _finalize(self, job_id: int, kind: str, payload: dict[str, Any], status: str, error: str) -> None:
        fin = self.finalizers.get(kind)
        if fin is None:
            return
        try:
            fin(self.db, self.settings, job_id, kind, payload, status, error)
        except Exception:
            log.exception("job %s: finalizer of %s failed", job_id, kind)

    def _watch(self, ctx: JobContext, stop: threading.Event, lost: threading.Event) -> None:
        """Extend the lease every lease/3 s; look for a cancel request and the time budget about every second."""
        job_id = ctx.job_id
        period = min(self.lease_s / 3, WATCH_S, max(self.settings.worker_poll_s, 0.05))
        started = time.monotonic()
        budget = self.settings.job_time_budget_s
        next_beat = started + self.lease_s / 3
        while not stop.wait(period):
            try:
                if budget > 0 and time.monotonic() - started > budget:
                    ctx.stop(JobOverBudget(f"stopped after its time budget of {budget:g} s (job_time_budget_s)"))
                if not ctx.stopping.is_set():
                    with self.db.session() as s:
                        wanted = s.scalar(select(JobRow.cancel_requested).where(JobRow.id == job_id))
                    if wanted:
                        ctx.stop(JobCancelled("cancelled by request"))
                if time.monotonic() < next_beat:
                    continue
                next_beat = time.monotonic() + self.lease_s / 3
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
        hb = threading.Thread(target=self._watch, args=(ctx, stop, lost), daemon=True)
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
        except JobCancelled as exc:
            return self._finish(ctx, "cancelled", error=str(exc) or "cancelled by request")
        except Exception as exc:
            if ctx.stop_reason is not None and not isinstance(exc, JobFailed):
                exc = ctx.stop_reason  # interrupted on purpose: the reason, not the interruption's symptom
                if isinstance(exc, JobCancelled):
                    return self._finish(ctx, "cancelled", error=str(exc))
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
        if status in ("failed", "cancelled"):
            self._finalize(ctx.job_id, ctx.kind, ctx.payload, status, str(values.get("error") or status))
        return status

    def _failed(self, ctx: JobContext, job: JobRow, exc: Exception) -> str:
        if not isinstance(exc, TailtuneError):  # a step's own error already says what it could not write
            try:  # a full disk anywhere in the job: the path and the bytes free, not a bare [Errno 28]
                raise_if_disk_full(exc, self.settings)
            except DiskFull as full:
                exc = full
        message = public(f"{type(exc).__name__}: {exc}", self.settings)
        permanent = isinstance(exc, (BadInputError, JobFailed)) or getattr(exc, "permanent", False)
        if not isinstance(exc, BadInputError | JobFailed):  # the traceback goes to the process log only
            log.error("job %s: attempt %s failed", job.id, job.attempts, exc_info=exc)
        try:
            ctx.log(f"attempt {job.attempts} failed: {message}")
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

    def _schedule_loop(self, stop: threading.Event) -> None:
        from jobs.scheduler import tick

        while not stop.wait(max(self.settings.worker_poll_s, 0.05)):
            try:
                tick(self.db, self.settings)
            except Exception:
                log.exception("scheduler tick failed")

    def run(self, stop: threading.Event | None = None, *, max_jobs: int | None = None) -> int:
        stop = stop or threading.Event()
        done = 0
        log.info("worker %s started (lease %.0fs)", self.id, self.lease_s)
        ticker_stop = threading.Event()
        ticker = None
        if self.schedule:
            ticker = threading.Thread(target=self._schedule_loop, args=(ticker_stop,), daemon=True, name="cron")
            ticker.start()
        try:
            return self._loop(stop, max_jobs, done)
        finally:
            ticker_stop.set()
            if ticker is not None:
                ticker.join(timeout=30)

    def _loop(self, stop: threading.Event, max_jobs: int | None, done: int) -> int:
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
