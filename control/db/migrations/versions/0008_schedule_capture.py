"""schedules gain `capture`: null (the nightly job ingests the deployment's newest uploaded trace) or
`{"duration_s": N}` (the worker captures the deployment's memcached servers for N seconds and ingests that).

Revision ID: 0008 Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("schedules", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("capture", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedules", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("capture")
