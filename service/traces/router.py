"""/api/v1/traces: streamed upload (raw body or multipart `file`), list, show, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from service.deps import DbDep, ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.params import DEFAULT_PAGE, Limit, Offset, OptionalIdQuery, PathId, page
from service.traces import service
from service.traces.schemas import TraceDetail, TraceOut
from service.traces.upload import receive_upload

__all__ = ["router"]

router = APIRouter(prefix="/traces", tags=["traces"])


_BODY: dict[str, Any] = {
    "requestBody": {
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {
                "schema": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}}
            },
        }
    }
}


@router.post("", status_code=status.HTTP_202_ACCEPTED, openapi_extra=_BODY)
@router.put("", status_code=status.HTTP_202_ACCEPTED, openapi_extra=_BODY)
async def upload(
    request: Request,
    settings: SettingsDep,
    db: DbDep,
    _: WriteAuth,
    name: str | None = None,
    format: str = "auto",
    deployment_id: OptionalIdQuery = None,
) -> TraceOut:
    """Upload a trace file (streamed to disk): the raw body (POST or PUT — `curl -T file URL` sends PUT) or
    multipart field `file`; ingested by a job.
    """
    return await _upload(request, settings, db, name, format, deployment_id)


@router.put("/{filename}", status_code=status.HTTP_202_ACCEPTED, openapi_extra=_BODY)
async def upload_named(
    filename: str,
    request: Request,
    settings: SettingsDep,
    db: DbDep,
    _: WriteAuth,
    name: str | None = None,
    format: str = "auto",
    deployment_id: OptionalIdQuery = None,
) -> TraceOut:
    """`curl -T trace.csv .../traces/` appends the file name to the URL: it is the trace's name."""
    return await _upload(request, settings, db, name or filename, format, deployment_id)


async def _upload(
    request: Request, settings: SettingsDep, db: DbDep, name: str | None, format: str, deployment_id: int | None
) -> TraceOut:
    service.check_format(format)
    if name is not None:
        service.clean_name(name, None)
    tmp, final = service.upload_paths(settings)
    received = await receive_upload(request, tmp, settings)
    try:
        fields = received.fields
        fmt = service.check_format(fields.get("format", format))
        dep_raw = fields.get("deployment_id")
        dep = service.check_id(dep_raw, "deployment_id") if dep_raw is not None else deployment_id
        label = service.clean_name(name or fields.get("name"), received.filename)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return await run_in_threadpool(
        service.register_upload, db, settings, tmp, final, received, name=label, fmt=fmt, deployment_id=dep
    )


@router.get("")
def list_all(
    s: SessionDep,
    settings: SettingsDep,
    _: ReadAuth,
    deployment_id: OptionalIdQuery = None,
    limit: Limit = DEFAULT_PAGE,
    offset: Offset = 0,
) -> list[TraceOut]:
    limit, offset = page(limit, offset, settings.api_max_list)
    return [TraceOut.of(r) for r in service.list_all(s, deployment_id, limit=limit, offset=offset)]


@router.get("/{trace_id}")
def show(trace_id: PathId, s: SessionDep, settings: SettingsDep, _: ReadAuth) -> TraceDetail:
    return service.show(s, settings, trace_id)


@router.delete("/{trace_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete(trace_id: PathId, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> Response:
    service.delete(s, settings, trace_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
