"""What a job handler sees: its job's id and payload, checkpointed steps, logs, cancellation, and writes
guarded by the worker's lease. Also the three ways a job ends early (failed for good, lease lost, cancelled).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, select, update

from tailtune.base.errors import TailtuneError
from tailtune.base.settings import Settings
from tailtune.control.db import Database, JobRow

__all__ = ["Handler", "JobCancelled", "JobContext", "JobFailed", "LeaseLost"]

log = logging.getLogger("tailtune.worker")


class JobFailed(TailtuneError):
    """A failure that retrying cannot fix (missing trace, tuner not installed, conflicting config, ...)."""


class LeaseLost(Exception):
    """Another worker owns the job now (our lease expired): stop without touching it."""


class JobCancelled(Exception):
    """Cancel was requested: stop between steps."""


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
        self.steps: list[dict[str, Any]] = [dict(s) for s in job.steps]

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
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} [attempt {self.attempt}] {message}\n"
        log.info("job %s: %s", self.job_id, message)
        self._update(logs=JobRow.logs + line)

    def set_mlflow_run_id(self, run_id: str | None) -> None:
        if run_id:
            self._update(mlflow_run_id=run_id)

    def check_cancel(self) -> None:
        with self.db.session() as s:
            wanted = s.scalar(select(JobRow.cancel_requested).where(JobRow.id == self.job_id))
        if wanted:
            raise JobCancelled()

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
            self._record(name, status="failed", finished_at=time.time(), error=f"{type(exc).__name__}: {exc}")
            self.log(f"step {name}: failed: {exc}")
            raise
        self._record(name, status="done", finished_at=time.time(), output=output)
        self.log(f"step {name}: done")
        return output


#: A job handler: runs the job's steps through its context and returns the job's result.
Handler = Callable[[JobContext], dict[str, Any]]
