"""What `tailtune serve`'s server answers before (and while) a request reaches the app, over real sockets against a
real uvicorn with the API's protocol: huge URLs and headers, malformed requests, stalled heads and bodies — each
in the API's JSON error shape, the connection closed, a stalled upload's partial file removed.

No timing is asserted: each exchange reads until the server closes the connection, bounded by a generous socket
timeout.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import func, select

from base.settings import Settings, get_settings
from control.db import TraceRow
from service.server import server_config
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.cassandra_server import free_port
from tests.servers.tailtune_service import serving

API = "/api/v1"
BOUND_S = 30.0  # the longest any exchange may take before the test fails
READ_TIMEOUT_S = "1"


@dataclass
class Server:
    port: int
    settings: Settings


@pytest.fixture
def api_server(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """`tailtune serve`'s uvicorn config (app, fast path, protocol) on a free port, with a short read timeout."""
    monkeypatch.setenv("TAILTUNE_API_READ_TIMEOUT_S", READ_TIMEOUT_S)
    get_settings.cache_clear()
    settings = get_settings()
    port = free_port()
    with serving(server_config(settings, host="127.0.0.1", port=port, log_level="error"), bound_s=BOUND_S):
        yield Server(port, settings)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        out = json.loads(self.body)
        assert isinstance(out, dict)
        return out


def _read_to_eof(conn: socket.socket) -> bytes:
    out = b""
    while chunk := conn.recv(65536):
        out += chunk
    return out


def _parse(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return Answer(status, headers, body)


def _exchange(port: int, *parts: bytes) -> Answer:
    """Send `parts`, then wait — without sending more — until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as conn:
        for part in parts:
            conn.sendall(part)
        return _parse(_read_to_eof(conn))


def _assert_api_error(ans: Answer, status: int, code: str, field: str | None) -> dict[str, object]:
    assert ans.status == status, ans
    assert ans.headers["content-type"] == "application/json" and ans.headers["connection"] == "close"
    body = ans.json()
    assert set(body) == {"error", "detail", "field", "problems"}
    assert (body["error"], body["field"], body["problems"]) == (code, field, []), body
    return body


def _token(svc: Svc) -> bytes:
    return svc.write["Authorization"].encode()


def test_huge_urls_and_headers_get_the_json_error_shape(svc: Svc, api_server: Server) -> None:
    port = api_server.port
    huge_url = b"GET /api/v1/deployments?q=" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    body = _assert_api_error(_exchange(port, huge_url), 414, "too_large", "url")
    assert "api_max_url_bytes" in str(body["detail"])
    huge_header = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 100_000 + b"\r\n\r\n"
    body = _assert_api_error(_exchange(port, huge_header), 431, "too_large", "headers")
    assert "api_max_header_bytes" in str(body["detail"])
    many = b"".join(b"X-Field-%05d: %s\r\n" % (i, b"v" * 24) for i in range(3000))  # 3000 small ones, 120 KB
    ans = _exchange(port, b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + many + b"\r\n")
    _assert_api_error(ans, 431, "too_large", "headers")
    # a huge header sent in pieces is refused before it ends (it never ends here: the server must not wait)
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as conn:
        conn.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        for _ in range(20):
            conn.sendall(b"c" * 8192)
        _assert_api_error(_parse(_read_to_eof(conn)), 431, "too_large", "headers")
    _assert_api_error(_exchange(port, b"NOT AN HTTP REQUEST\r\n\r\n"), 400, "bad_request", None)
    # within the limits everything still works: a plain GET, and an upload whose body shares the head's reads
    with httpx.Client(base_url=f"http://127.0.0.1:{port}{API}", timeout=BOUND_S) as c:
        assert c.get("/health", headers={"X-Ok": "o" * 8000}).json() == {"status": "ok"}
        trace = b"request_id,ts,key,value_size\n" + b"0,1.0,k,10\n" * 30_000
        r = c.post("/traces?name=big.csv", content=trace, headers=svc.write)
        assert r.status_code == 202 and r.json()["size_bytes"] == len(trace)


def test_a_stalled_upload_is_answered_408_and_leaves_nothing(svc: Svc, api_server: Server) -> None:
    head = (
        b"POST /api/v1/traces?name=slow.csv HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: " + _token(svc) + b"\r\nContent-Length: 1000000\r\n\r\n"
    )
    ans = _exchange(api_server.port, head, b"request_id,ts,key,value_size\n" + b"0,1.0,k,10\n" * 500)
    body = _assert_api_error(ans, 408, "timeout", "body")
    assert "api_read_timeout_s" in str(body["detail"])
    tmp = api_server.settings.tmp_dir
    assert not tmp.exists() or list(tmp.iterdir()) == []  # the partial upload is gone
    assert not (svc.home / "uploads").exists() or list((svc.home / "uploads").iterdir()) == []
    with svc.db.session() as s:
        assert s.scalar(select(func.count()).select_from(TraceRow)) == 0
    # the same for a multipart upload stalled inside its file part
    boundary = b"B0undary"
    part = b"--" + boundary + b'\r\nContent-Disposition: form-data; name="file"; filename="t.csv"\r\n\r\n'
    head = (
        b"POST /api/v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + _token(svc) + b"\r\n"
        b"Content-Type: multipart/form-data; boundary=" + boundary + b"\r\nContent-Length: 1000000\r\n\r\n"
    )
    ans = _exchange(api_server.port, head, part + b"0,1.0,k,10\n" * 500)
    _assert_api_error(ans, 408, "timeout", "body")
    assert not tmp.exists() or list(tmp.iterdir()) == []


def test_a_stalled_json_body_is_answered_408(svc: Svc, api_server: Server) -> None:
    doc = json.dumps(memcached_deployment("slow", ["127.0.0.1:1"])).encode()
    head = (
        b"POST /api/v1/deployments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + _token(svc) + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: " + str(len(doc)).encode() + b"\r\n\r\n"
    )
    _assert_api_error(_exchange(api_server.port, head, doc[:10]), 408, "timeout", "body")
    with httpx.Client(base_url=f"http://127.0.0.1:{api_server.port}{API}", timeout=BOUND_S) as c:
        assert c.get("/deployments", headers=svc.read).json() == []


def test_a_stalled_head_is_answered_408_and_a_silent_connection_closed(api_server: Server) -> None:
    ans = _exchange(api_server.port, b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    body = _assert_api_error(ans, 408, "timeout", None)
    assert "api_read_timeout_s" in str(body["detail"])
    with socket.create_connection(("127.0.0.1", api_server.port), timeout=BOUND_S) as conn:
        assert _read_to_eof(conn) == b""  # nothing was asked: closed without an answer


def test_probes_are_served_at_the_root_and_under_the_api(svc: Svc, api_server: Server) -> None:
    """`/health/live`, `/health/ready`, `/livez`, `/readyz` at the root answer as `/api/v1/health[/ready]` do, over
    the real server (fast path and guard included); readiness takes the same read auth wherever it is served."""
    with httpx.Client(base_url=f"http://127.0.0.1:{api_server.port}", timeout=BOUND_S) as c:
        for path in ("/health/live", "/livez", f"{API}/health", f"{API}/health/live"):
            r = c.get(path)
            assert r.status_code == 200 and r.json() == {"status": "ok"}, path
        want = c.get(f"{API}/health/ready", headers=svc.read)
        assert want.status_code in (200, 503)
        for path in ("/health/ready", "/readyz"):
            r = c.get(path, headers=svc.read)
            assert r.status_code == want.status_code, path
            assert {k["name"] for k in r.json()["checks"]} == {k["name"] for k in want.json()["checks"]}
