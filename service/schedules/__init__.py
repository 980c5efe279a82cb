"""Schedules resource: cron expressions in the deployment's time zone that enqueue nightly jobs."""

from __future__ import annotations

__all__: list[str] = []
