"""The metadata database: SQLAlchemy 2 models, engine/session, and alembic migrations run at start-up."""

from __future__ import annotations

from control.db.models import (
    AnalysisRow,
    ApiTokenRow,
    Base,
    ConfigVersionRow,
    DeploymentGrantRow,
    DeploymentRow,
    FidelityRecordRow,
    JobRow,
    ObservationRow,
    ScheduleRow,
    TraceRow,
    WorkerRow,
)
from control.db.session import Database, DatabaseUnavailable, database_for, migrate, normalize_url

__all__ = [
    "AnalysisRow",
    "ApiTokenRow",
    "Base",
    "ConfigVersionRow",
    "Database",
    "DatabaseUnavailable",
    "DeploymentGrantRow",
    "DeploymentRow",
    "FidelityRecordRow",
    "JobRow",
    "ObservationRow",
    "ScheduleRow",
    "TraceRow",
    "WorkerRow",
    "database_for",
    "migrate",
    "normalize_url",
]
