"""Cron slot arithmetic shared by the schedules API and the scheduler: croniter on time-zone-aware datetimes,
so 02:00 Europe/Berlin stays 02:00 local across DST."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

__all__ = ["latest_slot", "local_time", "next_slot"]


def local_time(epoch: float, tz: str) -> datetime:
    return datetime.fromtimestamp(epoch, ZoneInfo(tz))


def next_slot(cron: str, tz: str, after: float) -> float:
    """The first slot strictly after `after` (epoch seconds)."""
    from croniter import croniter

    return float(croniter(cron, local_time(after, tz)).get_next(float))


def latest_slot(cron: str, tz: str, at: float) -> float:
    """The newest slot at or before `at`."""
    from croniter import croniter

    return float(croniter(cron, local_time(at + 0.001, tz)).get_prev(float))
