"""What the real server (`tailtune serve`'s uvicorn, app and protocol) answers when the request fails: an unexpected
error is a JSON 500 with `Connection: close` (a keep-alive client is told, then the connection closes, and a new
one is served); a metadata DB that cannot be reached — a real PostgreSQL server stopped mid-test — is a 503 with
a one-line reason on every route, as readiness reports it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from base.settings import get_settings
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.postgres_server import PostgresMissing, PostgresServer
from tests.service.test_server import BOUND_S, Answer, Server, api_server

__all__ = ["api_server"]  # the fixture, used below

API = "/api/v1"
SHAPE = {"error", "detail", "field", "problems"}


class KeepAlive:
    """A raw HTTP/1.1 client on one connection: requests one after the other, answers read by Content-Length."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = socket.create_connection(("127.0.0.1", port), timeout=BOUND_S)
        self.token = token
        self.buf = b""

    def close(self) -> None:
        self.conn.close()

    def request(self, method: str, path: str, body: dict[str, object] | None = None) -> Answer:
        data = json.dumps(body).encode() if body is not None else b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.conn.sendall(head.encode() + data)
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head_bytes, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        length = int(headers["content-length"])
        while len(self.buf) < length:
            self._more()
        payload, self.buf = self.buf[:length], self.buf[length:]
        return Answer(int(lines[0].split()[1]), headers, payload)

    def closed_by_server(self) -> bool:
        try:
            return self.conn.recv(1) == b""
        except ConnectionResetError:
            return True

    def _more(self) -> None:
        chunk = self.conn.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk


def _token(svc: Svc) -> str:
    return svc.write["Authorization"].removeprefix("Bearer ")


def test_a_500_says_connection_close_and_a_new_connection_is_served(
    svc: Svc, api_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from control import queue

    def broken(*_: object, **__: object) -> object:  # a bug in the route's code
        raise RuntimeError("a bug")

    monkeypatch.setattr(queue, "list_jobs", broken)
    client = KeepAlive(api_server.port, _token(svc))
    try:
        ok = client.request("GET", f"{API}/deployments")  # keep-alive works: a second request on the connection
        assert ok.status == 200 and ok.headers.get("connection", "keep-alive") != "close"
        ans = client.request("GET", f"{API}/jobs")
        assert ans.status == 500 and set(ans.json()) == SHAPE and ans.json()["error"] == "internal"
        assert ans.headers.get("connection") == "close", ans.headers
        assert "a bug" not in ans.body.decode() and "Traceback" not in ans.body.decode()
        assert client.closed_by_server()
    finally:
        client.close()
    again = KeepAlive(api_server.port, _token(svc))
    try:
        assert again.request("GET", f"{API}/deployments").status == 200
    finally:
        again.close()


# --- PostgreSQL stopped mid-test ---------------------------------------------------------------------------------


@pytest.fixture
def db_backend() -> str:
    return "postgresql"


@pytest.fixture
def stoppable_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test alone (the session's stays up for the others)."""
    try:
        server = PostgresServer()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def database_url(
    tailtune_home: Path, stoppable_postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    url = stoppable_postgres.url(stoppable_postgres.create_database())
    monkeypatch.setenv("TAILTUNE_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url


def test_with_postgresql_down_every_route_answers_503_with_the_reason(
    svc: Svc, api_server: Server, stoppable_postgres: PostgresServer
) -> None:
    client = KeepAlive(api_server.port, _token(svc))
    try:
        assert client.request("POST", f"{API}/deployments", memcached_deployment("m1", ["127.0.0.1:1"])).status == 201
        assert client.request("GET", f"{API}/jobs").status == 200
    finally:
        client.close()
    stoppable_postgres.stop()
    requests: list[tuple[str, str, dict[str, object] | None]] = [
        ("GET", f"{API}/jobs", None),
        ("GET", f"{API}/jobs/1", None),
        ("GET", f"{API}/deployments", None),
        ("GET", f"{API}/deployments/1", None),
        ("POST", f"{API}/deployments", memcached_deployment("m2", ["127.0.0.1:1"])),
        ("GET", f"{API}/schedules", None),
        ("POST", f"{API}/jobs", {"deployment_id": 1}),
        ("GET", f"{API}/traces", None),
        ("GET", f"{API}/configs/1/versions", None),
    ]
    for method, path, body in requests:
        client = KeepAlive(api_server.port, _token(svc))
        try:
            ans = client.request(method, path, body)
        finally:
            client.close()
        assert ans.status == 503, (method, path, ans.status, ans.body[:300])
        doc = ans.json()
        assert set(doc) == SHAPE and doc["error"] == "unavailable", doc
        detail = str(doc["detail"])
        assert detail.startswith("the metadata DB is unavailable: OperationalError: ") and "\n" not in detail
        assert "Traceback" not in detail and ans.headers.get("retry-after") == "5"
    client = KeepAlive(api_server.port, _token(svc))
    try:  # readiness reports the same reason
        ready = client.request("GET", f"{API}/health/ready")
    finally:
        client.close()
    assert ready.status == 503
    db_check = next(c for c in ready.json()["checks"] if c["name"] == "database")  # type: ignore[attr-defined]
    assert db_check["ok"] is False and db_check["detail"].startswith("OperationalError: ")
