"""/api/v1/health (liveness, no auth) and /api/v1/health/ready (readiness; 503 when not ready)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from service.deps import DbDep, ReadAuth, SettingsDep
from service.health import service
from service.health.schemas import Readiness

__all__ = ["router"]

router = APIRouter(prefix="/health", tags=["health"])


@router.get("")
def live() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/ready", responses={503: {"model": Readiness}})
def ready(db: DbDep, settings: SettingsDep, response: Response, _: ReadAuth) -> Readiness:
    result = service.readiness(db, settings)
    if not result.ready:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    return result
