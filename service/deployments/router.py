"""/api/v1/deployments: register a target, list, show, update, delete."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from service.deployments import service
from service.deployments.schemas import DeploymentCreate, DeploymentOut, DeploymentPatch
from service.deps import ReadAuth, SessionDep, WriteAuth

__all__ = ["router"]

router = APIRouter(prefix="/deployments", tags=["deployments"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create(body: DeploymentCreate, s: SessionDep, _: WriteAuth) -> DeploymentOut:
    return DeploymentOut.of(service.create(s, body))


@router.get("")
def list_all(s: SessionDep, _: ReadAuth) -> list[DeploymentOut]:
    return [DeploymentOut.of(r) for r in service.list_all(s)]


@router.get("/{deployment_id}")
def show(deployment_id: int, s: SessionDep, _: ReadAuth) -> DeploymentOut:
    return DeploymentOut.of(service.get(s, deployment_id))


@router.patch("/{deployment_id}")
def patch(deployment_id: int, body: DeploymentPatch, s: SessionDep, _: WriteAuth) -> DeploymentOut:
    return DeploymentOut.of(service.patch(s, deployment_id, body))


@router.delete("/{deployment_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete(deployment_id: int, s: SessionDep, _: WriteAuth) -> Response:
    service.delete(s, deployment_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
