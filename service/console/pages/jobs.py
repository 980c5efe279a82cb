"""Jobs: the list, one job's live steps and logs, cancel and retry, and for a tuning job the study's optimization
history and parameter importance (Optuna's own plotly figures of the study in the Optuna storage)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse

from control import deployments
from control import queue as jobs
from control.db import JobRow
from control.queue import JOB_KINDS, JOB_STATUSES, NOT_RETRIED
from service.console import charts, views
from service.console.render import ConsoleRoute, fragment, page
from service.console.session import ViewerDep, WriterDep, set_flash
from service.deps import SessionDep, SettingsDep
from service.params import OptionalIdQuery, PathId

__all__ = ["router"]

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

#: How many of a job's log lines the page shows (the newest; the whole log is `GET /api/v1/jobs/{id}`).
LOG_LINES = 400


def _progress(job: JobRow) -> dict[str, Any]:
    """Steps as recorded, the ones still to come for a known kind, and the share done."""
    recorded = [dict(st) for st in job.steps or [] if isinstance(st, dict)]
    names = [st.get("name") for st in recorded]
    expected = views.PIPELINE_STEPS.get(job.kind, ())
    decision = views.step_output(job, "decide")
    publishing = (job.payload or {}).get("publish", True)
    kept = any(st.get("name") == "decide" and st.get("status") == "skipped" for st in recorded)
    skip = set()
    if job.kind == "nightly":
        if not publishing:
            skip |= {"publish", "verify"}
        if kept or (decision is not None and not decision.get("accepted")):
            skip.add("publish")
        if kept or decision is None or not decision.get("accepted") or decision.get("version") is not None:
            skip.add("confirm")  # only a decision whose version waits for the confirm_on replay is confirmed
        confirm = views.step_output(job, "confirm")
        if confirm is not None and confirm.get("outcome") != "confirmed":
            skip.add("publish")
    upcoming = [n for n in expected if n not in names and n not in skip]
    if job.status in views.FINAL:
        upcoming = []
    total = len(recorded) + len(upcoming)
    done = sum(1 for st in recorded if st.get("status") in ("done", "skipped"))
    return {"steps": recorded, "upcoming": upcoming, "done": done, "total": max(total, 1),
            "percent": 100 if job.status == "succeeded" else int(100 * done / max(total, 1))}


def _logs(job: JobRow) -> tuple[str, int]:
    lines = (job.logs or "").splitlines()
    return "\n".join(lines[-LOG_LINES:]), max(len(lines) - LOG_LINES, 0)


def _live(job: JobRow) -> dict[str, Any]:
    logs, hidden = _logs(job)
    return {"job": job, "progress": _progress(job), "logs": logs, "hidden_lines": hidden,
            "live": job.status not in views.FINAL}


@router.get("/jobs")
def list_page(
    request: Request,
    s: SessionDep,
    settings: SettingsDep,
    viewer: ViewerDep,
    status: Annotated[str, Query(max_length=16)] = "",
    kind: Annotated[str, Query(max_length=32)] = "",
    deployment_id: OptionalIdQuery = None,
) -> Response:
    rows = jobs.list_jobs(s, status=status or None, deployment_id=deployment_id, limit=settings.api_max_list)
    if kind:
        rows = [r for r in rows if r.kind == kind]
    shown = list(rows[:200])
    names = {d.id: d.name for d in deployments.list_all(s, limit=settings.api_max_list)}
    return page(request, "jobs.html", viewer, title="Jobs", jobs=shown, names=names, statuses=JOB_STATUSES,
                kinds=JOB_KINDS, status=status, kind=kind, deployment_id=deployment_id,
                progress={r.id: _progress(r) for r in shown}, live=any(r.status not in views.FINAL for r in shown))


@router.get("/jobs/{job_id}")
def show(job_id: PathId, request: Request, s: SessionDep, settings: SettingsDep, viewer: ViewerDep) -> Response:
    job = jobs.get_job(s, job_id)
    dep = deployments.get(s, job.deployment_id) if job.deployment_id is not None else None
    rec = views.step_output(job, "tune")
    figures: list[dict[str, Any]] = []
    notes: list[str] = []
    if rec is not None and rec.get("study"):
        figures, notes = charts.optuna_figures(str(rec["study"]), settings.resolved_optuna_storage,
                                               f"{rec.get('objective') or 'objective'} (ms)")
    return page(request, "job.html", viewer, title=f"Job {job.id}", dep=dep, rec=rec, figures=figures,
                figure_notes=notes, decision=views.step_output(job, "decide") or (job.result or {}).get("decision"),
                drift=views.step_output(job, "drift"), verify=views.step_output(job, "verify"),
                analysis=views.step_output(job, "analyze"), not_retried=NOT_RETRIED.get(job.kind), **_live(job))


@router.get("/jobs/{job_id}/live")
def live(job_id: PathId, request: Request, s: SessionDep, viewer: ViewerDep) -> Response:
    """The job's steps and logs: htmx polls it every 2 s while the job is queued or running; when it has ended the
    page reloads once to show the result."""
    job = jobs.get_job(s, job_id)
    response = fragment(request, "_job_live.html", viewer, **_live(job))
    if job.status in views.FINAL:
        response.headers["HX-Refresh"] = "true"
    return response


@router.post("/jobs/{job_id}/cancel")
def cancel(job_id: PathId, request: Request, s: SessionDep, settings: SettingsDep, _: WriterDep) -> Response:
    row = jobs.cancel_job(s, job_id)
    text = f"Job {job_id} cancelled." if row.status == "cancelled" else f"Job {job_id}: cancel requested."
    response = RedirectResponse(f"/jobs/{job_id}", status_code=303)
    set_flash(request, response, settings, "ok", text)
    return response


@router.post("/jobs/{job_id}/retry")
def retry(job_id: PathId, request: Request, s: SessionDep, settings: SettingsDep, _: WriterDep) -> Response:
    new = jobs.retry_job(s, settings, job_id)
    response = RedirectResponse(f"/jobs/{new.id}", status_code=303)
    set_flash(request, response, settings, "ok", f"Job {job_id} retried as job {new.id}.")
    return response
