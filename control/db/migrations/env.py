"""Alembic environment: runs online against the connection handed over in `config.attributes["connection"]`.

For the alembic CLI, set `sqlalchemy.url` instead (e.g. `-x url=...` is not needed: use `control.db.migrate`).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from control.db.models import Base

__all__: list[str] = []

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


conn = config.attributes.get("connection")
if conn is not None:
    _run(conn)
else:
    from base.settings import get_settings

    url = config.get_main_option("sqlalchemy.url") or get_settings().resolved_database_url
    with create_engine(url).connect() as c:
        _run(c)
