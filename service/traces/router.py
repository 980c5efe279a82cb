"""/api/v1/traces: streamed upload (raw body or multipart `file`), list, show, delete."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from service.deps import DbDep, ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.errors import Invalid
from service.traces import service
from service.traces.schemas import TraceDetail, TraceOut
from service.traces.upload import receive_upload

__all__ = ["router"]

router = APIRouter(prefix="/traces", tags=["traces"])


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    openapi_extra={
        "requestBody": {
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                    }
                },
            }
        }
    },
)
async def upload(
    request: Request,
    settings: SettingsDep,
    db: DbDep,
    _: WriteAuth,
    name: str | None = None,
    format: str = "auto",
    deployment_id: int | None = None,
) -> TraceOut:
    """Upload a trace file (streamed to disk; `curl -T file URL` or multipart field `file`); ingested by a
    job.
    """
    service.check_format(format)
    if name is not None:
        service.clean_name(name, None)
    tmp, final = service.upload_paths(settings)
    received = await receive_upload(request, tmp, settings.upload_max_bytes)
    try:
        fields = received.fields
        fmt = service.check_format(fields.get("format", format))
        dep_raw = fields.get("deployment_id")
        if dep_raw is not None and not dep_raw.isdigit():
            raise Invalid("must be an integer", field="deployment_id")
        dep = int(dep_raw) if dep_raw is not None else deployment_id
        label = service.clean_name(name or fields.get("name"), received.filename)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return await run_in_threadpool(
        service.register_upload, db, settings, tmp, final, received, name=label, fmt=fmt, deployment_id=dep
    )


@router.get("")
def list_all(s: SessionDep, _: ReadAuth, deployment_id: int | None = None) -> list[TraceOut]:
    return [TraceOut.of(r) for r in service.list_all(s, deployment_id)]


@router.get("/{trace_id}")
def show(trace_id: int, s: SessionDep, settings: SettingsDep, _: ReadAuth) -> TraceDetail:
    return service.show(s, settings, trace_id)


@router.delete("/{trace_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete(trace_id: int, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> Response:
    service.delete(s, settings, trace_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
