"""Trace uploads: raw and multipart streaming, size limit, names never paths, ingest by the worker,
concurrency.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from control.db import JobRow, TraceRow
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc
from tests.servers.cassandra_server import free_port

pytestmark = pytest.mark.db_backends  # each test runs on SQLite and on PostgreSQL

API = "/api/v1"
GOOD = "request_id,ts,key,value_size\n0,1.0,a,10\n0,1.0,b,20\n1,2.0,a,10\n"
BAD = "request_id,ts,key,value_size\n0,1.0,a,10\n1,2.0,b,-5\n"


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def _drain(svc: Svc) -> None:
    w = Worker(svc.settings, svc.db, "w-test", handlers=default_handlers(), schedule=False)
    while w.run_once() is not None:
        pass


def test_raw_upload_is_ingested_by_the_worker(svc: Svc) -> None:
    r = svc.client.post(f"{API}/traces?name=night.csv", content=GOOD.encode(), headers=svc.write)
    assert r.status_code == 202, r.text
    t = r.json()
    assert t["status"] == "uploaded" and t["size_bytes"] == len(GOOD)
    assert t["sha256"] == hashlib.sha256(GOOD.encode()).hexdigest()
    assert _files(svc.home / "uploads") == [Path(p).name for p in _files(svc.home / "uploads")]
    stored = list((svc.home / "uploads").iterdir())
    assert len(stored) == 1 and stored[0].read_text() == GOOD and "night" not in stored[0].name
    _drain(svc)
    got = svc.client.get(f"{API}/traces/{t['id']}", headers=svc.read).json()
    assert got["status"] == "ready" and got["dataset_id"] is not None
    assert t["format"] == "auto" and got["format"] == got["manifest"]["source"]["format"] == "csv"  # the detected one
    assert got["manifest"]["id"] == got["dataset_id"] and got["manifest"]["name"] == "night.csv"
    assert _files(svc.home / "uploads") == []  # the dataset holds the data now
    job = svc.client.get(f"{API}/jobs/{t['job_id']}", headers=svc.read).json()
    assert job["status"] == "succeeded" and [s["name"] for s in job["steps"]] == ["ingest"]
    assert svc.client.delete(f"{API}/traces/{t['id']}", headers=svc.write).status_code == 204
    assert not (svc.settings.datasets_dir / got["dataset_id"]).exists()
    assert svc.client.get(f"{API}/traces", headers=svc.read).json() == []


def test_multipart_upload_uses_the_client_name_only_as_a_label(svc: Svc) -> None:
    files = {"file": ("../../../etc/evil.csv", GOOD.encode(), "text/csv")}
    r = svc.client.post(f"{API}/traces", files=files, data={"format": "csv"}, headers=svc.write)
    assert r.status_code == 202, r.text
    t = r.json()
    assert t["name"] == "evil.csv" and t["format"] == "csv" and t["size_bytes"] == len(GOOD)
    stored = list((svc.home / "uploads").iterdir())
    assert len(stored) == 1 and stored[0].read_bytes() == GOOD.encode()
    assert not (svc.home.parent / "etc").exists()


def test_rejected_uploads_leave_nothing(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    from base.settings import get_settings

    monkeypatch.setenv("TAILTUNE_UPLOAD_MAX_BYTES", "100")
    get_settings.cache_clear()
    big = b"x" * 101
    r = svc.client.post(f"{API}/traces", content=big, headers=svc.write)
    assert r.status_code == 413 and r.json()["field"] == "file"
    r = svc.client.post(f"{API}/traces", files={"file": ("a.csv", big)}, headers=svc.write)
    assert r.status_code == 413
    r = svc.client.post(f"{API}/traces", content=b"", headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "file"
    r = svc.client.post(f"{API}/traces?format=excel", content=b"abc", headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "format"
    r = svc.client.post(f"{API}/traces?deployment_id=77", content=b"abc", headers=svc.write)
    assert r.status_code == 404 and r.json()["field"] == "deployment_id"
    r = svc.client.post(f"{API}/traces", files={"other": ("a.csv", b"abc")}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "file"
    r = svc.client.post(f"{API}/traces", content=b"abc")
    assert r.status_code == 401
    assert _files(svc.settings.tmp_dir) == [] and _files(svc.home / "uploads") == []
    with svc.db.session() as s:
        assert s.scalar(select(func.count()).select_from(TraceRow)) == 0
        assert s.scalar(select(func.count()).select_from(JobRow)) == 0


def test_bad_trace_fails_with_line_and_field(svc: Svc) -> None:
    r = svc.client.post(f"{API}/traces?name=bad.csv", content=BAD.encode(), headers=svc.write)
    t = r.json()
    _drain(svc)
    got = svc.client.get(f"{API}/traces/{t['id']}", headers=svc.read).json()
    assert got["status"] == "failed" and got["dataset_id"] is None
    assert got["error"]["problems"][0] == {
        "file": "bad.csv",
        "line": 3,
        "field": "value_size",
        "problem": 'expected non-negative integer, got "-5"',
    }
    job = svc.client.get(f"{API}/jobs/{t['job_id']}", headers=svc.read).json()
    assert job["status"] == "failed" and job["attempts"] == 1  # bad input is not retried
    assert _files(svc.home / "uploads") == [] and _files(svc.settings.datasets_dir) == []


@pytest.fixture
def live_server(svc: Svc) -> Iterator[str]:
    import uvicorn

    from service.main import create_app

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(svc.settings), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_twenty_concurrent_uploads_land_intact(svc: Svc, live_server: str) -> None:
    bodies = [os.urandom(256 * 1024 + i * 1000) for i in range(20)]
    results: list[dict[str, object] | None] = [None] * 20

    def send(i: int) -> None:
        def chunks() -> Iterator[bytes]:
            for k in range(0, len(bodies[i]), 65536):
                yield bodies[i][k : k + 65536]

        with httpx.Client(timeout=60) as c:
            if i % 2:
                r = c.post(f"{live_server}{API}/traces?name=t{i}", content=chunks(), headers=svc.write)
            else:
                r = c.post(
                    f"{live_server}{API}/traces", files={"file": (f"t{i}", bodies[i])}, headers=svc.write
                )
        results[i] = r.json() if r.status_code == 202 else {"_failed": r.text}

    threads = [threading.Thread(target=send, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with svc.db.session() as s:
        rows = {r.name: (r.size_bytes, r.sha256, r.upload_path) for r in s.scalars(select(TraceRow))}
    assert len(rows) == 20
    for i, body in enumerate(bodies):
        res = results[i]
        assert res is not None and "_failed" not in res, res
        size, sha, path = rows[f"t{i}"]
        assert size == len(body) and sha == hashlib.sha256(body).hexdigest()
        assert path is not None and Path(path).read_bytes() == body
    assert _files(svc.settings.tmp_dir) == []


def test_a_write_is_visible_to_the_next_request(svc: Svc, live_server: str) -> None:
    """The session commits before the response is sent (read-your-writes over a real HTTP server)."""
    from tests.app_fixtures import memcached_deployment

    with httpx.Client(base_url=f"{live_server}{API}", headers=svc.write, timeout=30) as c:
        for i in range(15):
            dep = c.post("/deployments", json=memcached_deployment(f"rw{i}", ["h:1"])).json()
            r = c.post(
                f"/configs/{dep['id']}/versions", json={"config": {"policy": "batching"}, "publish": False}
            )
            assert r.status_code == 201, r.text
            r = c.get(f"/configs/{dep['id']}")
            assert r.status_code == 200 and r.json()["version"] == 1


def test_truncated_bodies_are_rejected(svc: Svc) -> None:
    boundary = "XyZ123"
    head = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"t.csv\"\r\n"
        "Content-Type: text/csv\r\n\r\n"
    ).encode()
    whole = head + GOOD.encode() * 100 + f"\r\n--{boundary}--\r\n".encode()
    ctype = {"content-type": f"multipart/form-data; boundary={boundary}"}
    for cut in (len(head) + 5000, len(whole) - 3):  # mid-file; inside the closing boundary
        r = svc.client.post(f"{API}/traces", content=whole[:cut], headers={**svc.write, **ctype})
        assert r.status_code == 422 and r.json()["field"] == "body", r.text
        assert "closing boundary" in r.json()["detail"]
    r = svc.client.post(f"{API}/traces", content=whole, headers={**svc.write, **ctype})
    assert r.status_code == 202 and r.json()["size_bytes"] == len(GOOD) * 100
    with svc.db.session() as s:
        assert s.scalar(select(func.count()).select_from(TraceRow)) == 1
    assert len(_files(svc.home / "uploads")) == 1
