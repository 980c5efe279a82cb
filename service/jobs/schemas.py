"""Request/response bodies of /api/v1/jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from tailtune.control.common import to_dt
from tailtune.control.db import JobRow

__all__ = ["JobCreate", "JobOut"]


class JobCreate(BaseModel):
    """Run the nightly pipeline now for one deployment (on its newest trace(s) unless datasets are given)."""

    deployment_id: int = Field(ge=1)
    kind: Literal["nightly"] = "nightly"
    traces: int = Field(default=1, ge=1, le=20, description="How many of the newest ready traces to use.")
    dataset_ids: list[str] | None = Field(
        default=None, description="Explicit dataset ids instead of the newest."
    )
    publish: bool = Field(default=True, description="Publish an accepted config to the deployment's target.")
    tune: dict[str, Any] = Field(
        default_factory=dict, description="Extra options for the tuner (e.g. trials)."
    )


class JobOut(BaseModel):
    id: int
    kind: str
    deployment_id: int | None
    status: str
    attempts: int
    max_attempts: int
    payload: dict[str, Any]
    steps: list[Any]
    logs: str
    result: dict[str, Any] | None
    mlflow_run_id: str | None
    error: str | None
    cancel_requested: bool
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, row: JobRow) -> JobOut:
        return cls(
            id=row.id,
            kind=row.kind,
            deployment_id=row.deployment_id,
            status=row.status,
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            payload=row.payload,
            steps=row.steps,
            logs=row.logs,
            result=row.result,
            mlflow_run_id=row.mlflow_run_id,
            error=row.error,
            cancel_requested=row.cancel_requested,
            created_at=to_dt(row.created_at),
            started_at=to_dt(row.started_at),
            finished_at=to_dt(row.finished_at),
        )
