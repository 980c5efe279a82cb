"""A nightly job (or schedule) that takes its trace from a capture of the deployment's memcached servers: the
options at the API, the schedule's payload, and the worker's ingest step capturing a real memcached through the
egress rules."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from typing import Any

import pytest

from control.db import TraceRow
from jobs import nightly
from jobs.context import JobContext
from jobs.scheduler import tick
from jobs.worker import Worker
from tests.app_fixtures import Svc, cassandra_deployment, memcached_deployment
from tests.servers.hostile_memcached import HostileMemcached, hostile_memcached
from tests.servers.memcached_server import running_memcached
from validation.memcached_capture import compare, plan, populate, run_client, shared_sizes, stats

API = "/api/v1"
GAP_US = 100_000  # requests are sent 0.3 s apart: grouped with a gap far from any stall inside one command


def _ingest_only(ctx: JobContext) -> dict[str, Any]:
    """The nightly handler up to its ingest step (the real step; analysis and tuning are tested elsewhere)."""
    assert ctx.deployment_id is not None
    dep_id = ctx.deployment_id
    return ctx.step("ingest", lambda: nightly._step_ingest(ctx, dep_id))


@pytest.mark.db_backends
def test_capture_options_are_checked_at_the_api(svc: Svc) -> None:
    mc = svc.client.post(f"{API}/deployments", json=memcached_deployment("mc-cap", ["h:1"]), headers=svc.write).json()
    body = {k: v for k, v in cassandra_deployment("cass-cap", 9042).items() if k != "current_config"}
    cass = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()

    def job(body: dict[str, Any]) -> Any:
        return svc.client.post(f"{API}/jobs", json=body, headers=svc.write)

    for capture, field in (
        ({"duration_s": 0}, "capture.duration_s"),
        ({"duration_s": "60"}, "capture.duration_s"),
        ({"duration_s": 60, "extra": 1}, "capture.extra"),
        ({"duration_s": svc.settings.capture_max_duration_s + 1}, "capture.duration_s"),
    ):
        r = job({"deployment_id": mc["id"], "capture": capture})
        assert r.status_code == 422 and field in r.text, (capture, r.text)
    r = job({"deployment_id": mc["id"], "capture": {"duration_s": 60}, "dataset_ids": ["abcd1234"]})
    assert r.status_code == 422 and "not both" in r.text
    r = job({"deployment_id": cass["id"], "capture": {"duration_s": 60}})
    assert r.status_code == 422 and "only a memcached deployment can be captured" in r.text
    r = job({"deployment_id": mc["id"], "capture": {"duration_s": 60}})
    assert r.status_code == 202 and r.json()["payload"]["capture"] == {"source": "watch", "duration_s": 60.0}
    # the source: the servers' own capture (memcached: watch) or the application's clients (memcached, cassandra)
    r = job({"deployment_id": mc["id"], "capture": {"source": "clients", "duration_s": 60}})
    assert r.status_code == 202 and r.json()["payload"]["capture"] == {"source": "clients", "duration_s": 60.0}
    r = job({"deployment_id": cass["id"], "capture": {"source": "clients", "duration_s": 60}})
    assert r.status_code == 202, r.text
    r = job({"deployment_id": mc["id"], "capture": {"source": "fql", "duration_s": 60}})
    assert r.status_code == 422 and "capture.source" in r.text and "captured by watch" in r.text, r.text
    r = job({"deployment_id": mc["id"], "capture": {"source": "tcpdump", "duration_s": 60}})
    assert r.status_code == 422 and "capture.source" in r.text, r.text

    r = svc.client.post(f"{API}/schedules", json={"deployment_id": cass["id"], "capture": {"duration_s": 60}},
                        headers=svc.write)
    assert r.status_code == 422 and "capture" in r.text
    r = svc.client.post(f"{API}/schedules", json={"deployment_id": mc["id"], "capture": {"duration_s": 1e9}},
                        headers=svc.write)
    assert r.status_code == 422 and "capture_max_duration_s" in r.text


@pytest.mark.db_backends
def test_a_schedule_with_a_capture_fires_capturing_jobs(svc: Svc) -> None:
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("mc-sched", ["h:1"]), headers=svc.write)
    body = {"deployment_id": dep.json()["id"], "cron": "* * * * *", "capture": {"duration_s": 120}}
    sched = svc.client.post(f"{API}/schedules", json=body, headers=svc.write).json()
    assert sched["capture"] == {"source": "watch", "duration_s": 120.0}
    fired = tick(svc.db, svc.settings, at=time.time() + 120)
    assert len(fired) == 1 and fired[0].job_id is not None
    job = svc.client.get(f"{API}/jobs/{fired[0].job_id}", headers=svc.read).json()
    assert job["payload"]["capture"] == {"source": "watch", "duration_s": 120.0}
    # null turns the capture off: the schedule's jobs take uploads again; a PATCH without it keeps it
    r = svc.client.patch(f"{API}/schedules/{sched['id']}", json={"capture": {"duration_s": 30}}, headers=svc.write)
    assert r.json()["capture"] == {"source": "watch", "duration_s": 30.0}
    r = svc.client.patch(f"{API}/schedules/{sched['id']}", json={"enabled": True}, headers=svc.write)
    assert r.json()["capture"] == {"source": "watch", "duration_s": 30.0}
    r = svc.client.patch(f"{API}/schedules/{sched['id']}", json={"capture": None}, headers=svc.write)
    assert r.status_code == 200 and r.json()["capture"] is None
    fired = tick(svc.db, svc.settings, at=time.time() + 300)
    job = svc.client.get(f"{API}/jobs/{fired[0].job_id}", headers=svc.read).json()
    assert "capture" not in job["payload"]


@pytest.mark.skipif(shutil.which("memcached") is None, reason="memcached is not installed")
def test_nightly_ingests_a_capture_of_the_deployment(svc: Svc) -> None:
    svc.settings.memcached_watch_gap_us = GAP_US
    with running_memcached() as node:
        populate(node.host, node.port, shared_sizes())
        dep = svc.client.post(
            f"{API}/deployments", json=memcached_deployment("mc-captured", [node.address]), headers=svc.write
        ).json()
        job = svc.client.post(
            f"{API}/jobs", json={"deployment_id": dep["id"], "capture": {"duration_s": 6}}, headers=svc.write
        ).json()
        sent = [plan(0, 5, seed=5, sets_every=3)]

        def client() -> None:
            with socket.create_connection((node.host, node.port)) as s:  # once the worker's watch is on
                while int(stats(s)["log_watchers"]) < 1:
                    time.sleep(0.02)
            run_client(node.host, node.port, sent[0], pause_s=0.3)

        traffic = threading.Thread(target=client)
        traffic.start()
        worker = Worker(svc.settings, svc.db, "w-cap", handlers={"nightly": _ingest_only}, schedule=False)
        assert worker.run_once() == "succeeded"
        traffic.join()
    got = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()
    out = got["result"]
    gets = [op for op in sent[0] if op[0] == "get"]
    assert out["capture"]["requests"] == len(gets) and out["capture"]["lost"] == 0 and out["capture"]["complete"]
    assert out["capture"]["servers"] == [node.address] and out["capture"]["stopped"] == "duration"
    assert f"capture: watching {node.address} for 6 s" in got["logs"]
    trace = svc.client.get(f"{API}/traces/{out['traces'][0]}", headers=svc.read).json()
    assert (trace["name"], trace["format"], trace["status"]) == (f"capture-job{job['id']}", "memcached-watch", "ready")
    assert trace["deployment_id"] == dep["id"] and trace["dataset_id"] == out["datasets"][0]
    assert trace["manifest"]["ingest_options"]["watch_gap_us"] == GAP_US
    from ingest.store import DatasetStore

    info = DatasetStore(svc.settings).find(out["datasets"][0])
    assert info is not None
    report = compare("nightly", GAP_US, sent, info.read_table())
    assert report.keys_exact and report.sizes_exact and report.exact == report.true_requests == len(gets)
    with svc.db.session() as s:  # the capture file went the way of an upload's: ingested, then removed
        row = s.get(TraceRow, out["traces"][0])
        assert row is not None and row.upload_path is None


def test_nightly_capture_goes_only_where_the_egress_rules_allow(svc: Svc) -> None:
    dep = svc.client.post(
        f"{API}/deployments", json=memcached_deployment("mc-far", ["127.0.0.1:11211"]), headers=svc.write
    ).json()
    job = svc.client.post(
        f"{API}/jobs", json={"deployment_id": dep["id"], "capture": {"duration_s": 5}}, headers=svc.write
    ).json()
    svc.settings.connect_networks = ["10.0.0.0/8"]
    worker = Worker(svc.settings, svc.db, "w-far", handlers={"nightly": _ingest_only}, schedule=False)
    assert worker.run_once() == "failed"
    got = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()
    refused = "capture: memcached 127.0.0.1:11211: 127.0.0.1 (127.0.0.1) is outside the networks"
    assert got["attempts"] == 1 and refused in got["error"]
    assert svc.client.get(f"{API}/traces", headers=svc.read).json() == []


def test_nightly_capture_of_an_unreachable_server_is_retried(svc: Svc) -> None:
    dep = svc.client.post(
        f"{API}/deployments", json=memcached_deployment("mc-down", ["127.0.0.1:1"]), headers=svc.write
    ).json()
    job = svc.client.post(
        f"{API}/jobs", json={"deployment_id": dep["id"], "capture": {"duration_s": 5}}, headers=svc.write
    ).json()
    worker = Worker(svc.settings, svc.db, "w-down", handlers={"nightly": _ingest_only}, schedule=False)
    assert worker.run_once() == "queued"  # a server down may be back at the next attempt
    got = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()
    assert got["attempts"] == 1 and "memcached 127.0.0.1:1: cannot connect" in got["error"]
    assert svc.client.get(f"{API}/traces", headers=svc.read).json() == []


def _capture_job(svc: Svc, server: HostileMemcached, duration_s: float) -> int:
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment(f"mc-hostile-{server.port}",
                                                                          [server.address]), headers=svc.write)
    body = {"deployment_id": dep.json()["id"], "capture": {"duration_s": duration_s}}
    job = svc.client.post(f"{API}/jobs", json=body, headers=svc.write)
    return int(job.json()["id"])


def _work(svc: Svc, within_s: float) -> tuple[list[str], float]:
    """One job run by a real worker in a thread: its outcome and how long it took (the test fails when it still
    runs after `within_s`)."""
    worker = Worker(svc.settings, svc.db, "w-hostile", handlers={"nightly": _ingest_only}, schedule=False)
    outcome: list[str] = []
    t0 = time.monotonic()
    thread = threading.Thread(target=lambda: outcome.append(str(worker.run_once())), daemon=True)
    thread.start()
    thread.join(within_s)
    assert not thread.is_alive(), f"the job still runs after {within_s} s"
    return outcome, time.monotonic() - t0


def test_a_job_capturing_an_endless_line_is_cancelled_promptly(svc: Svc) -> None:
    svc.settings.capture_max_line_bytes = 64 * 1024**2  # the line cap far away: the cancel must stop it
    with hostile_memcached(watch="endless-line", trickle_s=0.1) as server:
        job_id = _capture_job(svc, server, 600)

        def cancel() -> None:
            while svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()["status"] != "running":
                time.sleep(0.05)
            time.sleep(1.0)  # mid-capture
            assert svc.client.post(f"{API}/jobs/{job_id}/cancel", headers=svc.write).status_code == 200

        canceller = threading.Thread(target=cancel, daemon=True)
        canceller.start()
        outcome, took = _work(svc, 20)
        canceller.join(5)
    got = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert outcome == ["cancelled"] and got["status"] == "cancelled" and took < 10, (outcome, got, took)
    assert svc.client.get(f"{API}/traces", headers=svc.read).json() == []
    assert list((svc.settings.home_dir / "uploads").glob("*")) == []


def test_a_job_capturing_an_endless_line_ends_at_its_time_budget(svc: Svc) -> None:
    svc.settings.capture_max_line_bytes = 64 * 1024**2
    svc.settings.job_time_budget_s = 2.0
    with hostile_memcached(watch="endless-line", trickle_s=0.1) as server:
        job_id = _capture_job(svc, server, 600)
        outcome, took = _work(svc, 20)
    got = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert outcome == ["failed"] and "time budget" in got["error"] and took < 10, (outcome, got, took)


def test_a_job_capturing_an_endless_line_fails_at_the_line_cap_for_good(svc: Svc) -> None:
    with hostile_memcached(watch="endless-line") as server:
        job_id = _capture_job(svc, server, 600)
        outcome, took = _work(svc, 20)
    got = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert outcome == ["failed"] and got["attempts"] == 1 and took < 10, (outcome, got, took)
    assert f"capture: memcached {server.address}: watch: a line longer than 65,536 bytes" in got["error"]
