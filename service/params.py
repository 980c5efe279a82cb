"""Path and query parameters shared by the routers: ids bounded to the DB's integer range, listing pages.

Every integer that reaches the metadata DB is bounded here or in the request models, so a number past the
columns' range (2^31 on PostgreSQL, 2^63 on SQLite) is a 422 naming the parameter, never a DB error.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from control.common import MAX_ID

__all__ = ["DEFAULT_PAGE", "MAX_OFFSET", "Limit", "Offset", "OptionalIdQuery", "PathId", "page"]

DEFAULT_PAGE = 100
MAX_OFFSET = 10**9

PathId = Annotated[int, Path(ge=1, le=MAX_ID)]
OptionalIdQuery = Annotated[int | None, Query(ge=1, le=MAX_ID)]
#: The page size of a listing (newest first); capped at `api_max_list` by the routers.
Limit = Annotated[int, Query(ge=1, le=MAX_ID, description="How many (default 100, at most api_max_list).")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="How many of the newest to skip.")]


def page(limit: int, offset: int, max_list: int) -> tuple[int, int]:
    """(limit, offset) of a listing after checking `limit` against the `api_max_list` setting."""
    from control.errors import Invalid

    if limit > max_list:
        raise Invalid(f"must be at most {max_list} (api_max_list)", field="limit")
    return limit, offset
