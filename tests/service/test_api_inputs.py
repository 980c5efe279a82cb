"""Hostile inputs at the API: out-of-range integers, huge strings, non-finite numbers, wrong methods and paths,
HEAD and PUT — always a 4xx in the documented error shape, never a 500.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from tests.app_fixtures import Svc, memcached_deployment

pytestmark = pytest.mark.db_backends  # the integer bounds matter most on PostgreSQL (INTEGER is 32-bit)

API = "/api/v1"
HUGE = [2**63, 2**64 + 7, 2**31, -(2**63) - 1]
SHAPE = {"error", "detail", "field", "problems"}


@pytest.fixture
def raw(svc: Svc) -> Iterator[TestClient]:
    """A client that sees 500s as answers instead of raising the server's exception."""
    with TestClient(create_app(svc.settings), raise_server_exceptions=False) as c:
        yield c


def _int_params(openapi: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(method, path, param name, where) of every integer path/query parameter of every route."""
    out = []
    for path, ops in openapi["paths"].items():
        for method, op in ops.items():
            for p in op.get("parameters", []):
                schema = p.get("schema", {})
                types = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
                if "integer" in types:
                    out.append((method.upper(), path, p["name"], p["in"]))
    return out


def _fill(path: str, name: str | None = None, value: object = None) -> str:
    import re

    return re.sub(r"\{(\w+)\}", lambda m: str(value) if m.group(1) == name else "1", path)


def test_huge_integers_in_paths_and_queries_are_422(svc: Svc, raw: TestClient) -> None:
    params = _int_params(raw.get("/openapi.json").json())
    assert len(params) >= 15  # every id in a path, limits, filters
    for method, path, name, where in params:
        for big in HUGE:
            if where == "path":
                url, query = _fill(path, name, big), None
            else:
                url, query = _fill(path), {name: str(big)}
            r = raw.request(method, url, params=query, headers=svc.write, json={} if method != "GET" else None)
            assert r.status_code in (404, 422), (method, path, name, big, r.status_code, r.text)
            assert set(r.json()) == SHAPE, r.text
            if r.status_code == 422:
                assert any(p["field"] == name for p in r.json()["problems"]), r.text


def test_huge_integers_in_bodies_are_422(svc: Svc, raw: TestClient) -> None:
    dep = raw.post(f"{API}/deployments", json=memcached_deployment("big", ["h:1"]), headers=svc.write).json()
    bodies: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/jobs", {"deployment_id": 2**63}),
        ("POST", "/jobs", {"deployment_id": dep["id"], "traces": 2**64}),
        ("POST", "/jobs", {"deployment_id": dep["id"], "tune": {"trials": 2**70}}),
        ("POST", "/schedules", {"deployment_id": 2**63}),
        ("POST", "/analyses", {"trace_id": 2**63}),
        ("POST", "/analyses", {"trace_id": 1, "servers": 2**63}),
        ("POST", f"/configs/{dep['id']}/publish", {"version": 2**63}),
        ("POST", f"/configs/{dep['id']}/rollback", {"version": 2**63}),
        ("POST", "/deployments", {**memcached_deployment("big2", ["h:1"]), "topology": {"servers": 2**63}}),
        ("PATCH", f"/deployments/{dep['id']}", {"connection": {"servers": ["h:1"], "port": 2**63}}),
        ("POST", f"/configs/{dep['id']}/versions", {"config": {"policy": "chisel", "params": {"merge": 2**63}}}),
    ]
    for method, path, body in bodies:
        r = raw.request(method, f"{API}{path}", json=body, headers=svc.write)
        assert r.status_code in (404, 422), (path, body, r.status_code, r.text)
        assert set(r.json()) == SHAPE, r.text
    # multipart form fields of an upload too
    r = raw.post(
        f"{API}/traces", files={"file": ("t.csv", b"a\n")}, data={"deployment_id": str(2**63)}, headers=svc.write
    )
    assert r.status_code == 422 and r.json()["field"] == "deployment_id", r.text
    r = raw.post(f"{API}/traces", params={"deployment_id": str(2**63)}, content=b"a\n", headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "deployment_id", r.text


def test_huge_strings_and_non_finite_numbers_are_422(svc: Svc, raw: TestClient) -> None:
    dep = raw.post(f"{API}/deployments", json=memcached_deployment("s1", ["h:1"]), headers=svc.write).json()
    tz = "Europe/" + "x" * 10_000
    cases: list[tuple[str, str, Any]] = [
        ("POST", "/deployments", {**memcached_deployment("s2", ["h:1"]), "timezone": tz}),
        ("PATCH", f"/deployments/{dep['id']}", {"timezone": tz}),
        ("POST", "/schedules", {"deployment_id": dep["id"], "timezone": tz}),
        ("PATCH", f"/deployments/{dep['id']}", {"timezone": "../../../etc/passwd"}),
        ("PATCH", f"/deployments/{dep['id']}", {"connection": {"servers": ["h" * 10_000 + ":1"]}}),
        ("PATCH", f"/deployments/{dep['id']}", {"connection": {"servers": [f"h{i}:1" for i in range(10_000)]}}),
        ("PATCH", f"/deployments/{dep['id']}", {"constraints": {"policies": ["x" * 10_000]}}),
        ("POST", "/jobs", {"deployment_id": dep["id"], "dataset_ids": ["d" * 10_000]}),
    ]
    for method, path, body in cases:
        r = raw.request(method, f"{API}{path}", json=body, headers=svc.write)
        assert r.status_code == 422, (path, r.status_code, r.text[:300])
        assert set(r.json()) == SHAPE and len(r.text) < 20_000
    # Infinity/NaN are not JSON, but Python's parser takes them: they must not reach the DB
    for text in ('{"topology": {"servers": 4, "network_ms": Infinity}}', '{"objective": {"min_improvement": NaN}}'):
        r = raw.patch(
            f"{API}/deployments/{dep['id']}", content=text, headers={**svc.write, "content-type": "application/json"}
        )
        assert r.status_code == 422, r.text


def test_framework_errors_have_the_documented_shape(svc: Svc, raw: TestClient) -> None:
    r = raw.get(f"{API}/nope", headers=svc.read)
    assert r.status_code == 404 and r.json()["error"] == "not_found" and set(r.json()) == SHAPE
    r = raw.delete(f"{API}/jobs", headers=svc.write)
    assert r.status_code == 405 and r.json()["error"] == "method_not_allowed" and set(r.json()) == SHAPE
    assert r.headers["allow"]
    deep = "[" * 100_000 + "]" * 100_000
    r = raw.post(f"{API}/jobs", content=deep, headers={**svc.write, "content-type": "application/json"})
    assert 400 <= r.status_code < 500 and set(r.json()) == SHAPE, r.text[:300]
    r = raw.post(f"{API}/jobs", content=b"{not json", headers={**svc.write, "content-type": "application/json"})
    assert r.status_code == 422 and set(r.json()) == SHAPE


def test_head_is_a_read(svc: Svc, raw: TestClient) -> None:
    dep = raw.post(f"{API}/deployments", json=memcached_deployment("hd", ["h:1"]), headers=svc.write).json()
    get = raw.get(f"{API}/deployments/{dep['id']}", headers=svc.read)
    head = raw.head(f"{API}/deployments/{dep['id']}", headers=svc.read)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == get.headers["content-length"]
    assert raw.head(f"{API}/deployments/{dep['id']}").status_code == 401  # a read still needs a token
    assert raw.head(f"{API}/health").status_code == 200


def test_put_is_the_raw_upload_curl_t_sends(svc: Svc, raw: TestClient) -> None:
    body = b"request_id,ts,key\n0,1.0,a\n"
    r = raw.put(f"{API}/traces?name=t.csv", content=body, headers=svc.write)
    assert r.status_code == 202, r.text
    assert r.json()["name"] == "t.csv" and r.json()["size_bytes"] == len(body)
    # curl -T trace.csv URL/ appends the file name to a URL ending in '/'
    r = raw.put(f"{API}/traces/t2.csv", content=body, headers=svc.write)
    assert r.status_code == 202 and r.json()["name"] == "t2.csv", r.text
    r = raw.put(f"{API}/traces?name=t.csv", content=body, headers=svc.read)
    assert r.status_code == 403 and set(r.json()) == SHAPE


def test_patch_cannot_null_or_empty_what_a_deployment_needs(svc: Svc, raw: TestClient) -> None:
    dep = raw.post(f"{API}/deployments", json=memcached_deployment("pn", ["h:1"]), headers=svc.write).json()
    for body, field in (
        ({"topology": None}, "topology"),
        ({"connection": None}, "connection"),
        ({"timezone": None}, "timezone"),
        ({"connection": {"servers": []}}, "connection.servers"),
        ({"connection": {"contact_points": ["10.0.0.1"]}}, "connection.servers"),
    ):
        r = raw.patch(f"{API}/deployments/{dep['id']}", json=body, headers=svc.write)
        assert r.status_code == 422 and r.json()["field"] == field, (body, r.status_code, r.text)
    assert raw.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()["connection"]["servers"] == ["h:1"]
