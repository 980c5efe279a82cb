"""The FastAPI application: assembles the routers under /api/v1 (OpenAPI docs at /docs, served locally) and the
web console at / (docs/console.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from base.settings import Settings, get_settings
from service.analyses.router import router as analyses
from service.configs.fastpath import ConfigFastPath
from service.configs.router import router as configs
from service.console.routes import router as console
from service.deployments.router import router as deployments
from service.deps import database_for
from service.errors import install_error_handlers
from service.guard import RequestGuard
from service.health.router import probes
from service.health.router import router as health
from service.jobs.router import router as jobs
from service.metrics.endpoint import router as metrics
from service.observations.router import router as observations
from service.replays.router import router as replays
from service.schedules.router import router as schedules
from service.traces.router import router as traces
from service.verify.router import router as verify

__all__ = ["API_PREFIX", "DOCS_STATIC", "create_app"]

API_PREFIX = "/api/v1"
#: Swagger UI and ReDoc, served from the installed `fastapi-offline` package: the docs page loads nothing from
#: another site (a CDN would see every visit and could change the script).
DOCS_STATIC = "/docs-static"


def _docs_files() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


def _add_docs(app: FastAPI) -> None:
    app.mount(DOCS_STATIC, StaticFiles(directory=_docs_files()), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="tailtune - Swagger UI",
            swagger_js_url=f"{DOCS_STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_STATIC}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title="tailtune - ReDoc",
            redoc_js_url=f"{DOCS_STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{DOCS_STATIC}/favicon.png",
            with_google_fonts=False,
        )


def create_app(settings: Settings | None = None, *, fast_path: bool = True) -> FastAPI:
    """Build the app; the metadata DB is migrated at start-up.

    `fast_path=False` leaves out the config-fetch fast path, for callers that wrap the app in `ConfigFastPath`
    themselves as the outermost layer (what `tailtune serve` does: it then skips Starlette's middleware too).
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        from control.scratch import release_scratch

        database_for((settings or get_settings()).resolved_database_url)
        yield
        release_scratch(settings or get_settings())  # this process's scratch, if `tailtune serve` claimed one

    app = FastAPI(
        title="tailtune",
        version="1",
        lifespan=lifespan,
        description="Traces, analyses, deployments, tuning jobs, schedules and published configs.",
        docs_url=None,
        redoc_url=None,
    )
    api = APIRouter(prefix=API_PREFIX)
    for router in (traces, analyses, deployments, observations, verify, replays, jobs, schedules, configs, health):
        api.include_router(router)
    app.include_router(api)
    app.include_router(probes)  # /health/live, /health/ready, /livez, /readyz at the root
    app.include_router(metrics)  # /metrics at the root (Prometheus), or on its own port (metrics_port)
    _add_docs(app)
    app.include_router(console)
    install_error_handlers(app)
    app.add_middleware(RequestGuard)
    if fast_path:
        app.add_middleware(ConfigFastPath)
    return app
