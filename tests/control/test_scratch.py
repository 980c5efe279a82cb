"""kill -9 leftovers: a dead process's scratch (half-written staging, upload .part files) is swept at the next
start-up; a live process's scratch is never touched; unowned leftovers and orphan uploads go once old."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from base.settings import Settings
from control.scratch import LOCK_SUFFIX, claim_scratch, sweep_orphan_uploads, sweep_tmp
from tests.app_fixtures import FAST_ENV, Svc


def _spawn_worker(svc: Svc, name: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, **FAST_ENV, "TAILTUNE_HOME": str(svc.home)}
    return subprocess.Popen(
        [sys.executable, "-m", "tailtune", "worker", "--no-scheduler", "--id", name],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def _scratch_of(svc: Svc, pid: int, timeout: float = 60.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p for p in (svc.home / "tmp").glob(f"worker-*-{pid}-*") if p.is_dir()]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"worker {pid} made no scratch folder")


@pytest.fixture
def workers(svc: Svc) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)


def test_a_killed_workers_scratch_is_swept_a_live_ones_is_not(
    svc: Svc, workers: list[subprocess.Popen[bytes]]
) -> None:
    dead, live = _spawn_worker(svc, "dead"), _spawn_worker(svc, "live")
    workers += [dead, live]
    dead_dir, live_dir = _scratch_of(svc, dead.pid), _scratch_of(svc, live.pid)
    for d in (dead_dir, live_dir):  # half-written staging and an upload in progress
        (d / "ingest-0123456789ab").mkdir()
        (d / "ingest-0123456789ab" / "part-00000.parquet").write_bytes(b"x" * 1000)
        (d / "upload-abc.part").write_bytes(b"y" * 1000)
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait(timeout=30)
    settings = Settings()  # the next process to start on this home
    mine = claim_scratch(settings, "api")
    assert not dead_dir.exists() and not Path(f"{dead_dir}{LOCK_SUFFIX}").exists()
    assert (live_dir / "upload-abc.part").exists() and (live_dir / "ingest-0123456789ab").is_dir()
    assert settings.tmp_dir == mine and mine.parent == svc.home / "tmp"
    live.send_signal(signal.SIGTERM)
    live.wait(timeout=30)
    assert not live_dir.exists()  # a clean exit removes its own scratch


def test_unowned_leftovers_go_once_old(svc: Svc) -> None:
    tmp = svc.home / "tmp"
    (tmp / "ingest-old").mkdir(parents=True)
    (tmp / "ingest-old" / "part-00000.parquet").write_bytes(b"x")
    (tmp / "upload-old.part").write_bytes(b"x")
    (tmp / "ingest-fresh").mkdir()
    old = time.time() - 2 * svc.settings.tmp_unowned_max_age_s
    for p in (tmp / "ingest-old" / "part-00000.parquet", tmp / "ingest-old", tmp / "upload-old.part"):
        os.utime(p, (old, old))
    gone = sweep_tmp(svc.settings)
    assert sorted(p.name for p in gone) == ["ingest-old", "upload-old.part"]
    assert (tmp / "ingest-fresh").is_dir()


def test_orphan_uploads_go_once_old(svc: Svc) -> None:
    r = svc.client.post("/api/v1/traces?name=t.csv", content=b"request_id,ts,key\n0,1,a\n", headers=svc.write)
    assert r.status_code == 202
    uploads = svc.home / "uploads"
    orphan = uploads / "0123.trace"
    orphan.write_bytes(b"x")
    old = time.time() - 2 * svc.settings.tmp_unowned_max_age_s
    for p in uploads.iterdir():
        os.utime(p, (old, old))
    assert sweep_orphan_uploads(svc.settings, svc.db) == [orphan]
    assert len(list(uploads.iterdir())) == 1  # the trace's own upload stays
