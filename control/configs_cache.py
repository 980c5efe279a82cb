"""The hot path of config polling: the latest version of a deployment, pre-serialized, cached for a moment.

Nodes poll GET /configs/{id} with If-None-Match. Each entry is (ETag, JSON bytes) and lives `config_cache_s`
(default 1 s), so a new version written by the worker process is served at most that long after it is
committed; versions written through this API process drop the entry at once.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

from control.db import Database

__all__ = ["Latest", "LatestCache", "etag_of", "latest_cache", "none_match"]

_OPAQUE_TAG = re.compile(r'"[^"]*"')


def etag_of(deployment_id: int, version: int) -> str:
    return f'"{deployment_id}-{version}"'


def none_match(if_none_match: str, etag: str) -> bool:
    """Does an `If-None-Match` value name `etag`? If-None-Match uses weak comparison (RFC 9110 §13.1.2,
    §8.8.3.2): the opaque tags are compared and a `W/` prefix on either side is ignored, so `W/"3-1"` and `"3-1"`
    both match `"3-1"`. The value is `*` (any current version) or a comma-separated list of entity tags."""
    value = if_none_match.strip()
    if value == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag == opaque for tag in _OPAQUE_TAG.findall(value))


@dataclass(frozen=True, slots=True)
class Latest:
    etag: str
    body: bytes


class LatestCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, int], tuple[float, Latest]] = {}

    def get(self, db: Database, deployment_id: int, ttl: float) -> Latest | None:
        with self._lock:
            hit = self._entries.get((db.url, deployment_id))
        if hit is not None and time.monotonic() - hit[0] < ttl:
            return hit[1]
        return None

    def put(self, db: Database, deployment_id: int, entry: Latest) -> None:
        with self._lock:
            self._entries[(db.url, deployment_id)] = (time.monotonic(), entry)

    def drop(self, deployment_id: int) -> None:
        with self._lock:
            for key in [k for k in self._entries if k[1] == deployment_id]:
                del self._entries[key]


latest_cache = LatestCache()
