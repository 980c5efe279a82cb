"""Admin-only deployment attributes and report tokens bound to deployments.

* `deployment_grants`: an admin-only attribute of a deployment as an admin token set it (for example the
  password variable and the contact points it may be sent to); the worker checks the deployment against it.
* `api_tokens.deployments`: the deployments (names) a report token may report for; null for the others.
* The deployments' model names the topology fields the deployment declares `declared` (it was `operator`):
  stored rows are rewritten.

Revision ID: 0009 Revises: 0008
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def _rename_model_key(old: str, new: str) -> None:
    conn = op.get_bind()
    deployments = sa.table("deployments", sa.column("id", sa.Integer), sa.column("model", sa.JSON))
    for dep_id, stored in conn.execute(sa.select(deployments.c.id, deployments.c.model)).all():
        model = json.loads(stored) if isinstance(stored, str) else dict(stored or {})
        if old in model:
            model[new] = model.pop(old)
            conn.execute(sa.update(deployments).where(deployments.c.id == dep_id).values(model=model))


def upgrade() -> None:
    op.create_table(
        "deployment_grants",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("deployment_id", sa.Integer(), sa.ForeignKey("deployments.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("attribute", sa.String(64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("granted_by", sa.String(100), nullable=False),
        sa.Column("granted_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("deployment_id", "attribute"),
    )
    op.create_index("ix_deployment_grants_deployment_id", "deployment_grants", ["deployment_id"])
    with op.batch_alter_table("api_tokens", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.add_column(sa.Column("deployments", sa.JSON(), nullable=True))
    _rename_model_key("operator", "declared")


def downgrade() -> None:
    _rename_model_key("declared", "operator")
    with op.batch_alter_table("api_tokens", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_column("deployments")
    op.drop_index("ix_deployment_grants_deployment_id", table_name="deployment_grants")
    op.drop_table("deployment_grants")
