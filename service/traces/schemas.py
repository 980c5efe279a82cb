"""Response bodies of /api/v1/traces."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from control.common import to_dt
from control.db import TraceRow

__all__ = ["TraceDetail", "TraceOut"]


class TraceOut(BaseModel):
    id: int
    name: str
    deployment_id: int | None
    format: str
    size_bytes: int
    sha256: str
    status: str
    dataset_id: str | None
    error: dict[str, Any] | None
    job_id: int | None
    created_at: datetime | None

    @classmethod
    def of(cls, r: TraceRow) -> TraceOut:
        return cls(
            id=r.id,
            name=r.name,
            deployment_id=r.deployment_id,
            format=r.format,
            size_bytes=r.size_bytes,
            sha256=r.sha256,
            status=r.status,
            dataset_id=r.dataset_id,
            error=r.error,
            job_id=r.job_id,
            created_at=to_dt(r.created_at),
        )


class TraceDetail(TraceOut):
    manifest: dict[str, Any] | None = None
    analyses: list[dict[str, Any]] = []
