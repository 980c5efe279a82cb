"""What the pages show, read through the same service functions the API's routers call (deployments, configs,
jobs, traces, schedules, observations, the deployment's model): nothing here writes.

A nightly job's evidence is its `tune` step's output (the whole recommendation, `tune --json`'s object) and its
`decide` step's; its drift and 'kept' decisions are its `drift` step's output and its result's `decision` (a job whose
workload did not move skips `tune` and `decide`: docs/drift.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from control import configs, fidelity_store, observations
from control import queue as jobs
from control.db import ConfigVersionRow, DeploymentRow, JobRow, TraceRow
from control.kinds import operations
from control.schedules import next_slot
from control.tune_request import deployment_model, deployment_record
from control.verify import MEANINGS, expected_band
from service.console import charts
from service.schedules import service as schedules
from service.traces import service as traces

__all__ = [
    "FINAL",
    "PIPELINE_STEPS",
    "Card",
    "Evidence",
    "Fidelity",
    "Night",
    "Rollback",
    "capture_sources",
    "card",
    "deployment_traces",
    "evidence",
    "fidelity",
    "model_rows",
    "next_runs",
    "nights",
    "recent_jobs",
    "schedule_rows",
    "step_output",
    "version_rows",
]

#: Job states that do not change any more (live views stop polling).
FINAL = ("succeeded", "failed", "cancelled")
#: The steps of a job kind, in order, as its handler records them (jobs/nightly.py; the test checks they agree):
#: the progress bar counts the done ones. A nightly job's `publish` runs only for an accepted config, its `confirm`
#: only for one its deployment's `confirm_on` replays first (the decision accepted, no version made yet).
PIPELINE_STEPS = {
    "nightly": ("ingest", "analyze", "drift", "tune", "decide", "confirm", "publish", "verify"),
    "ingest": ("ingest",),
    "analyze": ("analyze",),
    "publish": ("publish",),
    "verify": ("verify",),
    "discover": ("discover",),
    "calibrate": ("calibrate",),
    "replay": ("replay",),
}
_METRICS = ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "mean_ms")


def step_output(job: JobRow, name: str) -> dict[str, Any] | None:
    """The stored output of a finished step of the job (None while it has not finished)."""
    for step in job.steps or []:
        if isinstance(step, Mapping) and step.get("name") == name and step.get("status") == "done":
            out = step.get("output")
            return dict(out) if isinstance(out, Mapping) else {}
    return None


@dataclass
class Night:
    """One nightly job as the deployment pages show it: what it found and what it decided."""

    job: JobRow
    verdict: str | None = None
    reason: str | None = None
    policy: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    baseline_p99: float | None = None
    expected_p99: float | None = None
    decision: dict[str, Any] | None = None
    #: the `drift` step's output: `{changed, forced, against_job, against_version, reason, moved, quantities}`
    drift: dict[str, Any] | None = None
    #: the `verify` step's output (the version checked and its status)
    verify: dict[str, Any] | None = None
    #: The change of the current config's simulated p99 against the night before (its own workload drift), %.
    baseline_change_pct: float | None = None


def _night(job: JobRow) -> Night:
    night = Night(job)
    rec = step_output(job, "tune")
    if rec is not None:
        night.verdict, night.reason = rec.get("verdict"), rec.get("reason")
        night.policy, night.params = rec.get("policy"), dict(rec.get("params") or {})
        night.baseline_p99 = (rec.get("baseline") or {}).get("p99_ms")
        night.expected_p99 = (rec.get("expected") or {}).get("p99_ms")
    night.decision = step_output(job, "decide") or (job.result or {}).get("decision")
    night.drift = step_output(job, "drift") or (job.result or {}).get("drift")
    night.verify = step_output(job, "verify") or (job.result or {}).get("verify")
    return night


def nights(s: Session, deployment_id: int, limit: int = 20) -> list[Night]:
    """The deployment's newest nightly jobs (newest first), each with the change of the current config's simulated
    p99 from the night before it."""
    rows = [j for j in jobs.list_jobs(s, deployment_id=deployment_id, limit=max(limit * 5, 50)) if j.kind == "nightly"]
    out = [_night(j) for j in rows[:limit]]
    for newer, older in pairwise(out):
        if newer.baseline_p99 and older.baseline_p99:
            newer.baseline_change_pct = (float(newer.baseline_p99) / float(older.baseline_p99) - 1.0) * 100.0
    return out


@dataclass
class Card:
    """A deployment in the overview."""

    dep: DeploymentRow
    latest: ConfigVersionRow | None
    running: ConfigVersionRow | None
    verification: dict[str, Any] | None
    last_night: Night | None
    waiting_ingest: int
    waiting_tune: int
    timeline: dict[str, Any] | None
    observed: int
    points: list[dict[str, Any]]
    #: Stored report rows of those windows no reader can use (left out; `skipped_note` says so).
    skipped_note: str | None
    #: The newest version a verify rolled back (None: none was), and what it rolled back to.
    rollback: Rollback | None = None
    #: The version whose verification the card shows (the running one, else the latest).
    shown: ConfigVersionRow | None = None
    #: When the shown version's next queued check is due (None: none is queued).
    next_check_at: float | None = None
    #: The running version's own origin when it is a rollback: "the config of version 3".
    origin: str | None = None
    #: The last nightly kept a config other than the one running now: the version it kept (None: no such thing).
    kept_other: int | None = None
    #: Where a publish goes: the deployment's endpoints as its body names them (`DeploymentKind.endpoints`).
    endpoints: list[str] = field(default_factory=list)


@dataclass
class Rollback:
    """A verify's rollback: the version it judged worse, by which job and when, why, the version it compared with
    (whose config came back) and the version the rollback added."""

    version: int
    job_id: int | None
    at: float | None
    reason: str
    reference_version: int | None
    rollback_version: int | None


def _versions(s: Session, dep: DeploymentRow, limit: int = 100) -> Sequence[ConfigVersionRow]:
    return configs.history(s, dep.id, limit=limit)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def newest_rollback(versions: Sequence[ConfigVersionRow]) -> Rollback | None:
    """The newest version of `versions` (newest first) a verify judged `rolled_back`, from its `verification`."""
    for v in versions:
        ver = v.verification if isinstance(v.verification, Mapping) else {}
        if ver.get("status") == "rolled_back":
            return Rollback(version=v.version, job_id=_int(ver.get("job_id")), at=_num(ver.get("at")),
                            reason=str(ver.get("reason") or "").strip().rstrip("."),
                            reference_version=_int(ver.get("reference_version")),
                            rollback_version=_int(ver.get("rollback_version")))
    return None


def endpoints(dep: DeploymentRow) -> list[str]:
    """The deployment's endpoints as `host:port` (what a publish writes to); none when its connection cannot be
    read (the page still shows, without them). Only addresses: a connection's credentials are never read here."""
    try:
        return [f"{e.named}:{e.port}" for e in operations(dep.kind).endpoints(dep.connection or {})]
    except (ValueError, TypeError):
        return []


def capture_sources(dep: DeploymentRow) -> list[str]:
    """Where a nightly of `dep` can take its trace from besides the uploads (`control.jobspec.CAPTURE_SOURCES`
    its kind has: its own capture of its servers, its application's clients)."""
    ops = operations(dep.kind)
    out = [ops.capture_source] if ops.captures and ops.capture_source else []
    return out + (["clients"] if ops.client_captures else [])


def card(s: Session, dep: DeploymentRow, *, model_error_pct: float = 0.0) -> Card:
    """The deployment as the overview and its page's header show it; `model_error_pct` widens the verify band
    drawn around the expected p99 as the verify widens it (`verify_model_error_pct`)."""
    versions = _versions(s, dep)
    running = next((v for v in versions if dep.kind in (v.published or {})), None)
    latest = versions[0] if versions else None
    shown = running or latest
    recent = nights(s, dep.id, limit=2)
    last = recent[0] if recent else None
    pending = traces.list_all(s, dep.id, limit=200)
    since = last.job.created_at if last is not None else 0.0
    points, skipped = observations.timeline(s, dep.id, limit=200)
    bands = _bands(versions, model_error_pct)
    points = [{**p, "band_ms": bands.get(p["config_version"])} for p in points]
    rollback = newest_rollback(versions)
    origin = None
    if running is not None and rollback is not None and rollback.rollback_version == running.version \
            and rollback.reference_version is not None:
        origin = f"the config of version {rollback.reference_version}, back after version {rollback.version}"
    elif running is not None and running.source == "rollback" and running.note:
        origin = running.note
    kept = None
    if last is not None and last.decision is not None and not last.decision.get("accepted"):
        then = _int((last.drift or {}).get("against_version"))
        if then is not None and running is not None and then != running.version:
            kept = then
    return Card(
        dep=dep,
        latest=latest,
        running=running,
        verification=getattr(shown, "verification", None) if shown is not None else None,
        last_night=last,
        waiting_ingest=sum(1 for t in pending if t.status in ("uploaded", "ingesting")),
        waiting_tune=sum(1 for t in pending if t.status == "ready" and t.created_at > since),
        timeline=charts.timeline_figure(points, small=True) if points else None,
        observed=len(points),
        points=points,
        skipped_note=observations.skipped_note(skipped),
        rollback=rollback,
        shown=shown,
        next_check_at=next_checks(s, dep.id).get(shown.version) if shown is not None else None,
        origin=origin,
        kept_other=kept,
        endpoints=endpoints(dep),
    )


def _bands(versions: Sequence[ConfigVersionRow], model_error_pct: float) -> dict[int, list[float]]:
    """Version → [low, high] ms of the observed p99 its verify counts as expected (`control.verify.expected_band`
    on the expectation stored with the version; none for a version without one)."""
    out: dict[int, list[float]] = {}
    for v in versions:
        exp = (v.verification or {}).get("expected") if isinstance(v.verification, Mapping) else None
        if isinstance(exp, Mapping) and _num(exp.get("p99_ms")) and float(exp["p99_ms"]) > 0:
            stored = exp.get("band_ms")
            if isinstance(stored, list) and len(stored) == 2 and all(_num(b) is not None for b in stored):
                out[v.version] = [float(stored[0]), float(stored[1])]
            else:
                out[v.version] = list(expected_band(exp, model_error_pct))
    return out


@dataclass
class Evidence:
    """The newest recommendation of a deployment, as the deployment page shows it."""

    night: Night
    rec: dict[str, Any]
    figure: dict[str, Any]
    recorded_cdf: bool
    rows: list[dict[str, Any]]
    interval: list[float] | None
    improvement_pct: float | None
    p_value: float | None
    metric: str
    sentence: str


def _sentence(rec: Mapping[str, Any], decision: Mapping[str, Any] | None) -> str:
    verdict = str(rec.get("verdict") or "no verdict")
    subject = f"{rec.get('policy')} ({_plain(rec.get('params'))})"
    head = f"The tuner says “{verdict}” for {subject}" if verdict == "recommend" else f"The tuner says “{verdict}”"
    reason = str(rec.get("reason") or "").strip().rstrip(".")
    text = f"{head}: {reason}." if reason else f"{head}."
    if decision is not None:
        if decision.get("accepted"):
            text += f" The deployment accepted it as config version {decision.get('version')}."
        else:
            why = str(decision.get("reason") or "").strip().rstrip(".")
            # the decision of a tuner that said "keep current" repeats the tuner's reason: said once
            text += (" The deployment kept its current config." if not why or (reason and reason in why)
                     else f" The deployment kept its current config: {why}.")
    return text


def _plain(params: Any) -> str:
    if not isinstance(params, Mapping) or not params:
        return "its defaults"
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def evidence(s: Session, deployment_id: int) -> Evidence | None:
    """The evidence of the newest nightly job that got as far as a recommendation (None: no such job yet)."""
    for night in nights(s, deployment_id, limit=20):
        rec = step_output(night.job, "tune")
        if rec is None:
            continue
        rows: list[dict[str, Any]] = []
        baseline = rec.get("baseline") or {}
        rows.append({"label": "current config", "policy": baseline.get("policy"), "params": baseline.get("params"),
                     **{k: baseline.get(k) for k in _METRICS}})
        chosen = rec.get("expected") or {}
        if rec.get("verdict") == "recommend":
            rows.append({"label": "recommended", "policy": rec.get("policy"), "params": rec.get("params"),
                         **{k: chosen.get(k) for k in _METRICS}})
        elif rec.get("best"):
            best = rec["best"]
            rows.append({"label": "best found (not recommended)", "policy": best.get("policy"),
                         "params": best.get("params"), **{k: best.get(k) for k in _METRICS}})
        server = rec.get("server")
        for key, alt in sorted((rec.get("alternatives") or {}).items()):
            if not isinstance(alt, Mapping) or alt.get("policy") is None or alt.get("server") == server:
                continue
            rows.append({"label": f"{key} alternative ({alt.get('verdict')})", "policy": alt.get("policy"),
                         "params": alt.get("params"), **{k: alt.get(k) for k in _METRICS}})
        cdfs = rec.get("cdfs")
        recorded = isinstance(cdfs, Mapping) and bool(cdfs.get("curves"))
        figure = (charts.cdf_figure(cdfs) if recorded and isinstance(cdfs, Mapping) else
                  charts.percentile_figure([(f"{r['label']}: {r['policy']}", r) for r in rows]))
        conf = rec.get("confirmation") or {}
        interval = conf.get("interval_pct")
        return Evidence(
            night=night, rec=rec, figure=figure, recorded_cdf=recorded, rows=rows,
            interval=list(interval) if isinstance(interval, list) and len(interval) == 2 else None,
            improvement_pct=conf.get("improvement_pct", rec.get("improvement_pct")),
            p_value=conf.get("p_value", rec.get("p_value")),
            metric=str(conf.get("metric") or rec.get("objective") or "p99"),
            sentence=_sentence(rec, night.decision),
        )
    return None


def model_rows(dep: DeploymentRow, last: Mapping[str, Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Each input of the deployment's model as the next tune builds it (`control.tune_request`:
    value, source, how, when found) beside the source the newest tune recorded (`tuned_for.model_sources`);
    and the model's notes. Arrivals are shown for a trace with timestamps (the usual case)."""
    model = deployment_model(deployment_record(dep), timestamps=True)
    tuned_for = (last or {}).get("tuned_for") or {}
    used = tuned_for.get("model_sources") or {}
    rows = []
    for name, source in model.sources.items():
        entry = model.inputs.get(name) or {}
        rows.append({"name": name, "value": entry.get("value"), "source": source, "how": entry.get("how"),
                     "at": entry.get("at"), "last_tune": used.get(name)})
    return rows, list(model.notes)


def version_rows(s: Session, dep: DeploymentRow, limit: int = 50) -> list[dict[str, Any]]:
    """The config history (newest first), each version with its diff from the version before it."""
    versions = list(_versions(s, dep, limit=limit))
    checks = next_checks(s, dep.id)
    running = next((v for v in versions if dep.kind in (v.published or {})), None)
    out = []
    for i, v in enumerate(versions):
        older = versions[i + 1] if i + 1 < len(versions) else None
        diff = configs.diff(s, dep.id, older.version, v.version) if older is not None else None
        verification = getattr(v, "verification", None)
        status = (verification or {}).get("status")
        # what publishing this version (or rolling back to it) changes on the servers: from the running config
        change = (configs.diff(s, dep.id, running.version, v.version)
                  if running is not None and running.version != v.version else None)
        out.append({"row": v, "diff": diff, "published": dep.kind in (v.published or {}),
                    "verification": verification, "next_check_at": checks.get(v.version),
                    "meaning": MEANINGS.get(status) if isinstance(status, str) else None,
                    "rolled_back": status == "rolled_back",
                    "running_version": running.version if running is not None else None,
                    "change": change_lines(change) if change is not None else None})
    return out


def change_lines(diff: configs.ConfigDiff) -> list[str]:
    """A config diff as the confirmation of a publish lists it: one line per key (`params.split_keys: 4 → 8`)."""
    lines = [f"{k}: {_short(v['from'])} → {_short(v['to'])}" for k, v in diff.changed.items()]
    lines += [f"{k}: added, {_short(v)}" for k, v in diff.added.items()]
    lines += [f"{k}: removed (was {_short(v)})" for k, v in diff.removed.items()]
    return lines


def _short(v: Any, limit: int = 80) -> str:
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def next_checks(s: Session, deployment_id: int) -> dict[int, float]:
    """Version → when its next queued `verify` job is due (the publish's check at the horizon, a recheck)."""
    rows = s.execute(select(JobRow.payload, JobRow.run_after).where(
        JobRow.deployment_id == deployment_id, JobRow.kind == "verify", JobRow.status == "queued")).all()
    out: dict[int, float] = {}
    for payload, at in rows:
        v = (payload or {}).get("version")
        if isinstance(v, int) and not isinstance(v, bool) and at is not None:
            out[v] = min(out.get(v, at), at)
    return out


def next_runs(cron: str, tz: str, after: float, count: int = 5) -> list[float]:
    """The next `count` slots of a cron expression in a time zone (`control.schedules.next_slot`)."""
    out: list[float] = []
    at = after
    for _ in range(count):
        at = next_slot(cron, tz, at)
        out.append(at)
    return out


def schedule_rows(s: Session, dep: DeploymentRow, now: float) -> list[dict[str, Any]]:
    rows = []
    for r in schedules.list_all(s, dep.id, limit=50):
        shown = schedules.out(r)
        after = max(r.last_slot or 0.0, now)
        rows.append({"row": r, "out": shown, "next": next_runs(r.cron, r.timezone, after) if r.enabled else []})
    return rows


def deployment_traces(s: Session, deployment_id: int, limit: int = 10) -> Sequence[TraceRow]:
    return traces.list_all(s, deployment_id, limit=limit)


def recent_jobs(s: Session, deployment_id: int, limit: int = 8) -> Sequence[JobRow]:
    return jobs.list_jobs(s, deployment_id=deployment_id, limit=limit)


@dataclass
class Fidelity:
    """The deployment page's "the model on your cluster" (`control.fidelity_store`): the pooled summary, the
    newest replay's arms (predicted against observed), comparisons and notes, the findings, the two figures."""

    summary: dict[str, Any]
    newest: dict[str, Any] | None
    #: per percentile: the error of every pooled replay and of the newest `NEWEST_REPLAYS` (unflagged)
    errors: list[dict[str, Any]]
    arms: list[dict[str, Any]]
    comparisons: list[dict[str, Any]]
    notes: list[str]
    findings: list[dict[str, Any]]
    error_figure: dict[str, Any] | None
    agreement_figure: dict[str, Any] | None


#: How many of the newest replays the table's "newest" column pools.
NEWEST_REPLAYS = 5


def _error_pct(predicted: Any, observed: Any) -> float | None:
    if isinstance(predicted, int | float) and isinstance(observed, int | float) and observed > 0 and predicted > 0:
        return 100.0 * (float(predicted) / float(observed) - 1.0)
    return None


def fidelity(s: Session, dep: DeploymentRow) -> Fidelity:
    """What the page shows of the model's fidelity on `dep` (the summary `GET /deployments/{id}/fidelity` gives)."""
    summary = fidelity_store.summary(s, dep.id)
    rows = fidelity_store.list_records(s, dep.id, limit=NEWEST_REPLAYS, offset=0)
    newest = fidelity_store.record_out(rows[0]) if rows else None
    recent = fidelity_store.errors([fidelity_store.evidence(str(r.id), r.report) for r in rows if r.flag is None])
    errors = [{"metric": metric, "pooled_pct": pooled["mean_pct"], "pooled_n": pooled["n"],
               "mean_abs_log_ratio": pooled["mean_abs_log_ratio"], "newest_pct": recent[metric]["mean_pct"],
               "newest_n": recent[metric]["n"]}
              for metric, pooled in summary["error"].items()]
    arms: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    notes: list[str] = []
    if newest is not None:
        report = newest["report"]
        for arm in report["arms"]:
            o = report["observed"].get(arm["name"]) or {}
            p = report["predicted"].get(arm["name"]) or {}
            arms.append({"name": arm["name"], "spec": arm["spec"], "config": arm["config"], "observed": o,
                         "predicted": p, "error_pct": {m: _error_pct(p.get(f"{m}_ms"), o.get(f"{m}_ms"))
                                                       for m in ("p50", "p95", "p99")}})
        comparisons = list(report["comparisons"])
        if newest["flag"] == fidelity_store.LAG_TOO_HIGH:
            notes.append("The load generator sent late in this replay (its lag p99 over TAILTUNE_REPLAY_MAX_LAG_MS): "
                         "it is kept here but not pooled into the agreement and the errors.")
        interference = report.get("interference") or {}
        if interference.get("flagged") and interference.get("reason"):
            notes.append(f"Interference: {interference['reason']}."
                         + (" It is kept here but not pooled into the agreement and the errors (the model replays "
                            "each config alone)." if newest["flag"] == fidelity_store.INTERFERENCE else ""))
        notes.extend(str(n) for n in report["notes"])
    series = summary["series"]
    return Fidelity(
        summary=summary, newest=newest, errors=errors, arms=arms, comparisons=comparisons, notes=notes,
        findings=summary["contradictions"][:5],
        error_figure=charts.fidelity_error_figure(series) if series else None,
        agreement_figure=charts.fidelity_agreement_figure(series)
        if any((p["agreement_so_far"] or {}).get("m") for p in series) else None,
    )
