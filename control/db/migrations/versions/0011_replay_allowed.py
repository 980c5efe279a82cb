"""deployments gain `replay_allowed`: whether the live replay (`tailtune replay`, `control.replay`) may drive the
deployment's live system. An admin-only attribute (`control.grants`): a write token can keep it as an admin set it
or clear it, never set it; the replay acts only while the admin's record of it agrees. Existing deployments are not
allowed.

Revision ID: 0011 Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("replay_allowed", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("replay_allowed")
