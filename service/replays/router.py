"""/api/v1/deployments/{id}/replays and /api/v1/deployments/{id}/fidelity: start a live replay of the deployment
(the worker runs it as a `replay` job; the API connects to no host) and read the model's fidelity on it, pooled
over every stored replay (docs/replay.md § The service)."""

from __future__ import annotations

from fastapi import APIRouter, status

from service.deps import ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.jobs.schemas import JobOut
from service.params import DEFAULT_PAGE, Limit, Offset, PathId, page
from service.replays import service
from service.replays.schemas import FidelityOut, ReplayCreate

__all__ = ["router"]

router = APIRouter(prefix="/deployments", tags=["replays"])


@router.post("/{deployment_id}/replays", status_code=status.HTTP_202_ACCEPTED)
def start(deployment_id: PathId, body: ReplayCreate, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> JobOut:
    """Queue a live replay of the deployment (`tailtune replay`'s options): 202 with the `replay` job; 409 for a
    deployment that does not allow the live replay (`replay_allowed`, set by an admin), 422 for a bad option or a
    duration over `replay_max_duration_s`, 404 for an unknown deployment or dataset."""
    return JobOut.of(service.start(s, settings, deployment_id, body))


@router.get("/{deployment_id}/fidelity")
def fidelity(
    deployment_id: PathId, s: SessionDep, settings: SettingsDep, _: ReadAuth, limit: Limit = DEFAULT_PAGE,
    offset: Offset = 0,
) -> FidelityOut:
    """The model's fidelity on the deployment pooled over its stored replays (pair agreement k of m with its
    interval, regret, error per percentile, the time series, the contradictions) and its records, newest first."""
    limit, offset = page(limit, offset, settings.api_max_list)
    return service.fidelity(s, deployment_id, limit=limit, offset=offset)
