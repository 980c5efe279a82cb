"""deployments gain `confirm_on`: the deployment (itself, or a staging deployment of the same kind) at which a
nightly replays current against recommended with the live replay before it publishes (`jobs/confirm.py`); and
config_versions gain `evidence`: the figures a version was published on (the `confirm_on` replay's headline).
Existing deployments name none; existing versions have none.

Revision ID: 0013 Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("confirm_on", sa.String(64), nullable=True))
    with op.batch_alter_table("config_versions", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("evidence", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("config_versions", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("evidence")
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("confirm_on")
