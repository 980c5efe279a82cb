"""The nightly pipeline's decide + publish steps (with earlier steps checkpointed), and its clear failures."""

from __future__ import annotations

import time
from typing import Any

import pytest

from control.db import JobRow
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.memcached.publisher import MemcachedPublisher
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.memcached_server import MemcachedNode
from tuner.recommendation import Recommendation, accept

pytestmark = pytest.mark.db_backends  # each test runs on SQLite and on PostgreSQL

API = "/api/v1"

REC = {
    "policy": "chisel",
    "params": {"split_keys": 2048, "merge": 4, "elephant_threshold": 50},
    "verdict": "recommend",
    "reason": "p99 -18% (p=0.01)",
    "expected": {"p50_ms": 0.8, "p95_ms": 2.0, "p99_ms": 4.0},
    "baseline": {"policy": "batching", "p99_ms": 4.9},
    # as tuner.recommend.render_memcached makes it: the complete block the client runs
    "render": {"json": {"memcached_client": {"mode": "chisel", "split_keys": 2048, "merge": 4,
                                             "elephant_threshold": 50}}},
    "study": "s1",
    "mlflow_run_id": "run-123",
}


def _done(name: str, output: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "status": "done",
        "attempt": 1,
        "started_at": 0.0,
        "finished_at": 1.0,
        "error": None,
        "output": output,
    }


def _resumed_nightly(svc: Svc, dep_id: int, rec: dict[str, Any]) -> int:
    """A nightly job whose first worker died after the tune step (its checkpoints are on the job)."""
    r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep_id}, headers=svc.write)
    job_id = int(r.json()["id"])
    with svc.db.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        row.steps = [
            _done("ingest", {"traces": [1], "datasets": ["ds1"]}),
            _done("analyze", {"dataset_id": "ds1", "out_dir": "/x", "summary": "/x/summary.json"}),
            _done("tune", rec),
        ]
        row.status, row.lease_owner, row.lease_expires, row.attempts = "running", "dead", time.time() - 1, 1
    return job_id


def test_accept_rule() -> None:
    def accept_doc(doc: dict[str, Any], *args: Any) -> tuple[bool, str]:
        return accept(Recommendation.from_json(doc), *args)

    assert accept_doc(REC, {}) == (True, "tuner recommends it and it meets the constraints")
    assert accept_doc({**REC, "verdict": "keep current", "reason": "no gain"}, {})[0] is False
    assert accept_doc(REC, {"max_p99_ms": 3.5}) == (False, "expected p99_ms 4.0 exceeds the limit 3.5")
    assert accept_doc(REC, {"policies": ["batching"]})[0] is False
    # baseline p99 4.9 → expected 4.0 is an 18.4% gain
    assert accept_doc(REC, {}, {"metric": "p99", "min_improvement": 0.18})[0] is True
    assert accept_doc(REC, {}, {"metric": "p99", "min_improvement": 0.19}) == (
        False,
        "p99_ms improves by 18.4%, less than the required 19.0%",
    )


def test_resumed_nightly_decides_and_publishes(svc: Svc, memcached_node: MemcachedNode) -> None:
    dep = svc.client.post(
        f"{API}/deployments",
        json=memcached_deployment("mc-nightly", [memcached_node.address]),
        headers=svc.write,
    ).json()
    job_id = _resumed_nightly(svc, dep["id"], REC)
    assert Worker(svc.settings, svc.db, "w-n", handlers=default_handlers(), schedule=False).run_once() == "succeeded"
    job = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert [s["name"] for s in job["steps"]] == ["ingest", "analyze", "tune", "decide", "publish", "verify"]
    assert [s["attempt"] for s in job["steps"]] == [1, 1, 1, 2, 2, 2]
    assert job["result"]["decision"] == {
        "accepted": True,
        "version": 1,
        "reason": "tuner recommends it and it meets the constraints",
    }
    assert job["result"]["publish"]["current_version"] == 1 and job["attempts"] == 2
    assert "step tune: already done by an earlier attempt" in job["logs"]
    latest = svc.client.get(f"{API}/configs/{dep['id']}", headers=svc.read).json()
    want = {
        "policy": "chisel",
        "params": REC["params"],
        "target": REC["render"],
    }
    assert latest["version"] == 1 and latest["source"] == "tuning" and latest["config"] == want
    assert latest["job_id"] == job_id
    assert MemcachedPublisher("mc-nightly", dep["connection"], 1).read_current() == (1, want)
    # the verify step: nothing reported yet, so the version waits (with the expectation it will be held to)
    verify = job["result"]["verify"]
    assert (verify["version"], verify["status"]) == (1, "pending")
    assert verify["reason"] == "no client has reported version 1"
    assert latest["verification"]["status"] == "pending" and latest["verification"]["expected"] == {
        "p50_ms": 0.8, "p95_ms": 2.0, "p99_ms": 4.0, "p99_ci_ms": None, "ci_method": None,
        "sampling_error_pct": None, "calibration_p99_ms": None, "source": f"recommendation of job {job_id}",
    }


def test_keep_current_creates_no_version(svc: Svc) -> None:
    dep = svc.client.post(
        f"{API}/deployments", json=memcached_deployment("mc-keep", ["127.0.0.1:1"]), headers=svc.write
    ).json()
    job_id = _resumed_nightly(svc, dep["id"], {**REC, "verdict": "keep current", "reason": "no gain"})
    assert Worker(svc.settings, svc.db, "w-k", handlers=default_handlers(), schedule=False).run_once() == "succeeded"
    job = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert job["result"]["decision"]["accepted"] is False and "publish" not in job["result"]
    assert job["result"]["verify"] == {"version": None, "status": None, "checked": False,
                                       "reason": f"deployment {dep['id']} has no accepted config yet"}
    assert svc.client.get(f"{API}/configs/{dep['id']}/versions", headers=svc.read).json() == []


def test_nightly_without_traces_fails_clearly(svc: Svc) -> None:
    dep = svc.client.post(
        f"{API}/deployments", json=memcached_deployment("mc-empty", ["127.0.0.1:1"]), headers=svc.write
    ).json()
    job_id = svc.client.post(f"{API}/jobs", json={"deployment_id": dep["id"]}, headers=svc.write).json()["id"]
    assert Worker(svc.settings, svc.db, "w-e", handlers=default_handlers(), schedule=False).run_once() == "failed"
    job = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert job["attempts"] == 1 and "has no uploaded trace" in job["error"]
    assert job["steps"][0]["name"] == "ingest" and job["steps"][0]["status"] == "failed"
