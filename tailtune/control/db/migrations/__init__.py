"""Alembic migrations of the metadata DB (run programmatically by `tailtune.control.db.session.migrate`)."""

from __future__ import annotations

__all__: list[str] = []
