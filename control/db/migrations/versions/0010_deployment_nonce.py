"""deployments gain `nonce`: a random value drawn when the deployment is created. With the id it is the
deployment's identity (`DeploymentRow.identity`), which is what its published Cassandra rows are keyed and fenced
by: a deleted deployment's rows are never taken for a new one of the same name, nor for one that got the same id
from another metadata database. Existing deployments get a nonce of their own.

Revision ID: 0010 Revises: 0009
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("nonce", sa.String(length=32), nullable=False, server_default=""))
    bind = op.get_bind()
    deployments = sa.table("deployments", sa.column("id", sa.Integer), sa.column("nonce", sa.String))
    for (dep_id,) in bind.execute(sa.select(deployments.c.id)).all():
        bind.execute(
            deployments.update().where(deployments.c.id == dep_id).values(nonce=secrets.token_hex(8))
        )


def downgrade() -> None:
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("nonce")
