"""The durable queue: claim with a lease, retry with backoff, exactly-once completion, kill -9 → resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import update

from control.db import JobRow
from control.queue import JOB_KINDS, cancel_job, enqueue
from jobs.handlers import default_finalizers, default_handlers
from jobs.worker import Worker
from tests.app_fixtures import FAST_ENV, Svc

pytestmark = pytest.mark.db_backends  # each test runs on SQLite and on PostgreSQL


def test_the_queue_takes_exactly_the_kinds_the_worker_runs() -> None:
    """`JOB_KINDS` (what `enqueue` accepts) and `default_handlers` (what the worker runs) name the same kinds; a
    kind added to one of them only fails here. Finalizers are for kinds of the queue."""
    assert set(default_handlers()) == set(JOB_KINDS)
    assert set(default_finalizers()) <= set(JOB_KINDS)


def _job(svc: Svc, job_id: int) -> JobRow:
    with svc.db.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        return row


def _enqueue(svc: Svc, payload: dict[str, object], max_attempts: int | None = None) -> int:
    with svc.db.session() as s:
        return enqueue(s, svc.settings, "selftest", payload, max_attempts=max_attempts).id


def test_job_runs_with_checkpointed_steps(svc: Svc, tmp_path: Path) -> None:
    marker = tmp_path / "m.txt"
    job_id = _enqueue(svc, {"steps": 3, "sleep_s": 0, "marker": str(marker)})
    assert Worker(svc.settings, svc.db, "w1", handlers=default_handlers(), schedule=False).run_once() == "succeeded"
    job = _job(svc, job_id)
    assert job.status == "succeeded" and job.attempts == 1 and job.result == {"steps": 3}
    assert [(s["name"], s["status"], s["output"]) for s in job.steps] == [
        ("step-0", "done", {"i": 0}),
        ("step-1", "done", {"i": 1}),
        ("step-2", "done", {"i": 2}),
    ]
    assert job.lease_owner is None and "claimed by w1" in job.logs
    assert marker.read_text().splitlines() == [
        "start 0 attempt 1",
        "done 0",
        "start 1 attempt 1",
        "done 1",
        "start 2 attempt 1",
        "done 2",
    ]
    assert (
        Worker(svc.settings, svc.db, "w2", handlers=default_handlers(), schedule=False).run_once() is None
    )  # nothing left


def test_retry_with_backoff_then_success(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    job_id = _enqueue(svc, {"steps": 1, "sleep_s": 0, "fail_attempts": 2}, max_attempts=3)
    w = Worker(svc.settings, svc.db, "w1", handlers=default_handlers(), schedule=False)
    before = time.time()
    assert w.run_once() == "queued"
    job = _job(svc, job_id)
    assert job.attempts == 1 and "fails on purpose" in (job.error or "")
    assert job.run_after >= before + svc.settings.job_backoff_s  # backoff 1 × base
    svc.settings.job_backoff_s = 3600.0
    with svc.db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(run_after=0))
    t1 = time.time()
    assert w.run_once() == "queued"  # attempt 2 fails; its retry waits 3600 * 2 s
    assert _job(svc, job_id).run_after >= t1 + 7200.0
    assert w.run_once() is None  # nothing is due
    with svc.db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(run_after=0))
    assert w.run_once() == "succeeded"
    job = _job(svc, job_id)
    assert job.attempts == 3 and job.status == "succeeded" and job.error is None
    assert "attempt 1 failed" in job.logs and "attempt 2 failed" in job.logs


def test_backoff_doubles_and_gives_up(svc: Svc) -> None:
    job_id = _enqueue(svc, {"steps": 1, "sleep_s": 0, "fail_attempts": 9}, max_attempts=2)
    svc.settings.job_backoff_s = 100.0
    w = Worker(svc.settings, svc.db, "w1", handlers=default_handlers(), schedule=False)
    t0 = time.time()
    assert w.run_once() == "queued"
    assert 100.0 <= _job(svc, job_id).run_after - t0 <= 102.0
    with svc.db.session() as s:
        s.execute(update(JobRow).where(JobRow.id == job_id).values(run_after=0))
    assert w.run_once() == "failed"
    job = _job(svc, job_id)
    assert job.status == "failed" and job.attempts == 2 and job.finished_at is not None


def test_only_one_of_two_racing_workers_claims(svc: Svc) -> None:
    job_id = _enqueue(svc, {"steps": 1})
    got: list[int | None] = []
    barrier = threading.Barrier(4)

    def claim(n: int) -> None:
        w = Worker(svc.settings, svc.db, f"racer{n}", handlers=default_handlers(), schedule=False)
        barrier.wait()
        job = w.claim()
        got.append(job.id if job is not None else None)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got, key=lambda x: x or 0) == [None, None, None, job_id]
    assert _job(svc, job_id).attempts == 1


def test_worker_that_lost_its_lease_cannot_complete(svc: Svc) -> None:
    job_id = _enqueue(svc, {"steps": 2, "sleep_s": 0})
    a, b = (Worker(svc.settings, svc.db, n, handlers=default_handlers(), schedule=False) for n in ("A", "B"))
    job_a = a.claim()
    assert job_a is not None
    with svc.db.session() as s:  # A stalls past its lease
        s.execute(update(JobRow).where(JobRow.id == job_id).values(lease_expires=time.time() - 1))
    job_b = b.claim()
    assert job_b is not None and job_b.id == job_id
    assert a.execute(job_a) == "lost"
    row = _job(svc, job_id)
    assert row.status == "running" and row.lease_owner == "B" and row.steps == []
    assert b.execute(job_b) == "succeeded"
    row = _job(svc, job_id)
    assert row.status == "succeeded" and row.attempts == 2 and len(row.steps) == 2


def test_cancel_running_job_stops_between_steps(svc: Svc) -> None:
    job_id = _enqueue(svc, {"steps": 3, "sleep_s": 0})
    w = Worker(svc.settings, svc.db, "w1", handlers=default_handlers(), schedule=False)
    job = w.claim()
    assert job is not None
    with svc.db.session() as s:
        assert cancel_job(s, job_id).cancel_requested is True
    assert w.execute(job) == "cancelled"
    row = _job(svc, job_id)
    assert row.status == "cancelled" and row.steps == []


def _spawn_worker(svc: Svc, name: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, **FAST_ENV, "TAILTUNE_HOME": str(svc.home)}
    return subprocess.Popen(
        [sys.executable, "-m", "tailtune", "worker", "--no-scheduler", "--id", name],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait(cond: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_kill_9_mid_job_resumes_once(svc: Svc, tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    job_id = _enqueue(svc, {"steps": 4, "sleep_s": 0.8, "marker": str(marker)})
    a = _spawn_worker(svc, "A")
    try:
        _wait(lambda: marker.exists() and "start 1 attempt 1" in marker.read_text())
        os.kill(a.pid, signal.SIGKILL)
        a.wait(timeout=10)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    row = _job(svc, job_id)
    assert row.status == "running" and row.lease_owner == "A"
    b = _spawn_worker(svc, "B")
    try:
        _wait(lambda: _job(svc, job_id).status == "succeeded")
    finally:
        b.send_signal(signal.SIGTERM)
        try:
            b.wait(timeout=15)
        except subprocess.TimeoutExpired:
            b.kill()
            b.wait()
    lines = marker.read_text().splitlines()
    for i in range(4):
        assert lines.count(f"done {i}") == 1, lines  # every step finished exactly once
    assert lines.count("start 0 attempt 1") == 1 and not any(x.startswith("start 0 attempt 2") for x in lines)
    assert "start 1 attempt 1" in lines and "start 1 attempt 2" in lines  # the interrupted step re-ran
    row = _job(svc, job_id)
    assert row.attempts == 2 and row.result == {"steps": 4}
    assert [s["status"] for s in row.steps] == ["done"] * 4 and row.steps[0]["attempt"] == 1
    assert row.steps[1]["attempt"] == 2 and "step step-0: already done by an earlier attempt" in row.logs
