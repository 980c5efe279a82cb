"""What the service's Prometheus metrics show, read from the metadata DB at scrape time (`service/metrics/`).

Every figure is a count or a value of rows the API and every worker write (jobs and their recorded steps,
deployments, config versions and their verifications, fidelity records), so one scrape of one process sees the
whole service, however many workers run, and the figures survive a restart: nothing is counted in a process's
memory. (The alternative, `prometheus_client`'s multiprocess mode, counts only what the processes of one host did
since their shared directory was made, and needs every worker's files on the scraped host.)

Labels are bounded: a deployment's name and kind, a job kind (of `JOB_KINDS`), a step name (the handlers'
fixed names; anything else is `other`), a status of a fixed vocabulary. Nothing read here is trusted to be well
formed (a row's JSON may be anything): a step or a verification that is not what the writers write is skipped.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.db import ConfigVersionRow, DeploymentRow, FidelityRecordRow, JobRow
from control.queue import JOB_KINDS, JOB_STATUSES
from control.verify import STATUSES

__all__ = [
    "FINISHED",
    "OTHER",
    "STEP_OUTCOMES",
    "DeploymentFigures",
    "Fidelity",
    "Snapshot",
    "Summary",
    "snapshot",
]

#: The job statuses a job ends in.
FINISHED = ("succeeded", "failed", "cancelled")
#: The outcomes of a recorded step that ran (`jobs/context.py`).
STEP_OUTCOMES = ("done", "failed", "cancelled")
#: A deployment's fidelity summary (`control.fidelity_store.summary`, handed in by the caller: the live replay's
#: statistics are the tuner's, which no other module of control imports).
Summary = Callable[[Session, int], Mapping[str, Any]]
#: The label of a job kind or step name outside the known ones.
OTHER = "other"
_STEP_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


@dataclass(frozen=True)
class Fidelity:
    """The model's fidelity on a deployment (`control.fidelity_store.summary`): its mean error per percentile
    (exp(mean ln(predicted/observed)) − 1, %) and the sign agreement of the resolved pairs (k of m, Wilson 95 %)."""

    records: int
    error_pct: Mapping[str, float]
    agree_k: int
    agree_m: int
    agreement: float | None
    agreement_interval: tuple[float, float] | None


@dataclass(frozen=True)
class DeploymentFigures:
    name: str
    kind: str
    publish_status: str
    #: The newest version published to a target, and the newest accepted version.
    running_version: int | None
    latest_version: int | None
    #: Config versions by their verification status (every status of `control.verify.STATUSES`, 0 when none).
    verifications: Mapping[str, int]
    #: The running version's verification: the expected p99, its band, and the clients' observed p99 (ms).
    expected_p99_ms: float | None
    expected_band_ms: tuple[float, float] | None
    observed_p99_ms: float | None
    fidelity: Fidelity | None


@dataclass
class Snapshot:
    #: (job kind, status) → jobs; every kind of `JOB_KINDS` with every status of `JOB_STATUSES`.
    jobs: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Queued jobs due now (their `run_after` has passed), by kind.
    due: dict[str, int] = field(default_factory=dict)
    #: (job kind, step, outcome) → the durations (s) of the recorded steps that ran to that outcome.
    steps: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    #: (deployment, kind, outcome) → recorded `publish` steps (a publish job's or a nightly's).
    publishes: dict[tuple[str, str, str], int] = field(default_factory=dict)
    deployments: list[DeploymentFigures] = field(default_factory=list)


def _job_kind(kind: str) -> str:
    return kind if kind in JOB_KINDS else OTHER


def _step_name(name: Any) -> str:
    return name if isinstance(name, str) and _STEP_NAME.match(name) else OTHER


def _steps(s: Session, snap: Snapshot, names: Mapping[int, tuple[str, str]]) -> None:
    rows = s.execute(select(JobRow.kind, JobRow.deployment_id, JobRow.steps))
    for kind, deployment_id, steps in rows:
        if not isinstance(steps, list):
            continue
        for step in steps:
            if not isinstance(step, dict) or step.get("status") not in STEP_OUTCOMES:
                continue
            start, end = _finite(step.get("started_at")), _finite(step.get("finished_at"))
            if start is None or end is None or end < start:
                continue
            name, outcome = _step_name(step.get("name")), str(step["status"])
            snap.steps.setdefault((_job_kind(kind), name, outcome), []).append(end - start)
            if name == "publish" and deployment_id in names:
                dep, dep_kind = names[deployment_id]
                key = (dep, dep_kind, outcome)
                snap.publishes[key] = snap.publishes.get(key, 0) + 1


def _verification(row: ConfigVersionRow | None) -> tuple[float | None, tuple[float, float] | None, float | None]:
    v = row.verification if row is not None else None
    if not isinstance(v, dict):
        return None, None, None
    expected, after = v.get("expected"), v.get("after")
    exp_p99 = _finite(expected.get("p99_ms")) if isinstance(expected, dict) else None
    band = expected.get("band_ms") if isinstance(expected, dict) else None
    lo, hi = (_finite(band[0]), _finite(band[1])) if isinstance(band, list) and len(band) == 2 else (None, None)
    obs = _finite(after.get("p99_ms")) if isinstance(after, dict) else None
    return exp_p99, (lo, hi) if lo is not None and hi is not None else None, obs


def _fidelity(s: Session, deployment_id: int, summary: Summary) -> Fidelity | None:
    has = s.scalar(select(func.count()).select_from(FidelityRecordRow)
                   .where(FidelityRecordRow.deployment_id == deployment_id))
    if not has:
        return None
    doc = summary(s, deployment_id)
    errors = {q: f for q, e in (doc.get("error") or {}).items()
              if (f := _finite((e or {}).get("mean_pct"))) is not None}
    agreement = doc.get("agreement") or {}
    interval = agreement.get("interval")
    bounds = (_finite(interval[0]), _finite(interval[1])) if isinstance(interval, list) and len(interval) == 2 \
        else (None, None)
    return Fidelity(
        records=int(doc.get("pooled") or 0),
        error_pct=errors,
        agree_k=int(agreement.get("k") or 0),
        agree_m=int(agreement.get("m") or 0),
        agreement=_finite(agreement.get("rate")),
        agreement_interval=(bounds[0], bounds[1]) if bounds[0] is not None and bounds[1] is not None else None,
    )


def _deployment(s: Session, dep: DeploymentRow, summary: Summary) -> DeploymentFigures:
    versions = list(s.scalars(select(ConfigVersionRow).where(ConfigVersionRow.deployment_id == dep.id)
                              .order_by(ConfigVersionRow.version)))
    statuses: Counter[str] = Counter()
    for row in versions:
        status = row.verification.get("status") if isinstance(row.verification, dict) else None
        if status in STATUSES:
            statuses[str(status)] += 1
    running = next((r for r in reversed(versions) if isinstance(r.published, dict) and r.published), None)
    expected, band, observed = _verification(running)
    return DeploymentFigures(
        name=dep.name,
        kind=dep.kind,
        publish_status=dep.publish_status,
        running_version=running.version if running is not None else None,
        latest_version=versions[-1].version if versions else None,
        verifications={status: statuses[status] for status in STATUSES},
        expected_p99_ms=expected,
        expected_band_ms=band,
        observed_p99_ms=observed,
        fidelity=_fidelity(s, dep.id, summary),
    )


def snapshot(s: Session, at: float, summary: Summary) -> Snapshot:
    """The figures of the whole service now (`at`: the time a queued job is due by; `summary`: a deployment's
    fidelity summary, read only for a deployment with fidelity records)."""
    snap = Snapshot()
    for kind in (*JOB_KINDS, OTHER):
        snap.due[kind] = 0
        for status in JOB_STATUSES:
            snap.jobs[(kind, status)] = 0
    for kind, status, n in s.execute(select(JobRow.kind, JobRow.status, func.count()).group_by(JobRow.kind,
                                                                                                JobRow.status)):
        if status in JOB_STATUSES:
            snap.jobs[(_job_kind(kind), status)] += int(n)
    due = select(JobRow.kind, func.count()).where(JobRow.status == "queued", JobRow.run_after <= at)
    for kind, n in s.execute(due.group_by(JobRow.kind)):
        snap.due[_job_kind(kind)] += int(n)
    deployments = list(s.scalars(select(DeploymentRow).order_by(DeploymentRow.id)))
    _steps(s, snap, {d.id: (d.name, d.kind) for d in deployments})
    snap.deployments = [_deployment(s, d, summary) for d in deployments]
    return snap
