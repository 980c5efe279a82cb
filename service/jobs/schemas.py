"""Request/response bodies of /api/v1/jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from control.common import DbId, RequestBody, to_dt
from control.db import JobRow
from control.jobspec import DATASET_ID_PATTERN, MAX_TRACES, CaptureOptions, TuneOptions

__all__ = ["JobCreate", "JobOut", "JobSummary"]


class JobCreate(RequestBody):
    """Run the nightly pipeline now for one deployment (on its newest trace(s) unless datasets are given or a
    capture is asked for)."""

    deployment_id: DbId
    kind: Literal["nightly"] = "nightly"
    traces: int = Field(
        default=1, ge=1, le=MAX_TRACES, description="How many of the newest ready traces to use."
    )
    dataset_ids: list[Annotated[str, Field(pattern=DATASET_ID_PATTERN)]] | None = Field(
        default=None, max_length=MAX_TRACES, description="Explicit dataset ids instead of the newest."
    )
    publish: bool = Field(default=True, description="Publish an accepted config to the deployment's target.")
    tune: TuneOptions = Field(
        default_factory=TuneOptions,
        description="The tuner's options: trials, seeds, timeout_s (limits: tune_max_* settings).",
    )
    force: bool = Field(
        default=False,
        description="Re-tune even when the workload has not moved since the running config's study "
        "(otherwise such a job skips its study: docs/drift.md).",
    )
    capture: CaptureOptions | None = Field(
        default=None,
        description="Take the trace from a capture of the deployment's memcached servers for duration_s seconds "
        "(limit: capture_max_duration_s) instead of the newest upload.",
    )


class JobSummary(BaseModel):
    """A job in a listing: everything but its logs (GET /jobs/{id} has them)."""

    id: int
    kind: str
    deployment_id: int | None
    status: str
    attempts: int
    max_attempts: int
    payload: dict[str, Any]
    steps: list[Any]
    result: dict[str, Any] | None
    mlflow_run_id: str | None
    error: str | None
    cancel_requested: bool
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, row: JobRow) -> JobSummary:
        return cls(**_fields(row))


class JobOut(JobSummary):
    """One job with its logs."""

    logs: str

    @classmethod
    def of(cls, row: JobRow) -> JobOut:
        return cls(**_fields(row), logs=row.logs)


def _fields(row: JobRow) -> dict[str, Any]:
    return dict(
        id=row.id,
        kind=row.kind,
        deployment_id=row.deployment_id,
        status=row.status,
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        payload=row.payload,
        steps=row.steps,
        result=row.result,
        mlflow_run_id=row.mlflow_run_id,
        error=row.error,
        cancel_requested=row.cancel_requested,
        created_at=to_dt(row.created_at),
        started_at=to_dt(row.started_at),
        finished_at=to_dt(row.finished_at),
    )
