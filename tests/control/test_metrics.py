"""`control.metrics.snapshot` on rows no writer makes: steps, verifications and kinds that are not what the
writers write are skipped or labelled `other`, never passed through as a label or a value."""

from __future__ import annotations

import time
from typing import Any

import pytest

from control.db import ConfigVersionRow, JobRow
from control.metrics import OTHER, snapshot
from control.verify import STATUSES
from tests.app_fixtures import Svc, memcached_deployment

pytestmark = pytest.mark.db_backends
API = "/api/v1"


def _no_summary(*_: Any) -> dict[str, Any]:
    raise AssertionError("no fidelity record: the summary is not read")


def _job(kind: str, steps: Any, status: str = "succeeded") -> JobRow:
    t = time.time()
    return JobRow(kind=kind, payload={}, status=status, steps=steps, run_after=t, created_at=t)


def test_hostile_rows_are_skipped_or_labelled_other(svc: Svc, db_backend: str) -> None:
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment("hostile", ["127.0.0.1:11211"]),
                        headers=svc.write)
    dep_id = int(r.json()["id"])
    steps = [
        "not a step",
        {"name": "tune", "status": "done", "started_at": 0, "finished_at": "1"},  # a string time
        {"name": "tune", "status": "done", "started_at": 5.0, "finished_at": 2.0},  # ends before it starts
        {"name": "tune", "status": "running", "started_at": 0.0, "finished_at": None},  # not finished
        {"name": "tune", "status": "done", "started_at": True, "finished_at": 3.0},  # a bool is no time
        {"name": "Key:user-42 secret", "status": "done", "started_at": 0.0, "finished_at": 2.0},
        {"name": "publish", "status": "failed", "started_at": 10.0, "finished_at": 10.5},
    ]
    if db_backend == "sqlite":  # PostgreSQL's JSON has no infinity or NaN
        steps.append({"name": "tune", "status": "done", "started_at": 0.0, "finished_at": float("inf")})
    with svc.db.session() as s:
        s.add(_job("nightly", steps))
        job = _job("nightly", {"steps": "not a list"})
        s.add(job)
        s.add(_job("made-up-kind", [], status="failed"))
        s.add(_job("nightly", [], status="weird"))
        s.flush()
        job.deployment_id = dep_id
        t = time.time()
        s.add(ConfigVersionRow(deployment_id=dep_id, version=1, config={}, source="manual", published={"x": 1.0},
                               created_at=t, verification={"status": "not-a-status", "after": {"p99_ms": "NaN"},
                                                           "expected": {"p99_ms": "4.0", "band_ms": [1]}}))
        s.add(ConfigVersionRow(deployment_id=dep_id, version=2, config={}, source="manual", published={},
                               created_at=t, verification=["not", "a", "dict"]))
    with svc.db.session() as s:
        snap = snapshot(s, time.time(), _no_summary)
    assert snap.steps == {("nightly", OTHER, "done"): [2.0], ("nightly", "publish", "failed"): [0.5]}
    assert snap.publishes == {}  # the job with the publish step names no deployment
    assert snap.jobs[(OTHER, "failed")] == 1 and snap.jobs[("nightly", "succeeded")] == 2
    assert sum(snap.jobs.values()) == 3  # the job of an unknown status is not counted under any
    (dep,) = snap.deployments
    assert dep.verifications == dict.fromkeys(STATUSES, 0)
    assert (dep.running_version, dep.latest_version) == (1, 2)  # version 2 reached no target
    assert (dep.expected_p99_ms, dep.expected_band_ms, dep.observed_p99_ms, dep.fidelity) == (None, None, None, None)
