"""Jobs under faults: every ingest failure ends the trace `failed` with a readable reason (retried only when the
environment may heal), a trace deleted during its ingest leaves no dataset, cancel reaches a running step and a
running study, a long job neither starves cron schedules nor runs past its budget, and what a client reads of a
job has no tracebacks, server paths or credentials.
"""

from __future__ import annotations

import errno
import gzip
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from control.db import JobRow, ScheduleRow, TraceRow
from control.queue import enqueue
from jobs.handlers import default_finalizers, default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc, memcached_deployment

API = "/api/v1"
GOOD = b"request_id,ts,key,value_size\n" + b"".join(b"%d,%d.0,k%d,10\n" % (i, i, i % 7) for i in range(400))


def _worker(svc: Svc, name: str = "w") -> Worker:
    return Worker(svc.settings, svc.db, name, handlers=default_handlers(), finalizers=default_finalizers(),
                  schedule=False)


def _drain(svc: Svc) -> list[str]:
    w, out = _worker(svc), []
    while (status := w.run_once()) is not None:
        out.append(status)
        with svc.db.session() as s:  # skip the backoff
            s.execute(update(JobRow).where(JobRow.status == "queued").values(run_after=0))
    return out


def _upload(svc: Svc, body: bytes, name: str) -> dict[str, Any]:
    r = svc.client.post(f"{API}/traces?name={name}", content=body, headers=svc.write)
    assert r.status_code == 202, r.text
    return dict(r.json())


def _trace(svc: Svc, trace_id: int) -> dict[str, Any]:
    return dict(svc.client.get(f"{API}/traces/{trace_id}", headers=svc.read).json())


def _job(svc: Svc, job_id: int) -> dict[str, Any]:
    return dict(svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json())


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def _patch_ingest(monkeypatch: pytest.MonkeyPatch, fn: Callable[..., Any]) -> None:
    import ingest.pipeline

    monkeypatch.setattr(ingest.pipeline, "ingest_file", fn)


def test_truncated_gzip_fails_once_with_a_reason(svc: Svc) -> None:
    whole = gzip.compress(GOOD * 50)
    t = _upload(svc, whole[: len(whole) // 2], "cut.csv.gz")
    assert _drain(svc) == ["failed"]
    trace, job = _trace(svc, t["id"]), _job(svc, t["job_id"])
    assert trace["status"] == "failed" and trace["dataset_id"] is None
    problem = trace["error"]["problems"][0]
    assert problem["file"] == "cut.csv.gz" and problem["problem"]
    assert job["attempts"] == 1 and job["status"] == "failed"  # not retried: it can never succeed
    assert _files(svc.home / "uploads") == [] and _files(svc.settings.datasets_dir) == []


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
        (EOFError("Compressed file ended before the end-of-stream marker was reached"), "ends early"),
        (ValueError("Unsupported cast from list<item: int64> to utf8"), "could not be read"),
        (KeyError("x"), "could not be read"),
        (OSError("Invalid data stream"), "could not be read"),  # bz2's corrupt-input error: no errno
    ],
)
def test_input_failures_are_not_retried(
    svc: Svc, monkeypatch: pytest.MonkeyPatch, exc: BaseException, words: str
) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise exc

    _patch_ingest(monkeypatch, boom)
    t = _upload(svc, GOOD, "t.csv")
    assert _drain(svc) == ["failed"]
    trace, job = _trace(svc, t["id"]), _job(svc, t["job_id"])
    assert trace["status"] == "failed" and words in trace["error"]["problems"][0]["problem"]
    assert job["attempts"] == 1 and words in job["error"]
    assert "Traceback" not in job["logs"] and _files(svc.home / "uploads") == []


def test_environment_failures_are_retried_then_fail(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def disk_full(path: Path, **_: Any) -> Any:
        with svc.db.session() as s:
            seen.append(s.scalars(select(TraceRow.status)).one())
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    _patch_ingest(monkeypatch, disk_full)
    t = _upload(svc, GOOD, "t.csv")
    assert _drain(svc) == ["queued", "queued", "failed"]
    assert seen == ["ingesting"] * 3
    trace, job = _trace(svc, t["id"]), _job(svc, t["job_id"])
    assert job["attempts"] == 3 and trace["status"] == "failed"
    assert "gave up after 3 attempt(s)" in trace["error"]["problems"][0]["problem"]
    home = str(svc.home)
    for text in (job["error"], job["logs"], str(job["steps"]), str(trace["error"])):
        # no server paths: a file is named relative to TAILTUNE_HOME (a full disk names the file it could not write)
        assert home not in text and "/uploads/" not in text.replace("TAILTUNE_HOME/uploads/", ""), text
    assert "Traceback" not in job["logs"]


@pytest.mark.db_backends
def test_a_job_given_up_after_lost_workers_fails_its_trace(svc: Svc) -> None:
    t = _upload(svc, GOOD, "t.csv")
    with svc.db.session() as s:  # its workers died three times mid-ingest
        s.execute(update(JobRow).where(JobRow.id == t["job_id"]).values(
            status="running", attempts=3, lease_owner="dead", lease_expires=time.time() - 1))
        s.execute(update(TraceRow).where(TraceRow.id == t["id"]).values(status="ingesting"))
    assert _worker(svc).run_once() is None
    trace, job = _trace(svc, t["id"]), _job(svc, t["job_id"])
    assert job["status"] == "failed" and "gave up" in job["error"]
    assert trace["status"] == "failed" and "gave up" in trace["error"]["problems"][0]["problem"]
    assert _files(svc.home / "uploads") == []


def test_cancelled_ingest_fails_its_trace(svc: Svc) -> None:
    t = _upload(svc, GOOD, "t.csv")
    w = _worker(svc)
    job = w.claim()
    assert job is not None
    assert svc.client.post(f"{API}/jobs/{t['job_id']}/cancel", headers=svc.write).status_code == 200
    assert w.execute(job) == "cancelled"
    assert _trace(svc, t["id"])["status"] == "failed"


@pytest.mark.db_backends
def test_delete_during_ingest_leaves_no_dataset(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    import ingest.pipeline

    real = ingest.pipeline.ingest_file
    t = _upload(svc, GOOD, "t.csv")

    def ingest_then_delete(*args: Any, **kwargs: Any) -> Any:
        info = real(*args, **kwargs)  # the dataset exists now; the trace is deleted before it is marked ready
        assert svc.client.delete(f"{API}/traces/{t['id']}", headers=svc.write).status_code == 204
        return info

    _patch_ingest(monkeypatch, ingest_then_delete)
    assert _drain(svc) == ["cancelled"]
    assert _files(svc.settings.datasets_dir) == [] and _files(svc.home / "uploads") == []
    job = _job(svc, t["job_id"])
    assert "deleted" in job["error"]
    assert svc.client.get(f"{API}/traces/{t['id']}", headers=svc.read).status_code == 404


@pytest.mark.db_backends
def test_delete_before_ingest_cancels_its_job(svc: Svc) -> None:
    t = _upload(svc, GOOD, "t.csv")
    assert svc.client.delete(f"{API}/traces/{t['id']}", headers=svc.write).status_code == 204
    assert _job(svc, t["job_id"])["status"] == "cancelled"
    assert _drain(svc) == []
    assert _files(svc.settings.datasets_dir) == [] and _files(svc.home / "uploads") == []


def _run_in_thread(w: Worker, stop: threading.Event) -> threading.Thread:
    th = threading.Thread(target=w.run, args=(stop,), daemon=True)
    th.start()
    return th


def _wait(cond: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_cancel_reaches_a_running_step(svc: Svc) -> None:
    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, "selftest", {"steps": 1, "sleep_s": 0, "wait_for_stop": True}).id
    stop = threading.Event()
    th = _run_in_thread(_worker(svc), stop)
    try:
        _wait(lambda: any(st["name"] == "wait" for st in _job(svc, job_id)["steps"]), "the long step")
        assert svc.client.post(f"{API}/jobs/{job_id}/cancel", headers=svc.write).status_code == 200
        _wait(lambda: _job(svc, job_id)["status"] != "running", "the cancel")
    finally:
        stop.set()
        th.join(timeout=60)
    job = _job(svc, job_id)
    assert job["status"] == "cancelled" and job["steps"][-1]["status"] == "cancelled"


def test_a_long_job_does_not_starve_schedules(svc: Svc) -> None:
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("cron", ["h:1"]), headers=svc.write)
    sid = svc.client.post(
        f"{API}/schedules", json={"deployment_id": dep.json()["id"], "cron": "* * * * *"}, headers=svc.write
    ).json()["id"]
    with svc.db.session() as s:
        s.execute(update(ScheduleRow).where(ScheduleRow.id == sid).values(created_at=time.time() - 3600))
        long_id = enqueue(s, svc.settings, "selftest", {"steps": 0, "wait_for_stop": True}).id
    w = Worker(svc.settings, svc.db, "busy", handlers=default_handlers(), schedule=True)
    stop = threading.Event()
    th = _run_in_thread(w, stop)

    def fired() -> bool:
        with svc.db.session() as s:
            return s.scalar(select(JobRow.id).where(JobRow.dedupe_key.like(f"schedule:{sid}:%"))) is not None

    try:
        _wait(lambda: _job(svc, long_id)["status"] == "running", "the long job to start")
        _wait(fired, "the schedule to fire while the worker is busy")
        assert _job(svc, long_id)["status"] == "running"
        svc.client.post(f"{API}/jobs/{long_id}/cancel", headers=svc.write)
        _wait(lambda: _job(svc, long_id)["status"] == "cancelled", "the cancel")
    finally:
        stop.set()
        th.join(timeout=60)


def test_a_job_past_its_time_budget_fails_without_retry(svc: Svc) -> None:
    svc.settings.job_time_budget_s = 0.3
    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, "selftest", {"steps": 0, "wait_for_stop": True}).id
    assert _worker(svc).run_once() == "failed"
    job = _job(svc, job_id)
    assert job["attempts"] == 1 and "job_time_budget_s" in job["error"]


def test_cancel_reaches_a_running_study(svc: Svc) -> None:
    """The tune step of a nightly job stops between two trials: the job ends `cancelled` and at most the
    trial running when the cancel came finishes; no further trial starts."""
    import json

    import optuna

    from ingest.generate import write_trace
    from ingest.pipeline import ingest_file
    from tuner.study import open_storage

    trace = svc.home / "gen.csv"
    svc.home.mkdir(parents=True, exist_ok=True)
    write_trace(trace, "facebook", 300, 1)
    info = ingest_file(trace, settings=svc.settings)
    summary = svc.home / "analyses" / "s" / "summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({}))
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("study", ["h:1"]), headers=svc.write)
    dep_id = dep.json()["id"]
    r = svc.client.post(
        f"{API}/jobs", json={"deployment_id": dep_id, "tune": {"trials": 1000, "seeds": 1}}, headers=svc.write
    )
    job_id = r.json()["id"]
    done = {"status": "done", "attempt": 1, "started_at": 0.0, "finished_at": 1.0, "error": None}
    with svc.db.session() as s:  # ingest and analysis done by an earlier attempt
        s.execute(update(JobRow).where(JobRow.id == job_id).values(steps=[
            {"name": "ingest", **done, "output": {"traces": [], "datasets": [info.id]}},
            {"name": "analyze", **done, "output": {"dataset_id": info.id, "out_dir": "analyses/s",
                                                   "summary": "analyses/s/summary.json"}},
        ]))
    storage = open_storage(svc.settings.resolved_optuna_storage)
    name = f"tailtune-study-job{job_id}"

    def trials() -> int:
        try:
            return len(optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False))
        except KeyError:
            return 0

    stop = threading.Event()
    th = _run_in_thread(_worker(svc), stop)
    try:
        _wait(lambda: trials() >= 3, "the study to run some trials")
        assert svc.client.post(f"{API}/jobs/{job_id}/cancel", headers=svc.write).status_code == 200
        at_cancel = trials()
        _wait(lambda: _job(svc, job_id)["status"] != "running", "the cancel")
    finally:
        stop.set()
        th.join(timeout=120)
    job = _job(svc, job_id)
    assert job["status"] == "cancelled", job["error"]
    assert job["steps"][-1]["name"] == "tune" and job["steps"][-1]["status"] == "cancelled"
    assert trials() <= at_cancel + 1 < 1000


def test_an_analysis_given_up_after_lost_workers_fails(svc: Svc) -> None:
    from control.db import AnalysisRow

    with svc.db.session() as s:
        row = AnalysisRow(trace_id=None, dataset_id="abcd", options={"servers": 1, "replication": 1},
                          status="running", out_dir=str(svc.home / "analyses" / "1"), error=None, created_at=0.0)
        s.add(row)
        s.flush()
        job = enqueue(s, svc.settings, "analyze", {"analysis_id": row.id})
        job.status, job.attempts, job.lease_owner, job.lease_expires = "running", 3, "dead", time.time() - 1
        analysis_id = row.id
    assert _worker(svc).run_once() is None
    got = svc.client.get(f"{API}/analyses/{analysis_id}", headers=svc.read).json()
    assert got["status"] == "failed" and "gave up" in got["error"]


def test_job_logs_stop_growing_at_their_limit(svc: Svc) -> None:
    svc.settings.job_logs_max_bytes = 600
    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, "selftest", {"steps": 20, "sleep_s": 0}).id
    assert _worker(svc).run_once() == "succeeded"
    logs = _job(svc, job_id)["logs"]
    assert len(logs) < 800 and logs.rstrip().endswith("job_logs_max_bytes (600) reached")


@pytest.mark.spark
def test_a_stop_cancels_the_running_spark_job(spark: Any) -> None:
    """The analysis step's stop hook: Spark's running job is cancelled, not waited for."""
    from jobs.nightly import _cancel_spark

    outcome: list[object] = []

    def slow(x: int) -> int:
        time.sleep(120)
        return x

    def long_job() -> None:
        try:
            outcome.append(spark.sparkContext.parallelize(range(2), 2).map(slow).count())
        except Exception as exc:
            outcome.append(exc)

    th = threading.Thread(target=long_job, daemon=True)
    th.start()
    _wait(lambda: bool(spark.sparkContext.statusTracker().getActiveJobsIds()), "the Spark job to start")
    _cancel_spark()
    th.join(timeout=100)
    assert len(outcome) == 1 and isinstance(outcome[0], Exception) and "cancel" in str(outcome[0]).lower()
