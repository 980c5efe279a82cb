"""Clients report what they observe; the API shows expected vs observed per config version; a `report` token
may only report."""

from __future__ import annotations

from typing import Any

import pytest

from service.auth import create_token
from tailtune.control.configs import add_version
from tailtune.control.db import JobRow
from tailtune.control.observations import merge_histograms, percentile_ms
from tests.servers.memcached_server import MemcachedNode
from tests.service.conftest import Svc, memcached_deployment

API = "/api/v1"
EXPECTED = {"p50_ms": 0.25, "p95_ms": 0.6, "p99_ms": 1.2, "mean_ms": 0.3}


def _tuned_version(svc: Svc, dep_id: int) -> int:
    with svc.db.session() as s:
        job = JobRow(kind="nightly", deployment_id=dep_id, payload={}, status="succeeded", attempts=1,
                     max_attempts=3, run_after=0.0, cancel_requested=False, steps=[], logs="",
                     result={"recommendation": {"policy": "chisel", "expected": EXPECTED}}, created_at=0.0)
        s.add(job)
        s.flush()
        row = add_version(s, dep_id, {"policy": "chisel", "params": {"split_keys": 8, "merge": 2,
                                                                      "elephant_threshold": 20}},
                          source="tuning", job_id=job.id, settings=svc.settings)
        return row.version


def test_client_report_gives_expected_vs_observed(svc: Svc, memcached_node: MemcachedNode) -> None:
    from tailtune_client.memcached import Client

    server = f"{memcached_node.host}:{memcached_node.port}"
    dep_id = int(svc.client.post(f"{API}/deployments", json=memcached_deployment("obs", [server]),
                                 headers=svc.write).json()["id"])
    version = _tuned_version(svc, dep_id)
    doc = {"deployment_id": dep_id, "version": version, "config": {"memcached_client": {
        "mode": "chisel", "split_keys": 8, "merge": 2, "elephant_threshold": 20}}}
    reporter = {"Authorization": f"Bearer {create_token(svc.db, 'app-reporter', 'report')}"}
    with Client([server], config=doc) as c:
        c.set_many({f"k{i}": b"v" for i in range(60)})
        for n in (1, 5, 30, 60):
            assert len(c.get_many([f"k{i}" for i in range(n)])) == n
        payload: dict[str, Any] = dict(c.report())
    r = svc.client.post(f"{API}/deployments/{dep_id}/observations", json=payload, headers=reporter)
    assert r.status_code == 200, r.text
    assert r.json()["stored"] >= 1
    # resending the same window replaces it (no double count)
    assert svc.client.post(f"{API}/deployments/{dep_id}/observations", json=payload,
                           headers=reporter).status_code == 200
    view = svc.client.get(f"{API}/deployments/{dep_id}/observations", headers=svc.read).json()
    (row,) = [v for v in view if v["config_version"] == version]
    assert row["expected"] == EXPECTED
    assert row["observed"]["requests"] == 4 and row["clients"] == 1
    assert row["observed"]["classes"]["51+"]["requests"] == 1
    assert set(row["error"]) == {"p50_pct", "p95_pct", "p99_pct"}
    # the report token may only report
    assert svc.client.get(f"{API}/deployments/{dep_id}/observations", headers=reporter).status_code == 403
    assert svc.client.get(f"{API}/configs/{dep_id}", headers=reporter).status_code == 403
    assert svc.client.post(f"{API}/deployments/{dep_id}/observations", json=payload,
                           headers=svc.read).status_code == 403


def test_bad_reports_are_rejected(svc: Svc) -> None:
    dep_id = int(svc.client.post(f"{API}/deployments", json=memcached_deployment("obs2", ["127.0.0.1:1"]),
                                 headers=svc.write).json()["id"])
    url = f"{API}/deployments/{dep_id}/observations"
    assert svc.client.post(url, json={"schema": "x"}, headers=svc.write).status_code == 422
    bad = {"schema": "tailtune.client.observations/1", "client": {"id": "a"}, "window": {"start": 2, "end": 1},
           "observations": []}
    assert svc.client.post(url, json=bad, headers=svc.write).status_code == 422


def test_percentiles_match_the_client_estimator() -> None:
    from tailtune_client.histogram import LogHistogram

    hs = []
    for seed in range(3):
        h = LogHistogram()
        for i in range(1, 500):
            h.record(float((i * 37 + seed * 101) % 5000 + 50))
        hs.append(h)
    merged_client = hs[0].copy()
    for h in hs[1:]:
        merged_client.merge(h)
    mine = merge_histograms([h.to_json() for h in hs])
    ref: dict[str, Any] = dict(merged_client.to_json())
    for q, key in ((0.5, "p50_ms"), (0.95, "p95_ms"), (0.99, "p99_ms")):
        assert percentile_ms(mine, q) == pytest.approx(ref[key], abs=2e-6)
