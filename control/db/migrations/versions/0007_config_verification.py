"""config_versions gain `verification`: what the verify step found after the version was published (status, test,
figures before/after/expected, reason, time). Existing versions have none (never checked).

Revision ID: 0007 Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("config_versions", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("verification", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("config_versions", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("verification")
