"""The metadata database: SQLAlchemy 2 models, engine/session, and alembic migrations run at start-up."""

from __future__ import annotations

from service.db.models import (
    AnalysisRow,
    ApiTokenRow,
    Base,
    ConfigVersionRow,
    DeploymentRow,
    JobRow,
    ScheduleRow,
    TraceRow,
    WorkerRow,
)
from service.db.session import Database, DatabaseUnavailable, migrate, normalize_url

__all__ = [
    "AnalysisRow",
    "ApiTokenRow",
    "Base",
    "ConfigVersionRow",
    "Database",
    "DatabaseUnavailable",
    "DeploymentRow",
    "JobRow",
    "ScheduleRow",
    "TraceRow",
    "WorkerRow",
    "migrate",
    "normalize_url",
]
