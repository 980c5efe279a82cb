"""The overview (every deployment) and a deployment's page, with its actions: run a nightly job now, publish,
verify (when the API has it), roll back, discover, and its schedules."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import ValidationError

from base.settings import Settings
from control import configs, deployments
from control import queue as jobs
from control.common import MAX_ID, now
from control.deployment_spec import DiscoverRequest, check_timezone
from control.jobspec import DEFAULT_SEEDS, DEFAULT_TRIALS, check_capture, check_tune
from control.verify import schedule_verify
from service.console import charts, views
from service.console.render import ConsoleRoute, fragment, page
from service.console.session import ViewerDep, WriterDep, set_flash
from service.deps import SessionDep, SettingsDep
from service.errors import Invalid
from service.jobs.schemas import JobCreate
from service.params import PathId
from service.schedules import service as schedules
from service.schedules.schemas import CRON_MAX, ScheduleCreate, SchedulePatch, check_cron

__all__ = ["router"]

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

Version = Annotated[int, Form(ge=1, le=MAX_ID)]


def _done(request: Request, settings: Settings, to: str, text: str) -> Response:
    response = RedirectResponse(to, status_code=303)
    set_flash(request, response, settings, "ok", text)
    return response


def _invalid(exc: ValidationError) -> Invalid:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "form"
    return Invalid(f"{where}: {err.get('msg', 'invalid')}", field=where)


@router.get("/")
def overview(request: Request, s: SessionDep, settings: SettingsDep, viewer: ViewerDep) -> Response:
    rows = deployments.list_all(s, limit=settings.api_max_list)
    cards = [views.card(s, d, model_error_pct=settings.verify_model_error_pct) for d in rows]
    return page(request, "overview.html", viewer, cards=cards, title="Deployments")


@router.get("/deployments/{deployment_id}")
def show(
    deployment_id: PathId, request: Request, s: SessionDep, settings: SettingsDep, viewer: ViewerDep
) -> Response:
    dep = deployments.get(s, deployment_id)
    ev = views.evidence(s, dep.id)
    model, notes = views.model_rows(dep, ev.rec if ev is not None else None)
    card = views.card(s, dep, model_error_pct=settings.verify_model_error_pct)
    return page(
        request, "deployment.html", viewer, title=dep.name, dep=dep, card=card, evidence=ev,
        timeline=charts.timeline_figure(card.points) if card.points else None,
        model=model, model_notes=notes, versions=views.version_rows(s, dep), nights=views.nights(s, dep.id),
        schedules=views.schedule_rows(s, dep, now()), traces=views.deployment_traces(s, dep.id),
        jobs=views.recent_jobs(s, dep.id), next_default=views.next_runs("0 2 * * *", dep.timezone, now()),
        fidelity=views.fidelity(s, dep), capture_sources=views.capture_sources(dep),
        default_trials=DEFAULT_TRIALS, default_seeds=DEFAULT_SEEDS,
        capture_max_s=settings.capture_max_duration_s,
    )


@router.get("/deployments/{deployment_id}/next-runs")
def next_runs(
    deployment_id: PathId,
    request: Request,
    s: SessionDep,
    viewer: ViewerDep,
    cron: Annotated[str, Query(max_length=CRON_MAX * 2)] = "0 2 * * *",
    timezone: Annotated[str, Query(max_length=128)] = "",
) -> Response:
    """The schedule editor's preview: the next run times of a cron expression, in the deployment's time zone."""
    dep = deployments.get(s, deployment_id)
    error, runs = None, []
    try:
        tz = check_timezone(timezone.strip()) if timezone.strip() else dep.timezone
        runs = views.next_runs(check_cron(cron.strip()), tz, now())
    except ValueError as exc:
        error = str(exc)
    return fragment(request, "_next_runs.html", viewer, runs=runs, error=error, tz=dep.timezone)


@router.post("/deployments/{deployment_id}/run")
def run_nightly(
    deployment_id: PathId,
    request: Request,
    s: SessionDep,
    settings: SettingsDep,
    _: WriterDep,
    trials: Annotated[int, Form(ge=1, le=MAX_ID)] = DEFAULT_TRIALS,
    seeds: Annotated[int, Form(ge=1, le=MAX_ID)] = DEFAULT_SEEDS,
    traces: Annotated[int, Form(ge=1, le=MAX_ID)] = 1,
    publish: Annotated[bool, Form()] = False,
    force: Annotated[bool, Form()] = False,
    capture_source: Annotated[str, Form(max_length=32)] = "",
    capture_duration_s: Annotated[float | None, Form(gt=0)] = None,
) -> Response:
    """Run the nightly pipeline now (as `POST /api/v1/jobs`): on the newest uploads, or on a capture
    (`capture_source` empty: the uploads)."""
    capture: dict[str, object] | None = None
    if capture_source.strip():
        if capture_duration_s is None:
            raise Invalid("a capture needs its duration in seconds", field="capture.duration_s")
        capture = {"source": capture_source.strip(), "duration_s": capture_duration_s}
    try:
        body = JobCreate(deployment_id=deployment_id, traces=traces, publish=publish, force=force,
                         capture=capture,  # type: ignore[arg-type]
                         tune={"trials": trials, "seeds": seeds})  # type: ignore[arg-type]
    except ValidationError as exc:
        raise _invalid(exc) from None
    check_tune(body.tune, settings)
    check_capture(body.capture, settings)
    payload = body.model_dump(exclude={"deployment_id", "kind"}, exclude_none=True)
    job = jobs.run_now(s, settings, deployment_id, payload)
    return _done(request, settings, f"/jobs/{job.id}", f"Nightly job {job.id} queued.")


@router.post("/deployments/{deployment_id}/publish")
def publish(
    deployment_id: PathId, request: Request, s: SessionDep, settings: SettingsDep, _: WriterDep, version: Version
) -> Response:
    job = configs.schedule_publish(s, settings, deployment_id, version)
    return _done(request, settings, f"/deployments/{deployment_id}",
                 f"Publishing config version {version}: job {job.id}.")


@router.post("/deployments/{deployment_id}/rollback")
def rollback(
    deployment_id: PathId,
    request: Request,
    s: SessionDep,
    settings: SettingsDep,
    _: WriterDep,
    version: Version,
    note: Annotated[str, Form(max_length=2000)] = "",
    publish: Annotated[bool, Form()] = False,
) -> Response:
    """Roll back to an earlier version: a new version with its config (as `POST /configs/{id}/rollback`)."""
    row = configs.rollback(s, settings, deployment_id, version, note.strip() or None)
    text = f"Rolled back to version {version}: it is now version {row.version}"
    if publish:
        row.job_id = configs.schedule_publish(s, settings, deployment_id, row.version).id
        text += f", publishing as job {row.job_id}"
    return _done(request, settings, f"/deployments/{deployment_id}", text + ".")


@router.post("/deployments/{deployment_id}/verify")
def verify(
    deployment_id: PathId, request: Request, s: SessionDep, settings: SettingsDep, _: WriterDep, version: Version
) -> Response:
    """Judge a version again on what the system now does (as `POST /deployments/{id}/verify`)."""
    job = schedule_verify(s, settings, deployment_id, version)
    return _done(request, settings, f"/jobs/{job.id}", f"Verifying config version {version}: job {job.id}.")


@router.post("/deployments/{deployment_id}/discover")
def discover(
    deployment_id: PathId,
    request: Request,
    s: SessionDep,
    settings: SettingsDep,
    _: WriterDep,
    profile_servers: Annotated[bool, Form()] = False,
) -> Response:
    """Read the live system into the deployment's model (as `POST /deployments/{id}/discover`)."""
    deployments.get(s, deployment_id)
    payload = DiscoverRequest(profile_servers=profile_servers).model_dump()
    job = jobs.enqueue(s, settings, "discover", payload, deployment_id=deployment_id)
    return _done(request, settings, f"/jobs/{job.id}", f"Discovery job {job.id} queued.")


@router.post("/deployments/{deployment_id}/schedules")
def add_schedule(
    deployment_id: PathId,
    request: Request,
    s: SessionDep,
    settings: SettingsDep,
    _: WriterDep,
    cron: Annotated[str, Form(max_length=CRON_MAX * 2)] = "0 2 * * *",
    timezone: Annotated[str, Form(max_length=128)] = "",
    traces: Annotated[int, Form(ge=1, le=MAX_ID)] = 1,
    enabled: Annotated[bool, Form()] = False,
) -> Response:
    try:
        body = ScheduleCreate(deployment_id=deployment_id, cron=cron.strip(), timezone=timezone.strip() or None,
                              traces=traces, enabled=enabled)
    except ValidationError as exc:
        raise _invalid(exc) from None
    row = schedules.create(s, settings, body)
    return _done(request, settings, f"/deployments/{deployment_id}#schedules", f"Schedule {row.id} added.")


@router.post("/schedules/{schedule_id}")
def edit_schedule(
    schedule_id: PathId,
    request: Request,
    s: SessionDep,
    settings: SettingsDep,
    _: WriterDep,
    cron: Annotated[str, Form(max_length=CRON_MAX * 2)],
    timezone: Annotated[str, Form(max_length=128)] = "",
    traces: Annotated[int, Form(ge=1, le=MAX_ID)] = 1,
    enabled: Annotated[bool, Form()] = False,
) -> Response:
    try:
        body = SchedulePatch(cron=cron.strip(), timezone=timezone.strip() or None, traces=traces, enabled=enabled)
    except ValidationError as exc:
        raise _invalid(exc) from None
    row = schedules.patch(s, settings, schedule_id, body)
    state = "enabled" if row.enabled else "disabled"
    return _done(request, settings, f"/deployments/{row.deployment_id}#schedules",
                 f"Schedule {row.id} saved ({state}).")


@router.post("/schedules/{schedule_id}/delete")
def delete_schedule(
    schedule_id: PathId, request: Request, s: SessionDep, settings: SettingsDep, _: WriterDep
) -> Response:
    row = schedules.get(s, schedule_id)
    dep_id = row.deployment_id
    schedules.delete(s, schedule_id)
    return _done(request, settings, f"/deployments/{dep_id}#schedules", f"Schedule {schedule_id} deleted.")
