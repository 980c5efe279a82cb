"""traces.size_bytes becomes a 64-bit integer: uploads may be larger than 2 GiB (the default `upload_max_bytes`
is exactly 2 GiB), and PostgreSQL's INTEGER is 32-bit (SQLite's is 64-bit either way; the batch recreates the
table there so the declared type matches the models).

Revision ID: 0002 Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

__all__ = ["downgrade", "upgrade"]

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("traces") as batch:
        batch.alter_column("size_bytes", type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("traces") as batch:
        batch.alter_column("size_bytes", type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=False)
