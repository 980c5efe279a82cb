"""/api/v1/jobs: run now, list, show, cancel."""

from __future__ import annotations

from fastapi import APIRouter, Query, status

from service.deps import ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.jobs.schemas import JobCreate, JobOut
from tailtune.control import queue as service

__all__ = ["router"]

router = APIRouter(prefix="/jobs", tags=["jobs"])


@router.post("", status_code=status.HTTP_202_ACCEPTED)
def run_now(body: JobCreate, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> JobOut:
    payload = body.model_dump(exclude={"deployment_id", "kind"})
    return JobOut.of(service.run_now(s, settings, body.deployment_id, payload))


@router.get("")
def list_jobs(
    s: SessionDep,
    _: ReadAuth,
    status: str | None = None,
    deployment_id: int | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> list[JobOut]:
    return [
        JobOut.of(r) for r in service.list_jobs(s, status=status, deployment_id=deployment_id, limit=limit)
    ]


@router.get("/{job_id}")
def show_job(job_id: int, s: SessionDep, _: ReadAuth) -> JobOut:
    return JobOut.of(service.get_job(s, job_id))


@router.post("/{job_id}/cancel")
def cancel_job(job_id: int, s: SessionDep, _: WriteAuth) -> JobOut:
    return JobOut.of(service.cancel_job(s, job_id))
