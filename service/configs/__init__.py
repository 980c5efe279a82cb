"""Configs resource: latest accepted config (ETag), history, diff, manual publish, rollback."""

from __future__ import annotations

__all__: list[str] = []
