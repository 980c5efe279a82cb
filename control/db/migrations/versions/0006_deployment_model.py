"""deployments gain `model`: the deployment's model inputs as discovery and calibration found them (each with its
value, source and time), the raw readings behind them, and which topology fields the operator set explicitly.

Existing deployments get an empty model whose `operator` lists every topology field they stored (what they were
created with is all that is known of them, so it stays the operator's).

Revision ID: 0006 Revises: 0005
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("model", sa.JSON(), nullable=False, server_default="{}"))
    conn = op.get_bind()
    deployments = sa.table("deployments", sa.column("id", sa.Integer), sa.column("topology", sa.JSON),
                           sa.column("model", sa.JSON))
    for dep_id, topology in conn.execute(sa.select(deployments.c.id, deployments.c.topology)).all():
        topo = json.loads(topology) if isinstance(topology, str) else dict(topology or {})
        model = {"operator": sorted(k for k, v in topo.items() if v is not None)}
        conn.execute(sa.update(deployments).where(deployments.c.id == dep_id).values(model=model))


def downgrade() -> None:
    with op.batch_alter_table("deployments", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("model")
