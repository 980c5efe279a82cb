"""/api/v1/deployments: register a target, list, show, update, delete, discover, calibrate."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from control import deployments
from control.deployment_spec import DeploymentCreate, DeploymentOut, DeploymentPatch, DiscoverRequest
from control.queue import enqueue
from service.deps import ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.jobs.schemas import JobOut
from service.params import DEFAULT_PAGE, Limit, Offset, PathId, page

__all__ = ["router"]

router = APIRouter(prefix="/deployments", tags=["deployments"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create(body: DeploymentCreate, s: SessionDep, settings: SettingsDep, who: WriteAuth) -> DeploymentOut:
    """Register a deployment. Its admin-only attributes (a password variable: docs/operations.md § Security)
    need an admin token."""
    return DeploymentOut.of(deployments.create(s, settings, body, who))


@router.get("")
def list_all(
    s: SessionDep, settings: SettingsDep, _: ReadAuth, limit: Limit = DEFAULT_PAGE, offset: Offset = 0
) -> list[DeploymentOut]:
    limit, offset = page(limit, offset, settings.api_max_list)
    return [DeploymentOut.of(r) for r in deployments.list_all(s, limit=limit, offset=offset)]


@router.get("/{deployment_id}")
def show(deployment_id: PathId, s: SessionDep, _: ReadAuth) -> DeploymentOut:
    return DeploymentOut.of(deployments.get(s, deployment_id))


@router.patch("/{deployment_id}")
def patch(
    deployment_id: PathId, body: DeploymentPatch, s: SessionDep, settings: SettingsDep, who: WriteAuth
) -> DeploymentOut:
    """Update a deployment; setting or changing an admin-only attribute needs an admin token."""
    return DeploymentOut.of(deployments.patch(s, settings, deployment_id, body, who))


@router.delete("/{deployment_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete(deployment_id: PathId, s: SessionDep, _: WriteAuth) -> Response:
    deployments.delete(s, deployment_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{deployment_id}/discover", status_code=status.HTTP_202_ACCEPTED)
def discover(
    deployment_id: PathId, s: SessionDep, settings: SettingsDep, _: WriteAuth, body: DiscoverRequest | None = None
) -> JobOut:
    """Read the deployment's live system and store its model: a `discover` job the worker runs (the API itself
    connects to no host); `GET /jobs/{id}` shows what was found, `GET /deployments/{id}` the stored model."""
    deployments.get(s, deployment_id)
    payload = (body or DiscoverRequest()).model_dump()
    return JobOut.of(enqueue(s, settings, "discover", payload, deployment_id=deployment_id))


@router.post("/{deployment_id}/calibrate", status_code=status.HTTP_202_ACCEPTED)
def calibrate(deployment_id: PathId, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> JobOut:
    """Measure the deployment's service time and network (Cassandra) or client overhead (memcached) and store them
    as calibrated model inputs: a `calibrate` job the worker runs (the API connects to no host)."""
    deployments.get(s, deployment_id)
    return JobOut.of(enqueue(s, settings, "calibrate", {}, deployment_id=deployment_id))
