"""/api/v1/schedules: cron schedules (nightly by default) per deployment."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from service.deps import ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.params import DEFAULT_PAGE, Limit, Offset, OptionalIdQuery, PathId, page
from service.schedules import service
from service.schedules.schemas import ScheduleCreate, ScheduleOut, SchedulePatch

__all__ = ["router"]

router = APIRouter(prefix="/schedules", tags=["schedules"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create(body: ScheduleCreate, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> ScheduleOut:
    return service.out(service.create(s, settings, body))


@router.get("")
def list_all(
    s: SessionDep,
    settings: SettingsDep,
    _: ReadAuth,
    deployment_id: OptionalIdQuery = None,
    limit: Limit = DEFAULT_PAGE,
    offset: Offset = 0,
) -> list[ScheduleOut]:
    limit, offset = page(limit, offset, settings.api_max_list)
    return [service.out(r) for r in service.list_all(s, deployment_id, limit=limit, offset=offset)]


@router.get("/{schedule_id}")
def show(schedule_id: PathId, s: SessionDep, _: ReadAuth) -> ScheduleOut:
    return service.out(service.get(s, schedule_id))


@router.patch("/{schedule_id}")
def patch(schedule_id: PathId, body: SchedulePatch, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> ScheduleOut:
    return service.out(service.patch(s, settings, schedule_id, body))


@router.delete("/{schedule_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete(schedule_id: PathId, s: SessionDep, _: WriteAuth) -> Response:
    service.delete(s, schedule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
