"""The durable job queue's producer side: enqueue, list, show, cancel (the worker side is `jobs/worker.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from base.settings import Settings
from control.common import now
from control.db import AnalysisRow, DeploymentRow, JobRow
from control.errors import Conflict, Invalid, Missing
from control.jobspec import check_capture_kind

__all__ = [
    "JOB_KINDS",
    "JOB_STATUSES",
    "NOT_RETRIED",
    "SELFTEST",
    "SELFTEST_OFF",
    "cancel_job",
    "enqueue",
    "get_job",
    "list_jobs",
    "retry_job",
    "stop_job",
]

JOB_KINDS = ("ingest", "analyze", "nightly", "publish", "verify", "selftest", "discover", "calibrate", "replay")
#: The tests' and smoke tests' job kind (N sleeping steps, `jobs/handlers.py`): accepted and run only with the
#: setting `selftest_jobs` on (TAILTUNE_SELFTEST_JOBS=true), which production leaves off.
SELFTEST = "selftest"
SELFTEST_OFF = "job kind 'selftest' is off: it runs only with TAILTUNE_SELFTEST_JOBS=true (the tests, smoke tests)"
JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
#: Kinds a retry cannot run again: an ingest's upload is removed when it fails (upload the trace again).
NOT_RETRIED = {"ingest": "its upload was removed when it failed: upload the trace again"}


def enqueue(
    s: Session,
    settings: Settings,
    kind: str,
    payload: dict[str, Any],
    *,
    deployment_id: int | None = None,
    dedupe_key: str | None = None,
    max_attempts: int | None = None,
    run_after: float | None = None,
) -> JobRow:
    """A queued job, due now or at `run_after` (epoch seconds); `selftest` only with its setting on."""
    if kind not in JOB_KINDS:
        raise Invalid(f"unknown job kind {kind!r}", field="kind")
    if kind == SELFTEST and not settings.selftest_jobs:
        raise Invalid(SELFTEST_OFF, field="kind")
    row = JobRow(
        kind=kind,
        deployment_id=deployment_id,
        payload=payload,
        status="queued",
        dedupe_key=dedupe_key,
        attempts=0,
        max_attempts=max_attempts or settings.job_max_attempts,
        run_after=now() if run_after is None else run_after,
        lease_owner=None,
        lease_expires=None,
        cancel_requested=False,
        steps=[],
        logs="",
        result=None,
        created_at=now(),
    )
    s.add(row)
    s.flush()
    return row


def get_job(s: Session, job_id: int) -> JobRow:
    row = s.get(JobRow, job_id)
    if row is None:
        raise Missing(f"job {job_id} not found", field="job_id")
    return row


def list_jobs(
    s: Session, *, status: str | None = None, deployment_id: int | None = None, limit: int = 100, offset: int = 0
) -> Sequence[JobRow]:
    q = select(JobRow).order_by(JobRow.id.desc()).limit(limit).offset(offset)
    if status is not None:
        if status not in JOB_STATUSES:
            raise Invalid(f"must be one of {', '.join(JOB_STATUSES)}", field="status")
        q = q.where(JobRow.status == status)
    if deployment_id is not None:
        q = q.where(JobRow.deployment_id == deployment_id)
    return s.scalars(q).all()


def run_now(s: Session, settings: Settings, deployment_id: int, payload: dict[str, Any]) -> JobRow:
    dep = s.get(DeploymentRow, deployment_id)
    if dep is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    check_capture_kind(payload.get("capture"), dep.kind)
    return enqueue(s, settings, "nightly", payload, deployment_id=deployment_id)


def stop_job(s: Session, job_id: int, reason: str = "cancelled by request") -> None:
    """Queued → cancelled at once; running → cancel requested (its worker stops it within about a second:
    between steps, between tuner trials, or at once for a Spark job); finished → nothing."""
    done = s.execute(
        update(JobRow)
        .where(JobRow.id == job_id, JobRow.status == "queued")
        .values(status="cancelled", finished_at=now(), error=reason)
    ).rowcount  # type: ignore[attr-defined]
    if not done:
        s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.status == "running").values(cancel_requested=True))


def cancel_job(s: Session, job_id: int) -> JobRow:
    """Cancel a queued or running job (409 when it already finished)."""
    row = get_job(s, job_id)
    if row.status in ("succeeded", "failed", "cancelled"):
        raise Conflict(f"job {job_id} already {row.status}", field="job_id")
    stop_job(s, job_id)
    s.flush()
    s.refresh(row)
    return row


def retry_job(s: Session, settings: Settings, job_id: int) -> JobRow:
    """A failed or cancelled job once more: a new job of the same kind, payload and deployment (the old one stays
    as it ended). An analysis points at the new job. 409 for a job still queued or running, one that succeeded,
    and the kinds in `NOT_RETRIED`."""
    row = get_job(s, job_id)
    if row.status not in ("failed", "cancelled"):
        raise Conflict(f"job {job_id} is {row.status}; only a failed or cancelled job is retried", field="job_id")
    if row.kind in NOT_RETRIED:
        raise Conflict(f"an {row.kind} job is not retried: {NOT_RETRIED[row.kind]}", field="job_id")
    if row.deployment_id is not None and s.get(DeploymentRow, row.deployment_id) is None:
        raise Missing(f"deployment {row.deployment_id} of job {job_id} no longer exists", field="deployment_id")
    new = enqueue(s, settings, row.kind, dict(row.payload), deployment_id=row.deployment_id)
    analysis_id = row.payload.get("analysis_id") if row.kind == "analyze" else None
    if isinstance(analysis_id, int):
        analysis = s.get(AnalysisRow, analysis_id)
        if analysis is None:
            raise Missing(f"analysis {analysis_id} of job {job_id} no longer exists", field="analysis_id")
        analysis.status, analysis.error, analysis.job_id = "queued", None, new.id
    s.flush()
    return new
