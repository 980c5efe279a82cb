"""Small helpers shared by the resource packages: clock, epoch→datetime, the safe-name rule."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

__all__ = ["NAME_PATTERN", "now", "to_dt"]

#: Deployment names: they become parts of memcached keys and Cassandra partition keys, never paths.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
NAME_RE = re.compile(NAME_PATTERN)


def now() -> float:
    return time.time()


def to_dt(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)
