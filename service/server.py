"""The server `tailtune serve` runs: uvicorn with the app behind the config fast path, and the HTTP/1.1 protocol
`ApiHttpProtocol` — uvicorn's httptools protocol with the API's limits and its JSON error shape on what the server
answers before a request reaches the app:

* a request target longer than `api_max_url_bytes` → 414; header fields (names and values) over
  `api_max_header_bytes` → 431. httptools has no limit of its own on header fields; they are counted as they
  arrive, so a huge header is refused once the limit (plus at most one read) has arrived, never held whole;
* a request head not complete `api_read_timeout_s` after the connection opened (first request) or after it began
  (later ones) → 408 — a connection that never sent a byte is closed without an answer. Stalled bodies are the
  app's: `service/guard.py` and `service/traces/upload.py` answer them 408;
* anything else httptools cannot parse → 400 (uvicorn's own answer is plain text).

Each answer is `{"error", "detail", "field", "problems"}` with `Connection: close`. The connection then closes
gently: the server stops writing and discards what the client still sends until it closes its side (at most
`api_read_timeout_s`, 1 MiB), so a client still sending its huge URL reads the answer instead of a reset.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import uvicorn
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from base.settings import Settings, get_settings
from service.configs.fastpath import ConfigFastPath
from service.errors import HTTP_CODES, error_body
from service.main import create_app
from service.metrics.endpoint import start_metrics_port

__all__ = ["ApiHttpProtocol", "server_config", "start_metrics_port"]

#: The request line around the target (method, version, spaces, CRLF), for the bound on an unfinished head.
_LINE_SLACK = 64
#: What a refused client may still send (discarded) before its connection is closed without waiting.
_LINGER_BYTES = 1024**2


class _Refused(Exception):
    """Raised from a parser callback to stop parsing; the refusal to send is on the protocol."""


class ApiHttpProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        settings = get_settings()
        self.max_url = settings.api_max_url_bytes
        self.max_headers = settings.api_max_header_bytes
        self.head_timeout = settings.api_read_timeout_s
        #: where the parser is: between requests, inside a request head, past the head (body, app at work)
        self.phase: Literal["idle", "head", "body"] = "idle"
        self.header_bytes = 0  # of the header fields of the current head, as they completed
        self.open_bytes = 0  # bytes read while the current head stayed unfinished
        self.message_done = False  # a request ended inside the read being parsed
        self.refusal: tuple[int, str, str | None] | None = None
        self.head_timer: asyncio.TimerHandle | None = None
        self.discarded: int | None = None  # bytes read after a refusal (None: not refused)
        self.linger_timer: asyncio.TimerHandle | None = None

    # --- connection ------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        if self.linger_timer is not None:
            self.linger_timer.cancel()
            self.linger_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.discarded is not None:  # refused: drain until the client closes
            self.discarded += len(data)
            if self.discarded > _LINGER_BYTES:
                self.transport.close()
            return
        began_open = self.phase != "body"
        self.message_done = False
        super().data_received(data)
        if self.transport.is_closing() or self.refusal is not None:
            return
        # The whole read was head (it started in one, the head is still unfinished, no request ended in it):
        # this bounds a header field httptools is still collecting, which no callback has reported yet.
        if began_open and self.phase == "head" and not self.message_done:
            self.open_bytes += len(data)
            if self.open_bytes > self.max_url + self.max_headers + _LINE_SLACK:
                self._refuse(431, self._headers_too_large(), "headers")

    # --- parser callbacks ------------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.phase = "head"
        self.header_bytes = 0
        self.open_bytes = 0
        if self.head_timer is None:
            self.head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.max_url:
            self.refusal = (414, f"the request target is longer than {self.max_url} bytes (api_max_url_bytes)", "url")
            raise _Refused

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value) + 4  # "name: value\r\n"
        if self.header_bytes > self.max_headers:
            self.refusal = (431, self._headers_too_large(), "headers")
            raise _Refused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        self.phase = "body"
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.phase = "idle"
        self.message_done = True
        super().on_message_complete()

    # --- answers ---------------------------------------------------------------------------------------
    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request httptools cannot parse — or to one a callback above refused."""
        status, detail, field = self.refusal or (400, "malformed HTTP request; the API speaks HTTP/1.1", None)
        self._send_error(status, detail, field)

    def _headers_too_large(self) -> str:
        return f"the request's header fields exceed {self.max_headers} bytes (api_max_header_bytes)"

    def _refuse(self, status: int, detail: str, field: str | None) -> None:
        self.refusal = (status, detail, field)
        self._send_error(status, detail, field)

    def _send_error(self, status: int, detail: str, field: str | None) -> None:
        self._stop_head_timer()
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:  # an answer is being written
            self.transport.close()
            return
        body = json.dumps(error_body(HTTP_CODES.get(status, "bad_request"), detail, field)).encode()
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content += [name, b": ", value, b"\r\n"]
        content += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n",
            b"\r\n",
            body,
        ]
        self.transport.write(b"".join(content))
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()  # the answer, then FIN; an unread request would turn close() into a reset
        self.discarded = 0
        self.linger_timer = self.loop.call_later(self.head_timeout, self.transport.close)

    # --- head timeout ----------------------------------------------------------------------------------
    def _stop_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if self.transport.is_closing() or self.phase == "body":
            return
        if self.cycle is not None and not self.cycle.response_complete:  # still answering the previous request
            self.head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)
            return
        if self.phase == "idle":  # nothing of a request arrived: just close
            self.transport.close()
            return
        detail = f"the request head did not arrive within {self.head_timeout:g} s (api_read_timeout_s)"
        self._refuse(408, detail, None)


def server_config(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    access_log: bool = False,
    log_level: str = "info",
) -> uvicorn.Config:
    """uvicorn's config for the API: the app wrapped in the config fast path (outermost), `ApiHttpProtocol`."""
    return uvicorn.Config(
        ConfigFastPath(create_app(settings, fast_path=False)),
        host=host or settings.api_host,
        port=port or settings.api_port,
        log_level=log_level,
        access_log=access_log,
        http=ApiHttpProtocol,
    )
