"""fidelity_records: each live replay's report of a deployment (`control.fidelity_store`): the whole
`ReplayReport.as_dict()` with the job and source that made it, and the summary columns read off it when it was
stored (its arms, measured seconds and blocks, its p99 sign agreement k of m, whether it contradicted the model,
and the flag of a report kept but not pooled).

Revision ID: 0012 Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "fidelity_records",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("deployment_id", sa.Integer(), sa.ForeignKey("deployments.id", ondelete="CASCADE"), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("flag", sa.String(32), nullable=True),
        sa.Column("arms", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("blocks", sa.Integer(), nullable=False),
        sa.Column("agree_k", sa.Integer(), nullable=False),
        sa.Column("agree_m", sa.Integer(), nullable=False),
        sa.Column("contradicts", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_fidelity_records_deployment_id", "fidelity_records", ["deployment_id"])
    op.create_index("ix_fidelity_records_at", "fidelity_records", ["at"])


def downgrade() -> None:
    op.drop_index("ix_fidelity_records_at", table_name="fidelity_records")
    op.drop_index("ix_fidelity_records_deployment_id", table_name="fidelity_records")
    op.drop_table("fidelity_records")
