"""Alembic migrations of the metadata DB (run programmatically by `control.db.session.migrate`)."""

from __future__ import annotations

__all__: list[str] = []
