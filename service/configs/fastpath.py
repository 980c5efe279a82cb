"""ASGI fast path for the one hot read: `GET /api/v1/configs/{id}` answered from the in-memory latest cache.

Nodes poll this endpoint (p99 ≤ 5 ms at 1,000 req/s is the target, see bench/RESULTS.md). When the entry is
cached and the caller is authorized from memory, the answer (200 + body, or 304 on a matching If-None-Match)
is written directly, skipping FastAPI's routing and dependency solving. Anything else — cache miss, unknown
token, other paths or methods — goes to the FastAPI route, which gives the same answers (tests compare both).
"""

from __future__ import annotations

import re
from typing import Any

from base.settings import get_settings
from control.configs_cache import latest_cache, none_match
from service.auth import quick_read_principal
from service.deps import database_for
from service.guard import host_allowed

__all__ = ["ConfigFastPath"]

_PATH = re.compile(r"^/api/v1/configs/([0-9]{1,18})$")


class ConfigFastPath:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        m = _PATH.match(scope["path"])
        if m is None:
            await self.app(scope, receive, send)
            return
        settings = get_settings()
        headers = dict(scope["headers"])
        if not host_allowed(headers, settings):  # the app's guard answers it
            await self.app(scope, receive, send)
            return
        db = database_for(settings.resolved_database_url)
        entry = latest_cache.get(db, int(m.group(1)), settings.config_cache_s)
        client = scope.get("client") or ("", 0)
        if entry is None or quick_read_principal(headers, client[0], settings, db) is None:
            await self.app(scope, receive, send)
            return
        wanted = headers.get(b"if-none-match")
        out = [(b"etag", entry.etag.encode()), (b"cache-control", b"no-cache")]
        if wanted is not None and none_match(wanted.decode("latin-1"), entry.etag):
            await send({"type": "http.response.start", "status": 304, "headers": out})
            await send({"type": "http.response.body", "body": b""})
            return
        out += [(b"content-type", b"application/json"), (b"content-length", str(len(entry.body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": out})
        await send({"type": "http.response.body", "body": entry.body})
