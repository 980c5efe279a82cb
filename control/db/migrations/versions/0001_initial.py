"""Initial schema: deployments, traces, analyses, jobs, schedules, config_versions, api_tokens, workers.

Revision ID: 0001 Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "deployments",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("topology", sa.JSON, nullable=False),
        sa.Column("connection", sa.JSON, nullable=False),
        sa.Column("objective", sa.JSON, nullable=False),
        sa.Column("constraints", sa.JSON, nullable=False),
        sa.Column("current_config", sa.JSON, nullable=True),
        sa.Column("publish_status", sa.String(16), nullable=False),
        sa.Column("publish_error", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "traces",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column(
            "deployment_id", sa.Integer, sa.ForeignKey("deployments.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column("format", sa.String(32), nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("upload_path", sa.Text, nullable=True),
        sa.Column("dataset_id", sa.String(64), nullable=True),
        sa.Column("error", sa.JSON, nullable=True),
        sa.Column("job_id", sa.Integer, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_traces_deployment_id", "traces", ["deployment_id"])
    op.create_table(
        "analyses",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("trace_id", sa.Integer, nullable=True),
        sa.Column("dataset_id", sa.String(64), nullable=False),
        sa.Column("options", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("out_dir", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("job_id", sa.Integer, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("deployment_id", sa.Integer, nullable=True),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("dedupe_key", sa.String(200), nullable=True, unique=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("run_after", sa.Float, nullable=False),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_expires", sa.Float, nullable=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("steps", sa.JSON, nullable=False),
        sa.Column("logs", sa.Text, nullable=False),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("finished_at", sa.Float, nullable=True),
    )
    op.create_index("ix_jobs_deployment_id", "jobs", ["deployment_id"])
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "deployment_id", sa.Integer, sa.ForeignKey("deployments.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("cron", sa.String(100), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("traces", sa.Integer, nullable=False),
        sa.Column("last_slot", sa.Float, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_schedules_deployment_id", "schedules", ["deployment_id"])
    op.create_table(
        "config_versions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "deployment_id", sa.Integer, sa.ForeignKey("deployments.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("job_id", sa.Integer, nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("published", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("deployment_id", "version", name="uq_config_version"),
    )
    op.create_index("ix_config_versions_deployment_id", "config_versions", ["deployment_id"])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.String(100), primary_key=True),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("current_job_id", sa.Integer, nullable=True),
    )


def downgrade() -> None:
    for table in (
        "workers",
        "api_tokens",
        "config_versions",
        "schedules",
        "jobs",
        "analyses",
        "traces",
        "deployments",
    ):
        op.drop_table(table)
