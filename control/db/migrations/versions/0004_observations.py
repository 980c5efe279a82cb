"""observations: what the deployments' clients report (per client, window and config version).

Revision ID: 0004 Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "observations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("deployment_id", sa.Integer(), sa.ForeignKey("deployments.id", ondelete="CASCADE"), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("window_start", sa.Float(), nullable=False),
        sa.Column("window_end", sa.Float(), nullable=False),
        sa.Column("config_version", sa.Integer(), nullable=False),
        sa.Column("observation", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("deployment_id", "client_id", "window_start", "config_version", name="uq_observation"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_observations_deployment_id", "observations", ["deployment_id"])


def downgrade() -> None:
    op.drop_index("ix_observations_deployment_id", table_name="observations")
    op.drop_table("observations")
