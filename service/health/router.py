"""Liveness (no auth) and readiness (a read token; 503 when not ready): under /api/v1 (`/health`, `/health/live`,
`/health/ready`) and, for probes that are configured with a bare path, at the root as well (`/health/live`,
`/health/ready`, and the same two as `/livez` and `/readyz`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status

from service.deps import DbDep, ReadAuth, SettingsDep
from service.health import service
from service.health.schemas import Readiness

__all__ = ["probes", "router"]

router = APIRouter(prefix="/health", tags=["health"])
#: The same two probes at the root of the server (included without the API prefix).
probes = APIRouter(tags=["health"])


def live() -> dict[str, str]:
    return {"status": "ok"}


def ready(db: DbDep, settings: SettingsDep, response: Response, _: ReadAuth) -> Readiness:
    result = service.readiness(db, settings)
    if not result.ready:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    return result


_READY: dict[int | str, dict[str, Any]] = {503: {"model": Readiness}}
for _path in ("", "/live"):
    router.add_api_route(_path, live, methods=["GET"])
router.add_api_route("/ready", ready, methods=["GET"], responses=_READY)
for _path in ("/health/live", "/livez"):
    probes.add_api_route(_path, live, methods=["GET"])
for _path in ("/health/ready", "/readyz"):
    probes.add_api_route(_path, ready, methods=["GET"], responses=_READY)
