"""The hot path of config polling: the latest version of a deployment, pre-serialized, cached for a moment.

Nodes poll GET /configs/{id} with If-None-Match. Each entry is (ETag, JSON bytes) and lives `config_cache_s`
(default 1 s), so a new version written by the worker process is served at most that long after it is
committed; versions written through this API process drop the entry at once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from tailtune.control.db import Database

__all__ = ["Latest", "LatestCache", "etag_of", "latest_cache"]


def etag_of(deployment_id: int, version: int) -> str:
    return f'"{deployment_id}-{version}"'


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
