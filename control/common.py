"""Small helpers shared by the resource packages: clock, epoch→datetime, the safe-name rule."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_ID", "NAME_PATTERN", "DbId", "RequestBody", "now", "to_dt"]

#: Ids are INTEGER columns: 32-bit on PostgreSQL. A bigger number in a request is a 422, never a DB error.
MAX_ID = 2**31 - 1
#: An id in a request body (path and query ids use `service.params`).
DbId = Annotated[int, Field(ge=1, le=MAX_ID, strict=True)]

#: Deployment names: they become parts of memcached keys and Cassandra partition keys, never paths.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
NAME_RE = re.compile(NAME_PATTERN)


class RequestBody(BaseModel):
    """The base of every request body of the API (and of the options inside one): unknown fields are refused, so
    are NaN and Infinity (Python's JSON parser takes them), and no value is coerced to a field's type — `true` is
    not an integer, `"yes"` not a boolean, `"1"` not a number (strict). Each is a 422 naming the field."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


def now() -> float:
    return time.time()


def to_dt(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)
