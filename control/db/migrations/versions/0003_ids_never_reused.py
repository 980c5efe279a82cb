"""Ids are never handed out twice: SQLite tables get AUTOINCREMENT (without it SQLite reuses the highest id
after that row is deleted, so a new trace could take a deleted trace's id and old jobs would point at it).
PostgreSQL's sequences never reuse a value: nothing to do there.

The batch recreates each table; `control.db.migrate` turns SQLite's foreign keys off around the
upgrade, so recreating a parent table does not cascade into its children.

Revision ID: 0003 Revises: 0002
"""

from __future__ import annotations

from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

TABLES = ("deployments", "traces", "analyses", "jobs", "schedules", "config_versions", "api_tokens")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": True}):
            pass


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always"):
            pass
