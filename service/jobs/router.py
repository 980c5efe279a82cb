"""/api/v1/jobs: run now, list, show, cancel."""

from __future__ import annotations

from fastapi import APIRouter, status

from control import queue as service
from control.jobspec import check_capture, check_tune
from service.deps import ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.jobs.schemas import JobCreate, JobOut, JobSummary
from service.params import DEFAULT_PAGE, Limit, Offset, OptionalIdQuery, PathId, page

__all__ = ["router"]

router = APIRouter(prefix="/jobs", tags=["jobs"])


@router.post("", status_code=status.HTTP_202_ACCEPTED)
def run_now(body: JobCreate, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> JobOut:
    check_tune(body.tune, settings)
    check_capture(body.capture, settings, dataset_ids=body.dataset_ids)
    payload = body.model_dump(exclude={"deployment_id", "kind"}, exclude_none=True)
    return JobOut.of(service.run_now(s, settings, body.deployment_id, payload))


@router.get("")
def list_jobs(
    s: SessionDep,
    settings: SettingsDep,
    _: ReadAuth,
    status: str | None = None,
    deployment_id: OptionalIdQuery = None,
    limit: Limit = DEFAULT_PAGE,
    offset: Offset = 0,
) -> list[JobSummary]:
    """Newest first, without logs (GET /jobs/{id} has them)."""
    limit, offset = page(limit, offset, settings.api_max_list)
    rows = service.list_jobs(s, status=status, deployment_id=deployment_id, limit=limit, offset=offset)
    return [JobSummary.of(r) for r in rows]


@router.get("/{job_id}")
def show_job(job_id: PathId, s: SessionDep, _: ReadAuth) -> JobOut:
    return JobOut.of(service.get_job(s, job_id))


@router.post("/{job_id}/cancel")
def cancel_job(job_id: PathId, s: SessionDep, _: WriteAuth) -> JobOut:
    return JobOut.of(service.cancel_job(s, job_id))
