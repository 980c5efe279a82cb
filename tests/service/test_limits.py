"""Resource limits at the API: JSON bodies, stored configs, listings, tune parameters; configs checked against
the simulator's policy vocabulary; the Host allow-list and the docs page served without a CDN.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.app_fixtures import Svc, cassandra_deployment, memcached_deployment

API = "/api/v1"


def _dep(svc: Svc, name: str = "lim", kind: str = "memcached") -> int:
    body = memcached_deployment(name, ["127.0.0.1:1"]) if kind == "memcached" else cassandra_deployment(name, 1)
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def test_json_bodies_are_capped(svc: Svc) -> None:
    dep = _dep(svc)
    svc.settings.api_max_body_bytes = 10_000
    big = {"deployment_id": dep, "dataset_ids": ["abcd"], "pad": "x" * 20_000}
    r = svc.client.post(f"{API}/jobs", json=big, headers=svc.write)
    assert r.status_code == 413 and r.json()["error"] == "too_large" and r.json()["field"] == "body"

    def chunks() -> Any:  # no Content-Length: counted as it streams
        yield b'{"deployment_id": 1, "pad": "'
        for _ in range(30):
            yield b"x" * 1000
        yield b'"}'

    r = svc.client.post(
        f"{API}/jobs", content=chunks(), headers={**svc.write, "content-type": "application/json"}
    )
    assert r.status_code == 413, r.text
    r = svc.client.patch(
        f"{API}/deployments/{dep}", json={"current_config": {"policy": "batching", "target": {"x": "y" * 20_000}}},
        headers=svc.write,
    )
    assert r.status_code == 413
    # uploads stream under their own limit
    r = svc.client.post(f"{API}/traces?name=t.csv", content=b"request_id,ts,key\n" * 1000, headers=svc.write)
    assert r.status_code == 202, r.text
    with svc.db.session() as s:
        from sqlalchemy import func, select

        from control.db import JobRow

        assert s.scalar(select(func.count()).select_from(JobRow).where(JobRow.kind == "nightly")) == 0


def test_stored_configs_are_capped(svc: Svc) -> None:
    dep = _dep(svc)
    svc.settings.config_max_bytes = 2_000
    cfg = {"policy": "chisel", "params": {"merge": 2}, "target": {"memcached": {"note": "n" * 3_000}}}
    r = svc.client.post(f"{API}/configs/{dep}/versions", json={"config": cfg}, headers=svc.write)
    assert r.status_code == 413 and r.json()["field"] == "config" and "config_max_bytes" in r.json()["detail"]
    r = svc.client.patch(f"{API}/deployments/{dep}", json={"current_config": cfg}, headers=svc.write)
    assert r.status_code == 413
    body = {**memcached_deployment("big-current", ["h:1"]), "current_config": cfg}
    assert svc.client.post(f"{API}/deployments", json=body, headers=svc.write).status_code == 413
    assert svc.client.get(f"{API}/configs/{dep}/versions", headers=svc.read).json() == []


def test_listings_are_pages(svc: Svc) -> None:
    dep = _dep(svc)
    for _ in range(5):
        r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep}, headers=svc.write)
        assert r.status_code == 202
    ids = [j["id"] for j in svc.client.get(f"{API}/jobs", headers=svc.read).json()]
    assert len(ids) == 5 and ids == sorted(ids, reverse=True)
    got = svc.client.get(f"{API}/jobs?limit=2&offset=1", headers=svc.read).json()
    assert [j["id"] for j in got] == ids[1:3]
    assert all("logs" not in j for j in got)  # a listing leaves the logs out; GET /jobs/{id} has them
    assert "logs" in svc.client.get(f"{API}/jobs/{ids[0]}", headers=svc.read).json()
    svc.settings.api_max_list = 3
    for path in ("/jobs", "/traces", "/analyses", "/deployments", "/schedules", f"/configs/{dep}/versions"):
        r = svc.client.get(f"{API}{path}?limit=4", headers=svc.read)
        assert r.status_code == 422 and r.json()["field"] == "limit", path
        assert svc.client.get(f"{API}{path}?limit=3", headers=svc.read).status_code == 200, path
    for i in range(4):
        _dep(svc, f"more{i}")
    assert len(svc.client.get(f"{API}/deployments?limit=2", headers=svc.read).json()) == 2


@pytest.mark.parametrize(
    ("tune", "field"),
    [
        ({"trials": 10**9}, "tune.trials"),
        ({"trials": 2**70}, "tune.trials"),
        ({"trials": -1}, "tune.trials"),
        ({"trials": "1e9"}, "tune.trials"),
        ({"trials": 1e9}, "tune.trials"),
        ({"trials": 5.5}, "tune.trials"),
        ({"seeds": 10**6}, "tune.seeds"),
        ({"seeds": 0}, "tune.seeds"),
        ({"timeout_s": 10**9}, "tune.timeout_s"),
        ({"timeout_s": -3}, "tune.timeout_s"),
        ({"trails": 5}, "tune.trails"),
    ],
)
def test_tune_parameters_are_checked_at_the_api(svc: Svc, tune: dict[str, Any], field: str) -> None:
    dep = _dep(svc)
    r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep, "tune": tune}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    svc.settings.tune_max_trials = 7
    r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep, "tune": {"trials": 8}}, headers=svc.write)
    assert r.status_code == 422 and "tune_max_trials" in r.json()["detail"]
    r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep, "tune": {"trials": 7}}, headers=svc.write)
    assert r.status_code == 202


def test_a_bad_stored_payload_fails_the_job_before_any_step(svc: Svc) -> None:
    """A payload written before the checks (or by hand) fails at once, naming the job payload, not the CLI."""
    from control.queue import enqueue
    from jobs.handlers import default_handlers
    from jobs.worker import Worker

    dep = _dep(svc)
    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, "nightly", {"tune": {"trials": -1}}, deployment_id=dep).id
    w = Worker(svc.settings, svc.db, "w", handlers=default_handlers(), schedule=False)
    assert w.run_once() == "failed"
    job = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert job["attempts"] == 1 and job["steps"] == []
    assert "job payload" in job["error"] and "tune.trials" in job["error"]
    assert "command line" not in job["error"]


@pytest.mark.parametrize(
    ("kind", "config", "field"),
    [
        ("memcached", {"policy": "batching", "params": {"batch": 8}}, "config.params.batch"),
        ("memcached", {"policy": "'; DROP TABLE x;--"}, "config.policy"),
        ("memcached", {"policy": "rein", "params": {"k": 4}}, "config.policy"),
        ("memcached", {"policy": "chisel", "params": {"merge": 0}}, "config.params.merge"),
        ("memcached", {"policy": "chisel", "params": {"merge": "2"}}, "config.params.merge"),
        ("memcached", {"policy": "chisel", "params": {"merge": 2**63}}, "config.params.merge"),
        ("memcached", {"policy": "chisel", "extra": 1}, "config.extra"),
        ("cassandra", {"policy": "chisel"}, "config.policy"),
        ("cassandra", {"policy": "rein", "params": {"nope": 1}}, "config.params.nope"),
        ("cassandra", {"policy": "rein", "params": {"k": True}}, "config.params.k"),
        ("cassandra", {"policy": "fifo", "params": {"replica": "nope"}}, "config.params.replica"),
        ("cassandra", {"policy": "heron", "params": {"queue": 5}}, "config.params.queue"),
    ],
)
def test_configs_use_the_policy_vocabulary(svc: Svc, kind: str, config: dict[str, Any], field: str) -> None:
    dep = _dep(svc, "voc", kind)
    r = svc.client.post(f"{API}/configs/{dep}/versions", json={"config": config}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    r = svc.client.patch(f"{API}/deployments/{dep}", json={"current_config": config}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert svc.client.get(f"{API}/configs/{dep}/versions", headers=svc.read).json() == []


def test_valid_configs_of_both_kinds_are_accepted(svc: Svc) -> None:
    mc, cs = _dep(svc, "okm"), _dep(svc, "okc", "cassandra")
    for dep, cfg in (
        (mc, {"policy": "batching", "params": {}}),
        (mc, {"policy": "chisel", "params": {"split_keys": 8, "merge": 2, "elephant_threshold": 50},
              "target": {"memcached": {}}}),
        (cs, {"policy": "rein", "params": {"k": 4, "range_factor": 3.5}}),
        (cs, {"policy": "heron", "params": {"queue": "rein"}}),
        (cs, {"policy": "replica", "params": {"replica": "c3"}}),
    ):
        r = svc.client.post(f"{API}/configs/{dep}/versions", json={"config": cfg, "publish": False}, headers=svc.write)
        assert r.status_code == 201, r.text


def test_rollback_to_a_config_that_is_no_longer_valid_is_refused(svc: Svc) -> None:
    from control.db import ConfigVersionRow

    dep = _dep(svc)
    with svc.db.session() as s:  # a version stored before the vocabulary was checked
        s.add(ConfigVersionRow(deployment_id=dep, version=1, config={"policy": "batching", "params": {"batch": 8}},
                               source="manual", job_id=None, note=None, published={}, created_at=0.0))
    r = svc.client.post(f"{API}/configs/{dep}/rollback", json={"version": 1}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "config.params.batch"


def test_host_header_allow_list(svc: Svc) -> None:
    from fastapi.testclient import TestClient

    from service.main import create_app

    dep = _dep(svc)
    svc.client.post(f"{API}/configs/{dep}/versions", json={"config": {"policy": "batching"}}, headers=svc.write)
    with TestClient(create_app(svc.settings), client=("127.0.0.1", 40000)) as local:
        assert local.get(f"{API}/deployments", headers={"host": "localhost:8000"}).status_code == 200
        assert local.get(f"{API}/deployments", headers={"host": "[::1]:8000"}).status_code == 200
        for evil in ("attacker.example", "attacker.example:8000", "127.0.0.1.nip.io"):
            for path in (f"{API}/deployments", f"{API}/configs/{dep}", f"{API}/configs/{dep}"):  # 2nd: cached
                r = local.get(path, headers={"host": evil})
                assert r.status_code == 400 and r.json()["field"] == "Host", (evil, path)
        svc.settings.api_allowed_hosts = ["*"]
        assert local.get(f"{API}/deployments", headers={"host": "anything.example"}).status_code == 200


def test_docs_are_served_without_a_cdn(svc: Svc) -> None:
    for page, asset in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        r = svc.client.get(page)
        assert r.status_code == 200
        assert "cdn" not in r.text.lower() and "https://" not in r.text, r.text
        src = next(part.split('"')[0] for part in r.text.split('src="')[1:] if asset in part.split('"')[0])
        js = svc.client.get(src)
        assert js.status_code == 200 and len(js.content) > 100_000
    assert json.loads(svc.client.get("/openapi.json").text)["info"]["title"] == "tailtune"
