"""/api/v1/analyses: trigger, list, status, summary.json, report.html."""

from __future__ import annotations

from fastapi import APIRouter, status
from fastapi.responses import FileResponse

from service.analyses import service
from service.analyses.schemas import AnalysisCreate, AnalysisOut
from service.deps import ReadAuth, SessionDep, SettingsDep, WriteAuth
from service.params import DEFAULT_PAGE, Limit, Offset, PathId, page

__all__ = ["router"]

router = APIRouter(prefix="/analyses", tags=["analyses"])


@router.post("", status_code=status.HTTP_202_ACCEPTED)
def trigger(body: AnalysisCreate, s: SessionDep, settings: SettingsDep, _: WriteAuth) -> AnalysisOut:
    return AnalysisOut.of(service.create(s, settings, body))


@router.get("")
def list_all(
    s: SessionDep, settings: SettingsDep, _: ReadAuth, limit: Limit = DEFAULT_PAGE, offset: Offset = 0
) -> list[AnalysisOut]:
    limit, offset = page(limit, offset, settings.api_max_list)
    return [AnalysisOut.of(r) for r in service.list_all(s, limit=limit, offset=offset)]


@router.get("/{analysis_id}")
def show(analysis_id: PathId, s: SessionDep, _: ReadAuth) -> AnalysisOut:
    return AnalysisOut.of(service.get(s, analysis_id))


@router.get("/{analysis_id}/summary.json", response_class=FileResponse)
def summary(analysis_id: PathId, s: SessionDep, _: ReadAuth) -> FileResponse:
    return FileResponse(service.output_file(s, analysis_id, "summary.json"), media_type="application/json")


@router.get("/{analysis_id}/report.html", response_class=FileResponse)
def report(analysis_id: PathId, s: SessionDep, _: ReadAuth) -> FileResponse:
    return FileResponse(service.output_file(s, analysis_id, "report.html"), media_type="text/html")
