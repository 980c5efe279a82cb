"""TestClient tests of every resource: deployments, jobs, schedules, configs, analyses, health, auth, errors.
"""

from __future__ import annotations

import hashlib

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from control.db import ApiTokenRow
from jobs.handlers import default_handlers
from jobs.worker import Worker
from service.main import create_app
from tests.app_fixtures import Svc, memcached_deployment

pytestmark = pytest.mark.db_backends  # each test runs on SQLite and on PostgreSQL

API = "/api/v1"


def _deployment(svc: Svc, name: str = "cache-eu") -> int:
    r = svc.client.post(
        f"{API}/deployments", json=memcached_deployment(name, ["127.0.0.1:1"]), headers=svc.write
    )
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _resource_routes() -> dict[str, set[str]]:
    """Every resource package `service/<name>/` with a `router.py` → the paths of its router's routes."""
    import importlib
    from pathlib import Path

    import service

    root = Path(service.__file__).parent
    out: dict[str, set[str]] = {}
    for d in sorted(root.iterdir()):
        if (d / "router.py").is_file():
            router = importlib.import_module(f"service.{d.name}.router").router
            out[d.name] = {r.path for r in router.routes if getattr(r, "include_in_schema", True)}
    return out


def test_openapi_lists_every_resource(svc: Svc) -> None:
    """Every route of every resource package's router is served (`service/main.py` mounts them): a resource
    left out of it fails here."""
    paths = set(svc.client.get("/openapi.json").json()["paths"])
    routes = _resource_routes()
    assert {"traces", "analyses", "deployments", "observations", "jobs", "schedules", "configs", "health"} <= set(
        routes
    )
    for resource, own in routes.items():
        assert own and {f"{API}{p}" for p in own} <= paths, resource
    assert svc.client.get("/docs").status_code == 200


def test_deployment_crud_and_field_errors(svc: Svc) -> None:
    dep_id = _deployment(svc)
    got = svc.client.get(f"{API}/deployments/{dep_id}", headers=svc.read).json()
    assert got["name"] == "cache-eu" and got["kind"] == "memcached" and got["timezone"] == "Europe/Berlin"
    # a memcached deployment's topology is its connection's servers (what its tune replays), not the fields given
    assert got["topology"] == {"servers": len(got["connection"]["servers"])}
    assert got["sources"] == {"topology.servers": "declared"} and "driver" not in got
    r = svc.client.patch(
        f"{API}/deployments/{dep_id}", json={"timezone": "America/New_York"}, headers=svc.write
    )
    assert r.json()["timezone"] == "America/New_York"
    # same name again → 409 naming the field
    r = svc.client.post(
        f"{API}/deployments", json=memcached_deployment("cache-eu", ["127.0.0.1:1"]), headers=svc.write
    )
    assert r.status_code == 409 and r.json()["field"] == "name"
    # bad fields → 422 naming each
    bad = memcached_deployment("Bad Name!", ["127.0.0.1:1"])
    r = svc.client.post(f"{API}/deployments", json=bad, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "name"
    bad = memcached_deployment("ok", ["nohostport"])
    assert (
        svc.client.post(f"{API}/deployments", json=bad, headers=svc.write).json()["field"]
        == "connection.servers"
    )
    bad = {**memcached_deployment("ok", ["h:1"]), "timezone": "Mars/Olympus"}
    assert svc.client.post(f"{API}/deployments", json=bad, headers=svc.write).json()["field"] == "timezone"
    bad = {**memcached_deployment("ok", ["h:1"]), "topology": {"servers": 2, "replication": 3}}
    r = svc.client.post(f"{API}/deployments", json=bad, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"].startswith("topology")
    assert svc.client.get(f"{API}/deployments/999", headers=svc.read).json()["field"] == "deployment_id"
    assert svc.client.delete(f"{API}/deployments/{dep_id}", headers=svc.write).status_code == 204
    assert svc.client.get(f"{API}/deployments", headers=svc.read).json() == []


def test_auth_scopes_and_hashed_tokens(svc: Svc) -> None:
    body = memcached_deployment("x1", ["h:1"])
    r = svc.client.post(f"{API}/deployments", json=body)
    assert r.status_code == 401 and r.json()["field"] == "Authorization"
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.read)
    assert r.status_code == 403
    r = svc.client.get(f"{API}/deployments", headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    assert svc.client.get(f"{API}/deployments").status_code == 401  # "testclient" is not localhost
    # only hashes are stored
    token = svc.write["Authorization"].split()[1]
    with svc.db.session() as s:
        stored = set(s.scalars(select(ApiTokenRow.sha256)))
    assert hashlib.sha256(token.encode()).hexdigest() in stored and token not in stored
    # reads open from localhost, writes never
    with TestClient(create_app(svc.settings), client=("127.0.0.1", 40000)) as local:
        assert local.get(f"{API}/deployments").status_code == 200
        assert local.post(f"{API}/deployments", json=body).status_code == 401


def test_settings_token_hashes(svc: Svc, monkeypatch) -> None:
    from base.settings import get_settings

    digest = hashlib.sha256(b"from-settings").hexdigest()
    monkeypatch.setenv("TAILTUNE_API_TOKENS", f'["read:{digest}"]')
    get_settings.cache_clear()
    with TestClient(create_app()) as c:
        h = {"Authorization": "Bearer from-settings"}
        assert c.get(f"{API}/deployments", headers=h).status_code == 200
        assert (
            c.post(f"{API}/deployments", json=memcached_deployment("z", ["h:1"]), headers=h).status_code
            == 403
        )


def test_jobs_run_now_list_show_cancel(svc: Svc) -> None:
    dep_id = _deployment(svc)
    r = svc.client.post(
        f"{API}/jobs", json={"deployment_id": dep_id, "tune": {"trials": 5}}, headers=svc.write
    )
    assert r.status_code == 202
    job = r.json()
    assert job["status"] == "queued" and job["kind"] == "nightly"
    assert job["payload"]["tune"] == {"trials": 5, "seeds": 3}
    assert [
        j["id"] for j in svc.client.get(f"{API}/jobs?deployment_id={dep_id}", headers=svc.read).json()
    ] == [job["id"]]
    assert svc.client.get(f"{API}/jobs?status=bogus", headers=svc.read).json()["field"] == "status"
    r = svc.client.post(f"{API}/jobs/{job['id']}/cancel", headers=svc.write)
    assert r.json()["status"] == "cancelled"
    assert svc.client.post(f"{API}/jobs/{job['id']}/cancel", headers=svc.write).status_code == 409
    assert svc.client.post(f"{API}/jobs", json={"deployment_id": 999}, headers=svc.write).status_code == 404
    assert svc.client.get(f"{API}/jobs/12345", headers=svc.read).status_code == 404


def test_schedules(svc: Svc) -> None:
    dep_id = _deployment(svc)
    r = svc.client.post(f"{API}/schedules", json={"deployment_id": dep_id}, headers=svc.write)
    assert r.status_code == 201
    sched = r.json()
    assert sched["cron"] == "0 2 * * *" and sched["timezone"] == "Europe/Berlin"  # nightly, deployment's zone
    nxt = sched["next_run"]
    assert nxt is not None
    r = svc.client.post(
        f"{API}/schedules", json={"deployment_id": dep_id, "cron": "61 * * * *"}, headers=svc.write
    )
    assert r.status_code == 422 and r.json()["field"] == "cron"
    r = svc.client.patch(f"{API}/schedules/{sched['id']}", json={"enabled": False}, headers=svc.write)
    assert r.json()["enabled"] is False and r.json()["next_run"] is None
    assert len(svc.client.get(f"{API}/schedules?deployment_id={dep_id}", headers=svc.read).json()) == 1
    assert svc.client.delete(f"{API}/schedules/{sched['id']}", headers=svc.write).status_code == 204


def test_configs_etag_history_diff_rollback(svc: Svc) -> None:
    dep_id = _deployment(svc)
    c = svc.client
    assert c.get(f"{API}/configs/{dep_id}", headers=svc.read).status_code == 404
    v1 = {"policy": "chisel", "params": {"split_keys": 1024, "merge": 4, "elephant_threshold": 50}}
    v2 = {"policy": "chisel", "params": {"split_keys": 2048, "elephant_threshold": 50},
          "target": {"json": {"memcached_client": {"mode": "chisel", "split_keys": 2048, "merge": 1,
                                                   "elephant_threshold": 50}}}}
    r = c.post(f"{API}/configs/{dep_id}/versions", json={"config": v1, "publish": False}, headers=svc.write)
    assert r.status_code == 201 and r.json()["version"] == 1
    r = c.post(f"{API}/configs/{dep_id}/versions", json={"config": v2}, headers=svc.write)
    assert r.json()["version"] == 2 and r.json()["job_id"] is not None  # publish job queued
    r = c.get(f"{API}/configs/{dep_id}", headers=svc.read)
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["config"] == v2
    etag = r.headers["etag"]
    assert etag == f'"{dep_id}-2"'
    r = c.get(f"{API}/configs/{dep_id}", headers={**svc.read, "If-None-Match": etag})
    assert r.status_code == 304 and r.content == b""
    d = c.get(f"{API}/configs/{dep_id}/diff?from=1&to=2", headers=svc.read).json()
    assert d == {
        "from_version": 1,
        "to_version": 2,
        "added": {
            "target.json.memcached_client.elephant_threshold": 50,
            "target.json.memcached_client.merge": 1,
            "target.json.memcached_client.mode": "chisel",
            "target.json.memcached_client.split_keys": 2048,
        },
        "removed": {"params.merge": 4},
        "changed": {"params.split_keys": {"from": 1024, "to": 2048}},
    }
    r = c.post(f"{API}/configs/{dep_id}/rollback", json={"version": 1}, headers=svc.write)
    assert r.status_code == 201 and r.json()["version"] == 3 and r.json()["source"] == "rollback"
    r = c.get(f"{API}/configs/{dep_id}", headers={**svc.read, "If-None-Match": etag})
    assert r.status_code == 200 and r.json()["config"] == v1 and r.headers["etag"] == f'"{dep_id}-3"'
    assert [v["version"] for v in c.get(f"{API}/configs/{dep_id}/versions", headers=svc.read).json()] == [
        3,
        2,
        1,
    ]
    r = c.post(f"{API}/configs/{dep_id}/versions", json={"config": {"params": {}}}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "config.policy"
    r = c.post(f"{API}/configs/{dep_id}/publish", json={}, headers=svc.write)
    assert r.status_code == 202 and r.json()["version"] == 3
    assert c.get(f"{API}/configs/{dep_id}/versions/9", headers=svc.read).json()["field"] == "version"


def test_analyses_errors(svc: Svc) -> None:
    c = svc.client
    r = c.post(f"{API}/analyses", json={"trace_id": 42}, headers=svc.write)
    assert r.status_code == 404 and r.json()["field"] == "trace_id"
    r = c.post(f"{API}/analyses", json={}, headers=svc.write)
    assert r.status_code == 422
    r = c.post(f"{API}/analyses", json={"dataset_id": "../../etc"}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "dataset_id"
    assert c.get(f"{API}/analyses/3/summary.json", headers=svc.read).status_code == 404


def test_health_and_readiness(svc: Svc) -> None:
    assert svc.client.get(f"{API}/health").json() == {"status": "ok"}
    _deployment(svc)
    r = svc.client.get(f"{API}/health/ready", headers=svc.read)
    assert r.status_code == 503
    body = r.json()
    checks = {c["name"]: c["ok"] for c in body["checks"]}
    assert checks == {"database": True, "worker": False, "mlflow": True, "optuna": True, "disk": True}
    assert body["targets"][0]["name"] == "cache-eu (memcached)" and body["targets"][0]["ok"] is False
    Worker(svc.settings, svc.db, "w-health", handlers=default_handlers(), schedule=False).beat()
    r = svc.client.get(f"{API}/health/ready", headers=svc.read)
    assert r.status_code == 200 and r.json()["ready"] is True


def test_config_fast_path_answers_like_the_route(svc: Svc) -> None:
    from control.configs_cache import latest_cache

    dep_id = _deployment(svc)
    cfg = {"policy": "chisel", "params": {"split_keys": 1, "merge": 1, "elephant_threshold": 50}}
    svc.client.post(
        f"{API}/configs/{dep_id}/versions", json={"config": cfg, "publish": False}, headers=svc.write
    )
    latest_cache.drop(dep_id)
    cold = svc.client.get(f"{API}/configs/{dep_id}", headers=svc.read)  # FastAPI route (cache miss)
    assert latest_cache.get(svc.db, dep_id, 60.0) is not None
    hot = svc.client.get(f"{API}/configs/{dep_id}", headers=svc.read)  # fast path (cache hit)
    assert (hot.status_code, hot.content, hot.headers["etag"]) == (
        cold.status_code,
        cold.content,
        cold.headers["etag"],
    )
    assert hot.json()["config"] == cfg
    for h in ({}, {"Authorization": "Bearer wrong"}):  # the fast path never lets an unknown caller through
        r = svc.client.get(f"{API}/configs/{dep_id}", headers=h)
        assert r.status_code == 401 and r.json()["field"] == "Authorization"
    both = 'W/"x", ' + cold.headers["etag"]
    r = svc.client.get(f"{API}/configs/{dep_id}", headers={**svc.read, "If-None-Match": both})
    assert r.status_code == 304


def test_if_none_match_compares_weakly_on_the_route_and_the_fast_path(svc: Svc) -> None:
    """RFC 9110 §13.1.2: If-None-Match uses weak comparison — `W/"x"` matches `"x"`; lists; `*`."""
    from control.configs_cache import latest_cache

    dep_id = _deployment(svc)
    for v in (1, 2, 3):
        cfg = ({"policy": "batching", "params": {}} if v != 2 else
               {"policy": "chisel", "params": {"split_keys": 2, "merge": 4, "elephant_threshold": 64}})
        body = {"config": cfg, "publish": False}
        assert svc.client.post(f"{API}/configs/{dep_id}/versions", json=body, headers=svc.write).status_code == 201
    tag = f'"{dep_id}-3"'
    hits = [f"W/{tag}", tag, f'"other", W/{tag}', f'W/"other",{tag}', f'"a,b" , W/{tag}', "*", f" W/{tag} "]
    misses = [f'W/"{dep_id}-2"', f'"{dep_id}-2", W/"{dep_id}-1"', f"{dep_id}-3", f'"W/{tag[1:]}', '"a, W/"']
    for path in ("route", "fast path"):
        for wanted in hits + misses:
            if path == "route":
                latest_cache.drop(dep_id)  # a cache miss goes to the FastAPI route
            r = svc.client.get(f"{API}/configs/{dep_id}", headers={**svc.read, "If-None-Match": wanted})
            expected = 304 if wanted in hits else 200
            assert (r.status_code, r.headers["etag"]) == (expected, tag), (path, wanted)
            assert r.content == b"" if expected == 304 else r.json()["version"] == 3


def test_failed_auth_is_cheap_and_bounded(svc: Svc, monkeypatch) -> None:
    """A flood of wrong tokens does not reach the DB: the token table is read at most once per cache period,
    whatever the rate (counted, not timed)."""
    from control import tokens as auth

    monkeypatch.setattr(auth, "_CACHE_S", 3600.0)
    auth._cache.clear()
    assert svc.client.get(f"{API}/deployments", headers=svc.read).status_code == 200
    before = auth._cache.reloads
    for i in range(300):
        r = svc.client.get(f"{API}/deployments", headers={"Authorization": f"Bearer wrong-{i}"})
        assert r.status_code == 401
    assert auth._cache.reloads - before == 0
    assert svc.client.get(f"{API}/deployments", headers=svc.read).status_code == 200  # good clients still in
    auth._cache.clear()  # after the period: one reload serves everyone
    for i in range(50):
        svc.client.get(f"{API}/deployments", headers={"Authorization": f"Bearer wrong-{i}"})
    assert auth._cache.reloads - before == 1
