"""/api/v1/deployments/{id}/verify: judge a version on what the real system now does, on demand.

The API never connects to the hosts a deployment names (a write token wrote them): it enqueues a `verify` job
and answers 202 with it; the worker reads the clients' reports and, for stock Cassandra, the coordinator
latency, and records the outcome on the version (`GET /api/v1/configs/{id}/versions`, field `verification`).
"""

from __future__ import annotations

from fastapi import APIRouter, status
from pydantic import Field

from control.common import DbId, RequestBody
from control.verify import schedule_verify
from service.deps import SessionDep, SettingsDep, WriteAuth
from service.jobs.schemas import JobOut
from service.params import PathId

__all__ = ["VerifyRequest", "router"]

router = APIRouter(prefix="/deployments", tags=["verify"])


class VerifyRequest(RequestBody):
    version: DbId | None = Field(default=None, description="The version to check; default: the latest.")


@router.post("/{deployment_id}/verify", status_code=status.HTTP_202_ACCEPTED)
def verify(
    deployment_id: PathId, s: SessionDep, settings: SettingsDep, _: WriteAuth, body: VerifyRequest | None = None
) -> JobOut:
    """Queue a `verify` job of the version (judged again even if it was before); 404 for an unknown deployment
    or version, or a deployment without versions."""
    job = schedule_verify(s, settings, deployment_id, body.version if body is not None else None)
    return JobOut.of(job)
