"""The API's outer guard (pure ASGI, before routing): the Host allow-list, HEAD as a bodiless GET, and the size
limit of request bodies other than trace uploads.

* **Host** — a request whose `Host` header is not in `api_allowed_hosts` (plus the bind address of `tailtune
  serve`) gets 400: with open reads on localhost, a web page whose DNS name was re-pointed at 127.0.0.1 (DNS
  rebinding) would otherwise read the API through the victim's browser. The browser sends the page's own name
  as `Host`, which is not on the list.
* **HEAD** — answered as the GET of the same path with the body left out (same status and headers, so the
  same auth: a read token suffices).
* **Bodies** — JSON bodies are read whole by FastAPI, so they are capped at `api_max_body_bytes` (413; a
  declared `Content-Length` over it is refused before reading), and a body that sends nothing for
  `api_read_timeout_s` is answered 408 and its connection closed. Trace uploads (`POST`/`PUT /api/v1/traces`, and
  the console's `POST /traces/upload`) stream to disk under their own limit, `upload_max_bytes`.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from base.settings import Settings, get_settings

__all__ = ["RequestGuard", "host_allowed"]

#: Trace uploads: the API's and the console's (`service/console/pages/traces.py`).
_UPLOAD = re.compile(r"^/api/v1/traces(/[^/]+)?/?$|^/traces/upload$")
_ANY_ADDRESS = ("0.0.0.0", "::", "")


def _host_name(raw: str) -> str:
    raw = raw.strip().lower()
    if raw.startswith("["):  # [::1]:8000
        return raw[1 : raw.find("]")] if "]" in raw else raw
    if raw.count(":") == 1:
        raw = raw.partition(":")[0]
    return raw.rstrip(".")


def host_allowed(headers: list[tuple[bytes, bytes]] | dict[bytes, bytes], settings: Settings) -> bool:
    """Is the request's Host one the API answers? (A request without a Host header is not from a browser.)"""
    allowed = settings.api_allowed_hosts
    if "*" in allowed:
        return True
    items = headers.items() if isinstance(headers, dict) else headers
    raw = next((v for k, v in items if k == b"host"), None)
    if raw is None:
        return True
    name = _host_name(raw.decode("latin-1"))
    names = {_host_name(h) for h in allowed}
    if settings.api_host not in _ANY_ADDRESS:
        names.add(_host_name(settings.api_host))
    return name in names


def _error(
    status: int, code: str, detail: str, field: str | None, *, close: bool = False
) -> tuple[dict[str, Any], list[Any]]:
    body = json.dumps({"error": code, "detail": detail, "field": field, "problems": []}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    start = {"type": "http.response.start", "status": status, "headers": headers}
    return start, [{"type": "http.response.body", "body": body}]


class RequestGuard:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def _reply(
        self, send: Any, status: int, code: str, detail: str, field: str | None, *, close: bool = False
    ) -> None:
        start, bodies = _error(status, code, detail, field, close=close)
        await send(start)
        for b in bodies:
            await send(b)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = get_settings()
        if not host_allowed(scope["headers"], settings):
            await self._reply(
                send, 400, "bad_request", "this Host is not served (see api_allowed_hosts)", "Host"
            )
            return
        if scope["method"] == "HEAD":
            scope = {**scope, "method": "GET"}
            send = _without_body(send)
        if scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS") or (
            scope["method"] in ("POST", "PUT") and _UPLOAD.match(scope["path"])
        ):
            await self.app(scope, receive, send)
            return
        limit = settings.api_max_body_bytes
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        too_large = f"request body exceeds the limit of {limit} bytes (api_max_body_bytes)"
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reply(send, 413, "too_large", too_large, "body")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                async with asyncio.timeout(settings.api_read_timeout_s):
                    message = await receive()
            except TimeoutError:  # a stalled client: answer and free its connection
                stalled = f"no byte of the body arrived for {settings.api_read_timeout_s:g} s (api_read_timeout_s)"
                await self._reply(send, 408, "timeout", stalled, "body", close=True)
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._reply(send, 413, "too_large", too_large, "body")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            message: dict[str, Any] = await receive()
            return message

        await self.app(scope, replay, send)


def _without_body(send: Any) -> Any:
    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return wrapped
