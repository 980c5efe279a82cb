"""Request bodies: a value of the wrong type, a huge integer, NaN, a string where a number goes, a cron expression
no date matches — always a 422 naming the field (no coercion: `true` is not an integer, `"yes"` not a boolean),
never a 500. The named cases first, then Hypothesis over every JSON request body of the API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.main import create_app
from tests.app_fixtures import Svc, memcached_deployment

API = "/api/v1"
SHAPE = {"error", "detail", "field", "problems"}
#: Observation reports have their own document checks (tests/service/test_observations.py).
NOT_HERE = {f"{API}/deployments/{{deployment_id}}/observations"}


@pytest.fixture
def raw(svc: Svc) -> Iterator[TestClient]:
    """A client that sees 500s as answers instead of raising the server's exception."""
    with TestClient(create_app(svc.settings), raise_server_exceptions=False) as c:
        r = c.post(f"{API}/deployments", json=memcached_deployment("m1", ["127.0.0.1:11211"]), headers=svc.write)
        assert r.status_code == 201, r.text
        r = c.post(f"{API}/schedules", json={"deployment_id": 1}, headers=svc.write)
        assert r.status_code == 201, r.text
        yield c


def _post(c: TestClient, svc: Svc, method: str, path: str, text: str) -> Any:
    headers = {**svc.write, "content-type": "application/json"}
    return c.request(method, path, content=text.encode(), headers=headers)


def _refused(r: Any, field: str) -> None:
    assert r.status_code == 422, r.text
    body = r.json()
    assert set(body) == SHAPE and body["field"] == field, body


@pytest.mark.parametrize("method,path", [("POST", f"{API}/schedules"), ("PATCH", f"{API}/schedules/1")])
def test_a_cron_expression_no_date_matches_is_422(svc: Svc, raw: TestClient, method: str, path: str) -> None:
    for cron in ("0 2 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"):
        body: dict[str, Any] = {"cron": cron} | ({"deployment_id": 1} if method == "POST" else {})
        r = _post(raw, svc, method, path, json.dumps(body))
        _refused(r, "cron")
        assert "never fires" in r.json()["detail"]
    body = {"cron": "0 0 29 2 *"} | ({"deployment_id": 1} if method == "POST" else {})  # leap years only: fine
    assert _post(raw, svc, method, path, json.dumps(body)).status_code in (200, 201)


def test_canary_fraction_beyond_every_float_is_422(svc: Svc, raw: TestClient) -> None:
    huge = "9" * 401
    config = '{"policy": "batching", "params": {}, "canary_fraction": ' + huge + "}"
    deployment = json.dumps(memcached_deployment("m2", ["127.0.0.1:1"]) | {"current_config": "HOLE"})
    for path, text in (
        (f"{API}/configs/1/versions", '{"config": ' + config + ', "publish": false}'),
        (f"{API}/deployments", deployment.replace('"HOLE"', config)),
    ):
        r = _post(raw, svc, "POST", path, text)
        assert r.status_code == 422, r.text
        assert set(r.json()) == SHAPE and str(r.json()["field"]).endswith("canary_fraction"), r.text


@pytest.mark.parametrize(
    "method,path,body,field",
    [
        ("POST", f"{API}/schedules", {"deployment_id": 1, "traces": True}, "traces"),
        ("POST", f"{API}/schedules", {"deployment_id": 1, "enabled": "yes"}, "enabled"),
        ("PATCH", f"{API}/schedules/1", {"enabled": "yes"}, "enabled"),
        ("PATCH", f"{API}/schedules/1", {"traces": "2"}, "traces"),
        ("POST", f"{API}/schedules", {"deployment_id": 1, "capture": {"duration_s": "10"}}, "capture.duration_s"),
        ("POST", f"{API}/jobs", {"deployment_id": 1, "publish": "no"}, "publish"),
        ("POST", f"{API}/jobs", {"deployment_id": 1, "tune": {"trials": 2.0}}, "tune.trials"),
        ("POST", f"{API}/analyses", {"dataset_id": "abcd", "servers": "16"}, "servers"),
        ("POST", f"{API}/analyses", {"dataset_id": "abcd", "replication": True}, "replication"),
        ("PATCH", f"{API}/deployments/1", {"topology": {"servers": "4"}}, "topology.servers"),
        ("PATCH", f"{API}/deployments/1", {"topology": {"servers": 4, "network_ms": "1"}}, "topology.network_ms"),
        ("PATCH", f"{API}/deployments/1", {"objective": {"min_improvement": True}}, "objective.min_improvement"),
        ("POST", f"{API}/configs/1/versions", {"config": {"policy": "batching"}, "publish": 1}, "publish"),
        ("POST", f"{API}/configs/1/rollback", {"version": 1, "publish": "false"}, "publish"),
        ("POST", f"{API}/deployments/1/discover", {"profile_servers": 1}, "profile_servers"),
    ],
)
def test_a_value_of_the_wrong_type_is_not_coerced(
    svc: Svc, raw: TestClient, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    _refused(_post(raw, svc, method, path, json.dumps(body)), field)


# --- every request body: Hypothesis ------------------------------------------------------------------------------

#: A valid body of each JSON route (deployment 1 and schedule 1 exist; see `raw`).
BASES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", f"{API}/deployments"): memcached_deployment("fz", ["127.0.0.1:11211"]),
    ("PATCH", f"{API}/deployments/1"): {"topology": {"servers": 4}, "objective": {"metric": "p99"}},
    ("POST", f"{API}/deployments/1/discover"): {"profile_servers": False},
    ("POST", f"{API}/deployments/1/verify"): {"version": 1},
    ("POST", f"{API}/schedules"): {"deployment_id": 1, "cron": "0 2 * * *", "traces": 1, "enabled": True},
    ("PATCH", f"{API}/schedules/1"): {"cron": "0 3 * * *", "traces": 2, "enabled": False},
    ("POST", f"{API}/jobs"): {"deployment_id": 1, "traces": 1, "tune": {"trials": 2, "seeds": 1}, "publish": False},
    ("POST", f"{API}/analyses"): {"dataset_id": "abcd", "servers": 16, "replication": 3},
    ("POST", f"{API}/configs/1/versions"): {"config": {"policy": "batching", "params": {}}, "publish": False},
    ("POST", f"{API}/configs/1/publish"): {"version": 1},
    ("POST", f"{API}/configs/1/rollback"): {"version": 1, "publish": False},
    ("POST", f"{API}/deployments/1/replays"): {
        "dataset": "abcd", "configs": [{"name": "A", "spec": "current"}, {"name": "B", "spec": "recommended"}],
        "rate_scale": 1.0, "duration_s": 60.0, "repeats": 1, "block_s": 15.0, "seed": 0},
}

#: What an attacker writes where a value goes (JSON text: NaN and Infinity are what Python's parser takes).
HOSTILE = st.one_of(
    st.sampled_from(
        ["9" * 401, "-" + "9" * 401, str(2**63), str(2**31), "-1", "0", "1e308", "1e309", "-1e309", "NaN",
         "Infinity", "-Infinity", "-0.0", "true", "false", "null", '"yes"', '"1"', '""', '"x"', "[]", "{}",
         '[1, 2]', '{"a": 1}', '"' + "x" * 5000 + '"', '"0 2 31 2 *"', '"\\u0000"', '[' * 40 + ']' * 40]
    ),
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=30).map(json.dumps),
)


def _fields(schema: dict[str, Any], defs: dict[str, Any], prefix: tuple[str, ...] = (), depth: int = 0) -> Iterator[
    tuple[str, ...]
]:
    """Every property path of a request schema (nested models followed through $ref, three levels deep)."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    for sub in schema.get("anyOf", []):
        if "$ref" in sub:
            yield from _fields(sub, defs, prefix, depth)
    for name, prop in schema.get("properties", {}).items():
        path = (*prefix, name)
        yield path
        if depth < 2:
            yield from _fields(prop, defs, path, depth + 1)


def _routes(openapi: dict[str, Any]) -> list[tuple[str, str, list[tuple[str, ...]]]]:
    defs = openapi["components"]["schemas"]
    out = []
    for path, ops in openapi["paths"].items():
        for method, op in ops.items():
            content = op.get("requestBody", {}).get("content", {})
            if "application/json" not in content or path in NOT_HERE:
                continue
            concrete = path.replace("{deployment_id}", "1").replace("{schedule_id}", "1")
            fields = sorted(set(_fields(content["application/json"]["schema"], defs)))
            out.append((method.upper(), concrete, fields))
    return out


def _render(value: Any, hole: tuple[str, ...], text: str) -> str:
    """`value` as JSON with the leaf at `hole` replaced by the raw JSON text `text` (made where missing)."""
    marker = "\u0001HOLE\u0001"
    doc = json.loads(json.dumps(value))
    cur = doc
    for key in hole[:-1]:
        if not isinstance(cur.get(key), dict):
            cur[key] = {}
        cur = cur[key]
    cur[hole[-1]] = marker
    return json.dumps(doc).replace(json.dumps(marker), text)


def test_every_json_route_is_fuzzed(raw: TestClient) -> None:
    routes = {(m, p) for m, p, _ in _routes(raw.get("/openapi.json").json())}
    assert routes == set(BASES), routes ^ set(BASES)


@settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_no_request_body_gives_a_500(svc: Svc, raw: TestClient, data: st.DataObject) -> None:
    routes = _routes(raw.get("/openapi.json").json())
    method, path, fields = data.draw(st.sampled_from(routes), label="route")
    base = BASES[(method, path)]
    in_fields: bool = data.draw(st.booleans(), label="hostile values in fields (else: the whole body)")
    if fields and in_fields:
        holes = data.draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3), label="fields")
        text = json.dumps(base)
        for hole in holes:
            text = _render(json.loads(text), hole, data.draw(HOSTILE, label=".".join(hole)))
    else:
        text = data.draw(HOSTILE, label="body")
    r = _post(raw, svc, method, path, text)
    assert r.status_code < 500, (method, path, text[:300], r.status_code, r.text[:500])
    if r.status_code >= 400:
        assert set(r.json()) == SHAPE, r.text
