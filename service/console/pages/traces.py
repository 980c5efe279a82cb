"""Traces: the list with each ingest's state (live while one runs), a failed ingest's `file:line: field` problems,
and the upload (drag and drop with a progress bar; a plain form without script)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, RedirectResponse

from control import deployments
from ingest.formats import format_choices
from service.console.render import ConsoleRoute, fragment, page
from service.console.session import (
    CSRF_FIELD,
    CSRF_HEADER,
    ViewerDep,
    check_csrf_value,
    check_origin,
    set_flash,
)
from service.deps import DbDep, SessionDep, SettingsDep
from service.errors import Forbidden
from service.params import OptionalIdQuery
from service.traces import service as traces
from service.traces.upload import receive_upload

__all__ = ["UPLOAD_PATH", "router"]

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

#: The console's upload: streamed to disk under `upload_max_bytes` like the API's (service/guard.py lets it
#: through uncapped by `api_max_body_bytes`).
UPLOAD_PATH = "/traces/upload"
_PENDING = ("uploaded", "ingesting")


def _listing(s: SessionDep, deployment_id: int | None) -> dict[str, Any]:
    rows = traces.list_all(s, deployment_id, limit=100)
    names = {d.id: d.name for d in deployments.list_all(s, limit=1000)}
    return {"traces": rows, "names": names, "live": any(t.status in _PENDING for t in rows),
            "filter_id": deployment_id}


@router.get("/traces")
def list_page(
    request: Request, s: SessionDep, settings: SettingsDep, viewer: ViewerDep, deployment_id: OptionalIdQuery = None
) -> Response:
    return page(
        request, "traces.html", viewer, title="Traces", formats=format_choices(),
        deployments=deployments.list_all(s, limit=settings.api_max_list), max_bytes=settings.upload_max_bytes,
        **_listing(s, deployment_id),
    )


@router.get("/traces/list")
def list_fragment(
    request: Request, s: SessionDep, viewer: ViewerDep, deployment_id: OptionalIdQuery = None
) -> Response:
    """The trace list alone: htmx polls it every 2 s while an upload waits for or runs its ingest."""
    return fragment(request, "_trace_list.html", viewer, **_listing(s, deployment_id))


@router.post(UPLOAD_PATH)
async def upload(
    request: Request,
    settings: SettingsDep,
    db: DbDep,
    viewer: ViewerDep,
    name: Annotated[str | None, Query(max_length=200)] = None,
    format: Annotated[str, Query(max_length=64)] = "auto",
    deployment_id: OptionalIdQuery = None,
) -> Response:
    """A multipart upload (field `file`, and `name`, `format`, `deployment_id`), as `POST /api/v1/traces` takes it.

    The CSRF token comes in `X-CSRF-Token` (the page's script) and is checked before a byte is read, or as the form
    field `csrf_token` (the form without script), checked once the body has arrived — the file is removed then.
    """
    if not viewer.can_write:
        raise Forbidden("this token has read scope: sign in with a write token to upload", field="token")
    check_origin(request)
    header = request.headers.get(CSRF_HEADER)
    if header is not None:
        check_csrf_value(viewer, header)
    traces.check_format(format)
    tmp, final = traces.upload_paths(settings)
    received = await receive_upload(request, tmp, settings)
    try:
        fields = received.fields
        if header is None:
            check_csrf_value(viewer, fields.get(CSRF_FIELD))
        fmt = traces.check_format(fields.get("format") or format)
        raw = (fields.get("deployment_id") or "").strip()
        dep = traces.check_id(raw, "deployment_id") if raw else deployment_id
        label = traces.clean_name(name or (fields.get("name") or "").strip() or None, received.filename)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    out = await run_in_threadpool(
        traces.register_upload, db, settings, tmp, final, received, name=label, fmt=fmt, deployment_id=dep
    )
    text = f"Uploaded {out.name} ({out.size_bytes:,} bytes): trace {out.id}, ingest job {out.job_id}."
    if request.headers.get("x-requested-with"):
        return JSONResponse({**out.model_dump(mode="json"), "message": text}, status_code=202)
    response = RedirectResponse("/traces", status_code=303)
    set_flash(request, response, settings, "ok", text)
    return response
