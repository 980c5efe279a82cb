"""A full TAILTUNE_HOME, for real: the home is a small tmpfs mounted for the test and filled up. Uploads and JSON
writes answer 507 in the API's error shape (what is full, relative; the bytes free) and leave nothing behind;
readiness reports the free space against `min_free_bytes`.
"""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from base.settings import get_settings
from control.db import DeploymentRow, TraceRow
from control.storage import disk_full_cause, free_bytes
from tests.app_fixtures import Svc, memcached_deployment

API = "/api/v1"
FS_BYTES = 16 * 1024**2
TRACE_HEAD = b"request_id,ts,key,value_size\n"


@pytest.fixture
def tailtune_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """TAILTUNE_HOME on its own 16 MiB tmpfs (mounted here, unmounted after)."""
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES},mode=0700", "tmpfs", str(home)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
    monkeypatch.setenv("TAILTUNE_HOME", str(home))
    get_settings.cache_clear()
    try:
        yield home
    finally:
        get_settings.cache_clear()
        subprocess.run(["umount", "--lazy", str(home)], check=True)


def _fill(home: Path, leave: int = 0) -> Path:
    """Fill the filesystem of `home` until it is full, then free about `leave` bytes again."""
    filler = home / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    if leave:
        size = filler.stat().st_size
        with filler.open("r+b") as fh:
            fh.truncate(size - leave)
    return filler


def _leftovers(svc: Svc) -> list[str]:
    return sorted(
        str(p.relative_to(svc.home))
        for p in svc.home.rglob("*")
        if p.is_file() and p.parts[len(svc.home.parts)] in ("tmp", "uploads")
    )


def _check_507(svc: Svc, r: httpx.Response, where: str) -> dict[str, Any]:
    assert r.status_code == 507, r.text
    body: dict[str, Any] = r.json()
    assert set(body) == {"error", "detail", "field", "problems"} and body["error"] == "insufficient_storage"
    (problem,) = body["problems"]
    assert str(problem["path"]).startswith(where), problem
    free = free_bytes(svc.home)
    assert isinstance(problem["free_bytes"], int) and 0 <= problem["free_bytes"] <= free + 65536
    assert f"{problem['free_bytes']} bytes free" in body["detail"] and where in body["detail"]
    assert str(svc.home.parent) not in r.text and "\"/" not in r.text  # no absolute server path
    return body


def test_uploads_on_a_full_disk_answer_507_and_leave_nothing(svc: Svc) -> None:
    _fill(svc.home, leave=256 * 1024)
    trace = TRACE_HEAD + b"0,1.0,key,10\n" * 80_000  # about 1 MiB: more than is free

    def streamed() -> Iterator[bytes]:  # no Content-Length: the disk fills while the body is written
        for i in range(0, len(trace), 65536):
            yield trace[i : i + 65536]

    r = svc.client.post(f"{API}/traces?name=big.csv", content=streamed(), headers=svc.write)
    _check_507(svc, r, "TAILTUNE_HOME/tmp/")
    r = svc.client.post(f"{API}/traces", files={"file": ("big.csv", trace)}, headers=svc.write)
    _check_507(svc, r, "TAILTUNE_HOME/tmp/")
    # a declared size that does not fit is refused before a byte is written
    r = svc.client.post(f"{API}/traces?name=big.csv", content=trace, headers=svc.write)
    body = _check_507(svc, r, "TAILTUNE_HOME/tmp/")
    assert f"{len(trace)} bytes do not fit" in str(body["detail"])
    assert _leftovers(svc) == []
    with svc.db.session() as s:
        assert s.scalar(select(func.count()).select_from(TraceRow)) == 0
    # once there is room again, the same upload goes through
    (svc.home / "filler").unlink()
    r = svc.client.post(f"{API}/traces?name=big.csv", content=trace, headers=svc.write)
    assert r.status_code == 202 and r.json()["size_bytes"] == len(trace)


def test_json_writes_on_a_full_disk_answer_507_and_keep_the_db_whole(svc: Svc) -> None:
    """The SQLite metadata DB lives in TAILTUNE_HOME: with the disk full its writes fail (SQLITE_FULL)."""
    _fill(svc.home)
    created = 0
    refused: httpx.Response | None = None
    servers = [f"10.0.{k // 200}.{k % 200}:11211" for k in range(256)]  # about 5 KB a row
    for i in range(200):
        doc = memcached_deployment(f"full-{i}", servers)
        r = svc.client.post(f"{API}/deployments", json=doc, headers=svc.write)
        assert r.status_code in (201, 507), r.text
        if r.status_code == 507:
            refused = r
            break
        created += 1
    assert refused is not None, "the DB never ran out of space"
    _check_507(svc, refused, "TAILTUNE_HOME/tailtune.db")
    with svc.db.session() as s:  # nothing half-written: exactly the deployments answered 201
        assert s.scalar(select(func.count()).select_from(DeploymentRow)) == created
    (svc.home / "filler").unlink()
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment("after", ["h:1"]), headers=svc.write)
    assert r.status_code == 201, r.text


def test_readiness_reports_free_space_against_the_setting(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.handlers import default_handlers
    from jobs.worker import Worker

    Worker(svc.settings, svc.db, "w-disk", handlers=default_handlers(), schedule=False).beat()
    monkeypatch.setenv("TAILTUNE_MIN_FREE_BYTES", str(4 * 1024**2))
    get_settings.cache_clear()
    r = svc.client.get(f"{API}/health/ready", headers=svc.read)
    assert r.status_code == 200, r.text
    disk = next(c for c in r.json()["checks"] if c["name"] == "disk")
    assert disk["ok"] is True and "minimum 4194304" in disk["detail"]
    _fill(svc.home, leave=1024**2)
    r = svc.client.get(f"{API}/health/ready", headers=svc.read)
    assert r.status_code == 503 and r.json()["ready"] is False
    disk = next(c for c in r.json()["checks"] if c["name"] == "disk")
    free = free_bytes(svc.home)
    assert disk["ok"] is False and f"TAILTUNE_HOME: {free} bytes free (minimum 4194304" in disk["detail"]
    assert str(svc.home) not in r.text
    (svc.home / "filler").unlink()
    r = svc.client.get(f"{API}/health/ready", headers=svc.read)
    assert r.status_code == 200 and r.json()["ready"] is True


def test_a_full_database_server_is_told_from_other_database_errors() -> None:
    """PostgreSQL's `disk_full` (SQLSTATE 53100), as psycopg raises it and SQLAlchemy wraps it."""
    import psycopg.errors
    from sqlalchemy.exc import OperationalError

    full = OperationalError("INSERT ...", {}, psycopg.errors.DiskFull("could not extend file"))
    other = OperationalError("INSERT ...", {}, psycopg.errors.AdminShutdown("terminating connection"))
    assert disk_full_cause(full) is full.orig and disk_full_cause(other) is None


def test_a_capture_on_a_full_disk_names_the_path_and_the_free_bytes(svc: Svc) -> None:
    import threading

    from jobs import nightly
    from jobs.context import JobContext
    from jobs.worker import Worker
    from kinds.memcached.capture import CaptureDiskFull, CaptureTarget, capture_memcached
    from tests.servers.hostile_memcached import hostile_memcached

    def ingest_only(ctx: JobContext) -> dict[str, Any]:
        assert ctx.deployment_id is not None
        dep_id = ctx.deployment_id
        return ctx.step("ingest", lambda: nightly._step_ingest(ctx, dep_id))

    with hostile_memcached(watch="flood") as server:  # well-formed watch lines as fast as they are read
        # the capture itself: the error names the file and the bytes free, and nothing is left
        out = svc.home / "captures" / "cap.log"
        with pytest.raises(CaptureDiskFull) as caught:
            capture_memcached([CaptureTarget(server.address, server.host, server.port)], out, duration_s=60,
                              stop=threading.Event())
        assert caught.value.permanent and caught.value.path == out
        assert f"cannot write the capture {out}: no space left on its filesystem (" in str(caught.value)
        assert "bytes free" in str(caught.value) and caught.value.free_bytes is not None
        assert list(out.parent.iterdir()) == []
        # a job's capture: failed for good, the path relative to TAILTUNE_HOME, nothing left behind
        dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("mc-full", [server.address]),
                              headers=svc.write).json()
        job = svc.client.post(f"{API}/jobs", json={"deployment_id": dep["id"], "capture": {"duration_s": 60}},
                              headers=svc.write).json()
        worker = Worker(svc.settings, svc.db, "w-full", handlers={"nightly": ingest_only}, schedule=False)
        assert worker.run_once() == "failed"
    got = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()
    assert got["attempts"] == 1, got
    assert "capture: no space left on the filesystem holding TAILTUNE_HOME/uploads/" in got["error"], got["error"]
    assert "bytes free" in got["error"] and str(svc.home) not in got["error"]
    assert _leftovers(svc) == [] and svc.client.get(f"{API}/traces", headers=svc.read).json() == []


def test_an_analysis_on_a_full_disk_names_the_file_and_the_free_bytes(tailtune_home: Path) -> None:
    """The analysis's writer (`analysis.output.write_outputs`, what `tailtune analyze` and the analysis job
    write with) on the full tmpfs: a `DiskFull` naming the output file and the bytes free, nothing left."""
    import pandas as pd

    from analysis.output import write_outputs
    from control.storage import DiskFull, raise_if_disk_full

    settings = get_settings()
    out = settings.home_dir / "analyses" / "a1"
    _fill(tailtune_home, leave=64 * 1024)
    tables = {"per_key": pd.DataFrame({"k": range(200_000), "n": range(200_000)})}  # about 3 MiB of Parquet
    with pytest.raises(OSError) as raised:
        write_outputs(out, settings.tmp_dir, {"schema": "x"}, tables, "<html></html>")
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(out / "tables" / "per_key.parquet")
    with pytest.raises(DiskFull) as full:
        raise_if_disk_full(raised.value, settings)
    message = str(full.value)
    assert "[Errno 28]" not in message and "\n" not in message
    where = "TAILTUNE_HOME/analyses/a1/tables/per_key.parquet"
    assert message.startswith(f"no space left on the filesystem holding {where}: ")
    assert f"{full.value.free_bytes} bytes free" in message and 0 <= (full.value.free_bytes or 0) <= 128 * 1024
    assert not out.exists() and list(settings.tmp_dir.iterdir()) == []


def test_a_job_that_fills_the_disk_names_the_path_and_the_free_bytes(svc: Svc) -> None:
    """Any step of a job (here one that writes a file bigger than what is free, for real): the job's error names
    the filesystem (the file, when the error has it) and the bytes free, not a bare `OSError: [Errno 28]`."""
    from control.db import JobRow
    from control.queue import enqueue
    from jobs.context import JobContext
    from jobs.worker import Worker

    def fills(ctx: JobContext) -> dict[str, Any]:
        path = svc.home / "scratch.bin"
        try:
            with path.open("wb") as fh:
                fh.write(b"\0" * (2 * 1024**2))
        finally:  # what a step does: nothing half-written (and room again for the job's own record)
            path.unlink(missing_ok=True)
        return {}

    _fill(svc.home, leave=512 * 1024)  # room for the DB's writes, not for the step's 2 MiB
    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, "analyze", {}, max_attempts=1).id
    worker = Worker(svc.settings, svc.db, "w-full", handlers={"analyze": fills}, schedule=False)
    assert worker.run_once() == "failed"
    with svc.db.session() as s:
        job = s.get(JobRow, job_id)
        assert job is not None and job.error is not None
        error = job.error
    assert "[Errno 28]" not in error, error
    assert error.startswith("DiskFull: no space left on the filesystem holding TAILTUNE_HOME: "), error
    assert "bytes free" in error and str(svc.home) not in error
