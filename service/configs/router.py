"""/api/v1/configs/{deployment_id}: latest (ETag, If-None-Match → 304), history, diff, publish, rollback."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from control import configs as service
from control.common import MAX_ID
from control.configs_cache import Latest, etag_of, latest_cache, none_match
from control.db import Database
from service.configs.schemas import ConfigCreate, ConfigDiff, ConfigOut, PublishRequest, RollbackRequest
from service.deps import DbDep, ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.params import DEFAULT_PAGE, Limit, Offset, PathId, page

__all__ = ["router"]

router = APIRouter(prefix="/configs", tags=["configs"])


def _load_latest(db: Database, deployment_id: int) -> Latest:
    with db.session() as s:
        row = service.latest(s, deployment_id)
        return Latest(etag_of(deployment_id, row.version), ConfigOut.of(row).model_dump_json().encode())


@router.get("/{deployment_id}", response_model=ConfigOut, responses={304: {"description": "Not modified"}})
async def latest(deployment_id: PathId, request: Request, db: DbDep, settings: SettingsDep, _: ReadAuth) -> Any:
    """The recommended config: the latest accepted version. Send `If-None-Match` to poll cheaply."""
    entry = latest_cache.get(db, deployment_id, settings.config_cache_s)
    if entry is None:
        entry = await run_in_threadpool(_load_latest, db, deployment_id)
        latest_cache.put(db, deployment_id, entry)
    headers = {"ETag": entry.etag, "Cache-Control": "no-cache"}
    wanted = request.headers.get("if-none-match")
    if wanted is not None and none_match(wanted, entry.etag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    return Response(content=entry.body, media_type="application/json", headers=headers)


@router.get("/{deployment_id}/versions")
def history(
    deployment_id: PathId,
    s: SessionDep,
    settings: SettingsDep,
    _: ReadAuth,
    limit: Limit = DEFAULT_PAGE,
    offset: Offset = 0,
) -> list[ConfigOut]:
    limit, offset = page(limit, offset, settings.api_max_list)
    return [ConfigOut.of(r) for r in service.history(s, deployment_id, limit=limit, offset=offset)]


@router.get("/{deployment_id}/versions/{version}")
def version(deployment_id: PathId, version: PathId, s: SessionDep, _: ReadAuth) -> ConfigOut:
    return ConfigOut.of(service.get_version(s, deployment_id, version))


@router.get("/{deployment_id}/diff")
def diff(
    deployment_id: PathId,
    s: SessionDep,
    _: ReadAuth,
    from_version: int = Query(alias="from", ge=1, le=MAX_ID),
    to_version: int = Query(alias="to", ge=1, le=MAX_ID),
) -> ConfigDiff:
    return service.diff(s, deployment_id, from_version, to_version)


@router.post("/{deployment_id}/versions", status_code=status.HTTP_201_CREATED)
def create(
    deployment_id: PathId, body: ConfigCreate, s: SessionDep, settings: SettingsDep, _: WriteAuth
) -> ConfigOut:
    row = service.add_version(s, deployment_id, body.config, settings=settings, source="manual", note=body.note)
    if body.publish:
        row.job_id = service.schedule_publish(s, settings, deployment_id, row.version).id
    return ConfigOut.of(row)


@router.post("/{deployment_id}/publish", status_code=status.HTTP_202_ACCEPTED)
def publish(
    deployment_id: PathId, body: PublishRequest, s: SessionDep, settings: SettingsDep, _: WriteAuth
) -> dict[str, int]:
    ver = body.version or service.latest(s, deployment_id).version
    job = service.schedule_publish(s, settings, deployment_id, ver)
    return {"job_id": job.id, "version": ver}


@router.post("/{deployment_id}/rollback", status_code=status.HTTP_201_CREATED)
def rollback(
    deployment_id: PathId, body: RollbackRequest, s: SessionDep, settings: SettingsDep, _: WriteAuth
) -> ConfigOut:
    row = service.rollback(s, settings, deployment_id, body.version, body.note)
    if body.publish:
        row.job_id = service.schedule_publish(s, settings, deployment_id, row.version).id
    return ConfigOut.of(row)
