"""The FastAPI application: assembles the routers under /api/v1 (OpenAPI docs at /docs)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from service.analyses.router import router as analyses
from service.configs.fastpath import ConfigFastPath
from service.configs.router import router as configs
from service.deployments.router import router as deployments
from service.deps import database_for
from service.errors import install_error_handlers
from service.health.router import router as health
from service.jobs.router import router as jobs
from service.schedules.router import router as schedules
from service.traces.router import router as traces
from tailtune.base.settings import Settings, get_settings

__all__ = ["API_PREFIX", "create_app"]

API_PREFIX = "/api/v1"


def create_app(settings: Settings | None = None, *, fast_path: bool = True) -> FastAPI:
    """Build the app; the metadata DB is migrated at start-up.

    `fast_path=False` leaves out the config-fetch fast path, for callers that wrap the app in `ConfigFastPath`
    themselves as the outermost layer (what `tailtune serve` does: it then skips Starlette's middleware too).
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        database_for((settings or get_settings()).resolved_database_url)
        yield

    app = FastAPI(
        title="tailtune",
        version="1",
        lifespan=lifespan,
        description="Traces, analyses, deployments, tuning jobs, schedules and published configs.",
    )
    api = APIRouter(prefix=API_PREFIX)
    for router in (traces, analyses, deployments, jobs, schedules, configs, health):
        api.include_router(router)
    app.include_router(api)
    install_error_handlers(app)
    if fast_path:
        app.add_middleware(ConfigFastPath)
    return app
