"""deployments gain `server` (stock | rein-patched), `driver` (java4 | python) and `tables` (keyspace.table list);
config versions gain `applies_to` (the deployment's server, driver and tables when the version was added).

Existing deployments become `stock`, `java4`, no tables (what they were implicitly: nothing is applied per table
until tables are named); existing versions have no `applies_to`.

Revision ID: 0005 Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("server", sa.String(16), nullable=False, server_default="stock"))
        batch.add_column(sa.Column("driver", sa.String(16), nullable=False, server_default="java4"))
        batch.add_column(sa.Column("tables", sa.JSON(), nullable=False, server_default="[]"))
    with op.batch_alter_table("config_versions", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("applies_to", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("config_versions", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("applies_to")
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("tables")
        batch.drop_column("driver")
        batch.drop_column("server")
