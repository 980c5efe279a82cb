"""`GET /metrics` on the API (read scope), or the same on a port of its own (`metrics_port`, started by
`tailtune serve`, no token: a port the operator keeps to the monitoring network)."""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest, start_http_server

from base.errors import TailtuneError
from base.settings import Settings
from control.db import database_for
from service.deps import DbDep, ReadAuth, SettingsDep
from service.errors import Missing
from service.metrics.collector import registry

__all__ = ["PATH", "router", "start_metrics_port"]

PATH = "/metrics"
router = APIRouter(tags=["metrics"])


@router.get(PATH, response_class=Response, summary="The service's figures in the Prometheus exposition format")
def metrics(_: ReadAuth, settings: SettingsDep, db: DbDep) -> Response:
    if settings.metrics_port is not None:
        raise Missing(f"metrics are served on port {settings.metrics_port} (TAILTUNE_METRICS_PORT)", field="path")
    return Response(generate_latest(registry(db)), media_type=CONTENT_TYPE_LATEST)


def start_metrics_port(settings: Settings) -> tuple[WSGIServer, threading.Thread] | None:
    """With `metrics_port` set: serve the metrics there on `api_host` (a daemon thread); None when it is unset."""
    if settings.metrics_port is None:
        return None
    db = database_for(settings.resolved_database_url)
    try:
        return start_http_server(settings.metrics_port, addr=settings.api_host, registry=registry(db))
    except OSError as exc:  # in use, not ours to bind: one line naming the setting, not a traceback
        raise TailtuneError(f"TAILTUNE_METRICS_PORT: cannot serve the metrics on {settings.api_host}:"
                            f"{settings.metrics_port}: {exc.strerror or exc}") from None
