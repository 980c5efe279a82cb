"""Test support: real memcached processes and a tiny real HTTP config service (ETag, bearer token, reports).

memcached is started by tailtune's one test launcher, `tests/servers/memcached_server.py` of the checkout these
tests live in (`pythonpath` in pyproject.toml puts the checkout's root on the path when they run alone)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.servers.cassandra_server import free_port
from tests.servers.memcached_server import MemcachedNode as Memcached

__all__ = ["ConfigService", "Memcached", "free_port", "mc_stats"]


def mc_stats(address: str) -> dict[str, int]:
    """memcached's `stats` (integer fields) over a fresh connection."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"stats\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    out: dict[str, int] = {}
    for line in buf.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "STAT":
            with contextlib.suppress(ValueError):
                out[parts[1]] = int(parts[2])
    return out


class ConfigService:
    """`GET /api/v1/configs/1` → the current document with an ETag (`If-None-Match` → 304), bearer token checked;
    `POST /api/v1/deployments/1/observations` → stores the JSON payload (201), or answers `report_status`.
    `stop()` closes the socket (connections are refused), `start()` opens the same port again."""

    def __init__(self, token: str = "s3cret") -> None:
        self.token = token
        self.port = free_port()
        self.doc: dict[str, Any] | None = None
        self.version = 0
        self.hits: dict[str, int] = {"200": 0, "304": 0, "401": 0, "404": 0}
        self.seen_if_none_match: list[str | None] = []
        self.reports: list[dict[str, Any]] = []
        self.report_status = 201
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.lock = threading.Lock()

    @property
    def config_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1/configs/1"

    @property
    def report_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1/deployments/1/observations"

    def publish(self, version: int, block: dict[str, Any], canary_fraction: float | None = None) -> None:
        """The next version, as the service's ConfigOut carries a tuned config (policy, params, target, and the
        canary's fraction when given)."""
        params = {k: v for k, v in block.items() if k != "mode"}
        config: dict[str, Any] = {"policy": block["mode"], "params": params,
                                  "target": {"json": {"memcached_client": block}}}
        if canary_fraction is not None:
            config["canary_fraction"] = canary_fraction
        with self.lock:
            self.version = version
            self.doc = {
                "deployment_id": 1,
                "version": version,
                "config": config,
                "source": "tuning",
                "job_id": None,
                "note": None,
                "published": {},
                "created_at": None,
            }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        svc = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if body:
                    self.wfile.write(body)

            def _authorized(self) -> bool:
                if self.headers.get("Authorization") != f"Bearer {svc.token}":
                    with svc.lock:
                        svc.hits["401"] += 1
                    self._send(401, b'{"detail":"bad token"}', {"Content-Type": "application/json"})
                    return False
                return True

            def do_GET(self) -> None:
                if not self._authorized():
                    return
                with svc.lock:
                    doc, version = svc.doc, svc.version
                    svc.seen_if_none_match.append(self.headers.get("If-None-Match"))
                if self.path != "/api/v1/configs/1" or doc is None:
                    with svc.lock:
                        svc.hits["404"] += 1
                    self._send(404, b'{"detail":"not found"}')
                    return
                etag = f'"1-{version}"'
                if self.headers.get("If-None-Match") == etag:
                    with svc.lock:
                        svc.hits["304"] += 1
                    self._send(304, headers={"ETag": etag})
                    return
                with svc.lock:
                    svc.hits["200"] += 1
                self._send(200, json.dumps(doc).encode(), {"ETag": etag, "Content-Type": "application/json"})

            def do_POST(self) -> None:
                if not self._authorized():
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with svc.lock:
                    status = svc.report_status
                    if status < 300:
                        svc.reports.append(json.loads(body))
                self._send(status, b"{}", {"Content-Type": "application/json"})

        return Handler

    def start(self) -> None:
        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join(5)
        self._server = None
