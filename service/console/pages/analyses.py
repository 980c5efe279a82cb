"""Analyses: the list (analyses started from a trace, and those of nightly jobs), one analysis's page (findings
first, then interactive figures and tables: the report's components, `service.console.analysis_view`), its
standalone report.html, and starting an analysis of a ready trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import FileResponse, RedirectResponse
from pydantic import ValidationError

from base.settings import Settings
from control import queue as jobs
from control.common import MAX_ID
from service.analyses import service as analyses
from service.analyses.schemas import AnalysisCreate
from service.console import analysis_view, views
from service.console.render import HEADERS, ConsoleRoute, fragment, page
from service.console.session import ViewerDep, WriterDep, set_flash
from service.deps import SessionDep, SettingsDep
from service.errors import Conflict, Invalid, Missing
from service.params import PathId

__all__ = ["router"]

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

#: report.html is a page the analysis wrote, standalone: plotly.js and its figures inline. It is shown sandboxed —
#: its scripts run in an origin of their own, so they can reach neither the console's cookies nor its pages — and
#: may load nothing from anywhere.
_REPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
               "font-src data:; sandbox allow-scripts")


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    if not isinstance(doc, dict):
        raise Invalid("summary.json is not an object", field="summary")
    return doc


def _content(summary: dict[str, Any], directory: Path) -> dict[str, Any]:
    return {"findings": analysis_view.findings(summary), "figures": analysis_view.figures(summary, directory),
            "tables": analysis_view.tables(summary)}


def _nightly_analyses(s: SessionDep, limit: int = 50) -> list[dict[str, Any]]:
    out = []
    for job in jobs.list_jobs(s, limit=limit * 4):
        step = views.step_output(job, "analyze") if job.kind == "nightly" else None
        if step is not None and step.get("summary"):
            out.append({"job": job, "dataset_id": step.get("dataset_id")})
        if len(out) >= limit:
            break
    return out


@router.get("/analyses")
def list_page(request: Request, s: SessionDep, viewer: ViewerDep) -> Response:
    rows = analyses.list_all(s, limit=100)
    return page(request, "analyses.html", viewer, title="Analyses", analyses=rows, nightly=_nightly_analyses(s))


@router.post("/analyses")
def start(
    request: Request,
    s: SessionDep,
    settings: SettingsDep,
    _: WriterDep,
    trace_id: Annotated[int, Form(ge=1, le=MAX_ID)],
    servers: Annotated[int, Form(ge=1, le=100_000)] = 16,
    replication: Annotated[int, Form(ge=1, le=16)] = 3,
) -> Response:
    """Characterize a ready trace (as `POST /api/v1/analyses`)."""
    try:
        body = AnalysisCreate(trace_id=trace_id, servers=servers, replication=replication)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise Invalid(str(err.get("msg", "invalid")), field="form") from None
    row = analyses.create(s, settings, body)
    response = RedirectResponse(f"/analyses/{row.id}", status_code=303)
    set_flash(request, response, settings, "ok", f"Analysis {row.id} of trace {trace_id} queued (job {row.job_id}).")
    return response


@router.get("/analyses/{analysis_id}")
def show(analysis_id: PathId, request: Request, s: SessionDep, viewer: ViewerDep) -> Response:
    row = analyses.get(s, analysis_id)
    content: dict[str, Any] = {}
    if row.status == "succeeded":
        path = analyses.output_file(s, analysis_id, "summary.json")
        content = _content(_load(path), path.parent)
    return page(request, "analysis.html", viewer, title=f"Analysis {row.id}", analysis=row, job=None,
                report=f"/analyses/{row.id}/report.html" if row.status == "succeeded" else None,
                dataset_id=row.dataset_id, **content)


@router.get("/analyses/{analysis_id}/live")
def live(analysis_id: PathId, request: Request, s: SessionDep, viewer: ViewerDep) -> Response:
    """The state of a queued or running analysis; once it has ended, the page reloads to show it."""
    row = analyses.get(s, analysis_id)
    response = fragment(request, "_analysis_state.html", viewer, analysis=row)
    if row.status in views.FINAL:
        response.headers["HX-Refresh"] = "true"
    return response


def _report(path: Path) -> Response:
    response = FileResponse(path, media_type="text/html")
    for k, v in HEADERS.items():
        response.headers[k] = v
    response.headers["Content-Security-Policy"] = _REPORT_CSP
    return response


@router.get("/analyses/{analysis_id}/report.html")
def report(analysis_id: PathId, s: SessionDep, _: ViewerDep) -> Response:
    return _report(analyses.output_file(s, analysis_id, "report.html"))


def _job_dir(settings: Settings, s: SessionDep, job_id: int) -> tuple[Any, Path, dict[str, Any]]:
    """A nightly job's analysis folder (inside TAILTUNE_HOME/analyses, never elsewhere) and its step output."""
    job = jobs.get_job(s, job_id)
    step = views.step_output(job, "analyze")
    if step is None or not step.get("out_dir"):
        raise Conflict(f"job {job_id} has no finished analysis (yet)", field="job_id")
    root = (settings.home_dir / "analyses").resolve()
    folder = (settings.home_dir / str(step["out_dir"])).resolve()
    if not folder.is_relative_to(root):
        raise Missing(f"the analysis of job {job_id} is not where analyses are kept", field="job_id")
    return job, folder, step


@router.get("/jobs/{job_id}/analysis")
def job_analysis(job_id: PathId, request: Request, s: SessionDep, settings: SettingsDep, viewer: ViewerDep) -> Response:
    """The analysis a nightly job made of its trace."""
    job, folder, step = _job_dir(settings, s, job_id)
    summary = folder / "summary.json"
    if not summary.is_file():
        raise Missing(f"summary.json of job {job_id}'s analysis is gone", field="job_id")
    has_report = (folder / "report.html").is_file()
    return page(request, "analysis.html", viewer, title=f"Analysis of job {job.id}", analysis=None, job=job,
                report=f"/jobs/{job.id}/analysis/report.html" if has_report else None,
                dataset_id=step.get("dataset_id"), **_content(_load(summary), folder))


@router.get("/jobs/{job_id}/analysis/report.html")
def job_report(job_id: PathId, s: SessionDep, settings: SettingsDep, _: ViewerDep) -> Response:
    folder = _job_dir(settings, s, job_id)[1]
    path = folder / "report.html"
    if not path.is_file():
        raise Missing(f"report.html of job {job_id}'s analysis is gone", field="job_id")
    return _report(path)
