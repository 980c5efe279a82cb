"""Request/response bodies of /api/v1/analyses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator

from control.common import DbId, RequestBody, to_dt
from control.db import AnalysisRow
from control.model import INPUT_RANGES

__all__ = ["AnalysisCreate", "AnalysisOut"]


class AnalysisCreate(RequestBody):
    """Analyze one trace (by trace id) or one stored dataset (by dataset id)."""

    trace_id: DbId | None = None
    dataset_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{4,64}$")
    servers: int = Field(default=16, ge=INPUT_RANGES["servers"].low, le=INPUT_RANGES["servers"].high)
    replication: int = Field(default=3, ge=INPUT_RANGES["replication"].low, le=INPUT_RANGES["replication"].high)

    @model_validator(mode="after")
    def _one_source(self) -> AnalysisCreate:
        if (self.trace_id is None) == (self.dataset_id is None):
            raise ValueError("give exactly one of trace_id or dataset_id")
        if self.replication > self.servers:
            raise ValueError("replication must not exceed servers")
        return self


class AnalysisOut(BaseModel):
    id: int
    trace_id: int | None
    dataset_id: str
    options: dict[str, Any]
    status: str
    error: str | None
    job_id: int | None
    created_at: datetime | None

    @classmethod
    def of(cls, r: AnalysisRow) -> AnalysisOut:
        return cls(
            id=r.id,
            trace_id=r.trace_id,
            dataset_id=r.dataset_id,
            options=r.options,
            status=r.status,
            error=r.error,
            job_id=r.job_id,
            created_at=to_dt(r.created_at),
        )
