"""What a job handler sees: its job's id and payload, checkpointed steps, logs, cancellation, and writes
guarded by the worker's lease. Also the three ways a job ends early (failed for good, lease lost, cancelled).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, select, update

from base.errors import TailtuneError
from base.settings import Settings
from control.db import Database, JobRow
from control.redact import public

__all__ = ["Handler", "JobCancelled", "JobContext", "JobFailed", "JobOverBudget", "LeaseLost"]

log = logging.getLogger("tailtune.worker")
#: How often a step's progress is written at most, seconds (a new stage is written at once).
PROGRESS_EVERY_S = 1.0


class JobFailed(TailtuneError):
    """A failure that retrying cannot fix (missing trace, tuner not installed, conflicting config, ...)."""


class LeaseLost(Exception):
    """Another worker owns the job now (our lease expired): stop without touching it."""


class JobCancelled(Exception):
    """Cancel was requested: the job stops at its next check (between steps, between tuner trials) or at once
    where a step registered a way to interrupt itself (`JobContext.on_stop`, e.g. Spark's cancelAllJobs)."""


class JobOverBudget(JobFailed):
    """The job ran past `job_time_budget_s`: stopped like a cancel, ends `failed`, not retried."""


class JobContext:
    """What a handler sees: its job's id/payload, step checkpoints, logs, and guarded writes."""

    def __init__(self, db: Database, settings: Settings, worker_id: str, job: JobRow) -> None:
        self.worker_id = worker_id
        self.db = db
        self.settings = settings
        self.job_id = job.id
        self.kind = job.kind
        self.deployment_id = job.deployment_id
        self.payload = dict(job.payload)
        self.attempt = job.attempts
        self.max_attempts = job.max_attempts
        self.steps: list[dict[str, Any]] = [dict(s) for s in job.steps]
        self._logs_size = len(job.logs or "")
        self._logs_full = False
        #: Set (by the worker's watcher thread) when the job must stop: cancel requested or over its budget.
        self.stopping = threading.Event()
        self.stop_reason: Exception | None = None
        self._stop_hooks: list[Callable[[], None]] = []
        self._hooks_lock = threading.Lock()
        self._progress: dict[str, tuple[str, float]] = {}

    def _guard(self) -> Any:
        return and_(
            JobRow.id == self.job_id, JobRow.lease_owner == self.worker_id, JobRow.status == "running"
        )

    def _update(self, **values: Any) -> None:
        with self.db.session() as s:
            n = s.execute(update(JobRow).where(self._guard()).values(**values)).rowcount  # type: ignore[attr-defined]
        if not n:
            raise LeaseLost(f"job {self.job_id}: lease lost")

    def log(self, message: str) -> None:
        """Append a line to the job's logs (no credentials, no server paths; the logs stop growing at
        `job_logs_max_bytes`). The process log gets the same line."""
        log.info("job %s: %s", self.job_id, message)
        if self._logs_full:
            return
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} [attempt {self.attempt}] {public(message, self.settings)}\n"
        if self._logs_size + len(line) > self.settings.job_logs_max_bytes:
            self._logs_full = True
            line = f"... the logs stop here: job_logs_max_bytes ({self.settings.job_logs_max_bytes}) reached\n"
        self._logs_size += len(line)
        self._update(logs=JobRow.logs + line)

    def set_mlflow_run_id(self, run_id: str | None) -> None:
        if run_id:
            self._update(mlflow_run_id=run_id)

    # --- stopping: cancel and time budget ---------------------------------------------------------------------
    def stop(self, reason: Exception) -> None:
        """Ask the job to stop (called by the worker's watcher): later checks raise `reason`; hooks run now."""
        with self._hooks_lock:
            if self.stopping.is_set():
                return
            self.stop_reason = reason
            self.stopping.set()
            hooks = list(self._stop_hooks)
        for hook in hooks:
            try:
                hook()
            except Exception:
                log.exception("job %s: a stop hook failed", self.job_id)

    @contextlib.contextmanager
    def on_stop(self, hook: Callable[[], None]) -> Any:
        """While the block runs, a stop request also calls `hook` (which interrupts the block's work)."""
        with self._hooks_lock:
            self._stop_hooks.append(hook)
            already = self.stopping.is_set()
        try:
            if already:
                hook()
            yield
        finally:
            with self._hooks_lock:
                self._stop_hooks.remove(hook)

    def check_cancel(self) -> None:
        """Raise JobCancelled (or JobOverBudget) if the job must stop; cheap enough to call per tuner trial."""
        if self.stop_reason is None:
            with self.db.session() as s:
                wanted = s.scalar(select(JobRow.cancel_requested).where(JobRow.id == self.job_id))
            if wanted:
                self.stop(JobCancelled("cancelled by request"))
        if self.stop_reason is not None:
            raise self.stop_reason

    def done(self, name: str) -> dict[str, Any] | None:
        for step in self.steps:
            if step["name"] == name and step["status"] == "done":
                return dict(step.get("output") or {})
        return None

    def _record(self, name: str, **fields: Any) -> None:
        for step in self.steps:
            if step["name"] == name:
                step.update(fields)
                break
        else:
            self.steps.append({"name": name, **fields})
        self._update(steps=[dict(s) for s in self.steps])

    def step(self, name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run one checkpointed step, or return its stored output when an earlier attempt finished it."""
        earlier = self.done(name)
        if earlier is not None:
            self.log(f"step {name}: already done by an earlier attempt; reusing its output")
            return earlier
        self.check_cancel()
        self._record(
            name,
            status="running",
            attempt=self.attempt,
            started_at=time.time(),
            finished_at=None,
            error=None,
            output=None,
        )
        self.log(f"step {name}: started")
        try:
            output = fn()
        except LeaseLost:
            raise
        except Exception as exc:
            if self.stop_reason is not None and not isinstance(exc, JobCancelled | JobOverBudget):
                exc = self.stop_reason  # the step failed because it was interrupted on purpose
            status = "cancelled" if isinstance(exc, JobCancelled) else "failed"
            error = public(f"{type(exc).__name__}: {exc}", self.settings)
            self._record(name, status=status, finished_at=time.time(), error=error)
            self.log(f"step {name}: {status}: {exc}")
            if exc is self.stop_reason:
                raise exc from None
            raise
        self._record(name, status="done", finished_at=time.time(), output=output)
        self.log(f"step {name}: done")
        return output

    def progress(self, name: str, stage: str, fraction: float) -> None:
        """Record how far the running step `name` is: its `progress` `{stage, fraction (0..1), at}` (the console's
        job page shows it), written when the stage changes and otherwise at most every `PROGRESS_EVERY_S`."""
        fraction = min(max(float(fraction), 0.0), 1.0)
        t = time.monotonic()
        last = self._progress.get(name)
        if last is not None and last[0] == stage and t - last[1] < PROGRESS_EVERY_S:
            return
        self._progress[name] = (stage, t)
        self._record(name, progress={"stage": stage, "fraction": fraction, "at": time.time()})

    def skip(self, name: str, reason: str) -> None:
        """Record a step the job does not run: status `skipped`, the reason in its `output.reason`."""
        at = time.time()
        self._record(name, status="skipped", attempt=self.attempt, started_at=at, finished_at=at, error=None,
                     output={"reason": reason})
        self.log(f"step {name}: skipped: {reason}")


#: A job handler: runs the job's steps through its context and returns the job's result.
Handler = Callable[[JobContext], dict[str, Any]]
