"""Configs are checked like the simulator checks its parameters, against the registry's own ranges, on both
metadata-DB backends: every parameter of every policy below its range, above it, of the wrong type and NaN is a
422 naming `config.params.NAME` (config versions and a deployment's `current_config`), and nothing is stored;
the target's memcached client block and Cassandra table options are checked too; NaN and Infinity anywhere, and
nesting past `config_max_depth` (or past what the JSON parser can take), are 422s, never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kvsim
import pytest
from fastapi.testclient import TestClient

from service.main import create_app
from simulation.registry import all_policies
from tests.app_fixtures import Svc, cassandra_deployment, memcached_deployment

pytestmark = pytest.mark.db_backends

API = "/api/v1"
SHAPE = {"error", "detail", "field", "problems"}
#: The memcached client runs a complete chisel block (it has no defaults).
CHISEL = {"split_keys": 8, "merge": 2, "elephant_threshold": 50}


def _specs(policy: str) -> tuple[str, str, dict[str, Any], list[kvsim.ParamSpec]]:
    """(deployment kind, policy, the other params a valid config needs, the registry's parameters) of a policy
    id: a Cassandra or memcached policy of the registry, `replica:SELECTOR`, or `fifo+coordinator` (the
    coordinator section's parameters on a queue policy)."""
    if policy in all_policies()["memcached"]:
        spec = next(s for s in kvsim.memcached_policy_specs() if s.name == policy)
        return "memcached", policy, dict(CHISEL) if policy == "chisel" else {}, list(spec.params)
    if policy == "replica" or policy.startswith("replica:"):
        selector = policy.partition(":")[2] or "round-robin"
        return "cassandra", "replica", {"replica": selector}, list(kvsim.replica_spec(selector).params)
    if policy == "fifo+coordinator":  # `driver` is the stock knob's name there (text: java4, python)
        return "cassandra", "fifo", {}, [p for p in kvsim.coordinator_spec().params if p.name != "driver"]
    if policy in kvsim.policy_names():
        return "cassandra", policy, {}, list(kvsim.policy_spec(policy).params)
    return "cassandra", policy, {}, list(kvsim.replica_spec(policy).params)  # c3, ds, heron


POLICIES = [
    *all_policies()["cassandra"],
    *all_policies()["memcached"],
    *(f"replica:{s.name}" for s in kvsim.replica_specs() if s.params),
    "fifo+coordinator",
]


@pytest.fixture
def raw(svc: Svc) -> Iterator[TestClient]:
    """A client that sees 500s as answers instead of raising the server's exception."""
    with TestClient(create_app(svc.settings), raise_server_exceptions=False) as c:
        yield c


def _deployment(raw: TestClient, svc: Svc, kind: str, name: str) -> int:
    body = memcached_deployment(name, ["h:1"]) if kind == "memcached" else cassandra_deployment(name, 9042)
    r = raw.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _text(config: dict[str, Any], bad: str, name: str) -> str:
    """The JSON text of `config` with parameter `name` set to the literal `bad` (NaN is not JSON: the text is
    written by hand, as a client that sends it would)."""
    marker = "__bad__"
    return json.dumps({**config, "params": {**config["params"], name: marker}}).replace(f'"{marker}"', bad)


def _refused(raw: TestClient, svc: Svc, dep: int, config_text: str, field: str) -> None:
    """`config_text` is a 422 naming `field`, as a config version and as the deployment's current_config."""
    headers = {**svc.write, "content-type": "application/json"}
    for method, path, body in (
        ("POST", f"/configs/{dep}/versions", '{"publish": false, "config": ' + config_text + "}"),
        ("PATCH", f"/deployments/{dep}", '{"current_config": ' + config_text + "}"),
    ):
        r = raw.request(method, f"{API}{path}", content=body, headers=headers)
        assert r.status_code == 422, (method, field, config_text, r.status_code, r.text)
        got = r.json()
        assert set(got) == SHAPE and got["field"] == field and got["detail"].startswith(f"{field}: "), r.text


@pytest.mark.parametrize("policy", POLICIES)
def test_every_parameter_of_every_policy_is_checked_against_the_registry(
    svc: Svc, raw: TestClient, policy: str
) -> None:
    kind, name, base, params = _specs(policy)
    dep = _deployment(raw, svc, kind, "v")
    defaults = {p.name: p.default for p in params if p.name != "split_chunks"}  # the client splits by split_keys
    ok = {"policy": name, "params": {**base, **defaults}}
    r = raw.post(f"{API}/configs/{dep}/versions", json={"config": ok, "publish": False}, headers=svc.write)
    assert r.status_code == 201, r.text  # every default is valid: the check refuses only what it must
    config = {"policy": name, "params": dict(base)}
    for p in params:
        field = f"config.params.{p.name}"
        below, above = p.low - max(1.0, abs(p.low)), p.high * 2 + 1
        for bad in (repr(below), repr(above), '"1"', "true", "NaN", "Infinity", "-Infinity"):
            _refused(raw, svc, dep, _text(config, bad, p.name), field)
        if p.domain == "integer":
            _refused(raw, svc, dep, _text(config, repr(p.low + 0.5), p.name), field)
    _refused(raw, svc, dep, _text(config, "1", "no_such_param"), "config.params.no_such_param")
    assert raw.get(f"{API}/configs/{dep}/versions", headers=svc.read).json()[1:] == []  # only the valid one


def test_the_reported_cases_are_refused(svc: Svc, raw: TestClient) -> None:
    cs, mc = _deployment(raw, svc, "cassandra", "c"), _deployment(raw, svc, "memcached", "m")
    cases: list[tuple[int, dict[str, Any], str, str]] = [
        (cs, {"policy": "rein", "params": {"k": -4}}, "config.params.k", "must be an integer in [1, 64], got -4"),
        (cs, {"policy": "rein", "params": {"k": 2**63}}, "config.params.k", "must be an integer in [1, 64]"),
        (cs, {"policy": "rein", "params": {"k": 10**400}}, "config.params.k", "out of range"),
        (cs, {"policy": "tailx", "params": {"tl_ms": -1}}, "config.params.tl_ms", "[0, 1e6] ms"),
        (
            cs,
            {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 2**63}},
            "config.params.driver.speculative_execution.max_executions",
            "must be an integer in [1, 2147483647]",  # a Java int
        ),
        (  # what the Java driver takes but the simulator (the nightly's baseline replay) cannot
            cs,
            {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 17}},
            "config.params.driver.speculative_execution.max_executions",
            "simulator's range [1, 16]",
        ),
        (
            mc,
            {"policy": "chisel", "params": CHISEL,
             "target": {"json": {"memcached_client": {"mode": "chisel", **CHISEL, "merge": 0}}}},
            "config.target.json.memcached_client.merge",
            "must be an integer in [1, 4294967295], got 0",
        ),
        (  # no rendering: the client runs {"mode": policy, **params} and has no defaults
            mc,
            {"policy": "chisel", "params": {"split_keys": 8, "merge": 2}},
            "config.params.elephant_threshold",
            "the client has no defaults",
        ),
        (
            mc,
            {"policy": "chisel", "params": {"split_chunks": 4, "merge": 2, "elephant_threshold": 5}},
            "config.params.split_keys",
            "it has no split_chunks",
        ),
        (
            mc,
            {"policy": "chisel", "params": CHISEL, "target": {"json": {"memcached_client": {"mode": "lifo"}}}},
            "config.target.json.memcached_client.mode",
            "batching, chisel",
        ),
        (
            cs,
            {"policy": "fifo", "target": {"table_options": {"ks.a": {"speculative_retry": "101p"}}}},
            "config.target.table_options.ks.a.speculative_retry",
            "between 0.0 and 100.0",
        ),
    ]
    for dep, config, field, needle in cases:
        r = raw.post(f"{API}/configs/{dep}/versions", json={"config": config, "publish": False}, headers=svc.write)
        assert r.status_code == 422 and r.json()["field"] == field, r.text
        assert r.json()["detail"].startswith(f"{field}: ") and needle in r.json()["detail"], r.text
    for dep in (cs, mc):
        assert raw.get(f"{API}/configs/{dep}/versions", headers=svc.read).json() == []


def test_a_python_driver_target_the_client_refuses_is_refused(svc: Svc, raw: TestClient) -> None:
    body = {**cassandra_deployment("py", 9042), "driver": "python"}
    dep = int(raw.post(f"{API}/deployments", json=body, headers=svc.write).json()["id"])
    rendered = {"python": {"load_balancing": {"shuffle_replicas": "yes"}, "speculative_execution": None}}
    config = {"policy": "stock", "params": {}, "target": {"driver": rendered}}
    r = raw.post(f"{API}/configs/{dep}/versions", json={"config": config, "publish": False}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "config.target.driver.python", r.text
    assert "shuffle_replicas must be true/false" in r.json()["detail"]
    java_only = {"policy": "stock", "params": {}, "target": {"driver": {"java": "...", "python": None}}}
    r = raw.post(f"{API}/configs/{dep}/versions", json={"config": java_only, "publish": False}, headers=svc.write)
    assert r.status_code == 422 and "Java driver 4 only" in r.json()["detail"], r.text


def test_non_finite_numbers_anywhere_in_a_config_are_refused(svc: Svc, raw: TestClient) -> None:
    mc = _deployment(raw, svc, "memcached", "nan")
    headers = {**svc.write, "content-type": "application/json"}
    for literal in ("NaN", "Infinity", "-Infinity"):
        text = '{"config": {"policy": "batching", "params": {}, "target": {"notes": [1, {"x": LIT}]}}}'
        text = text.replace("LIT", literal)
        r = raw.post(f"{API}/configs/{mc}/versions", content=text, headers=headers)
        assert r.status_code == 422 and r.json()["field"] == "config.target.notes[1].x", r.text
        assert "NaN and Infinity are not JSON" in r.json()["detail"]
    assert raw.get(f"{API}/configs/{mc}/versions", headers=svc.read).json() == []


def _nested(depth: int) -> str:
    """A config whose target nests objects so that the config is `depth` levels deep (the config is level 1)."""
    inner = "{}"
    for _ in range(depth - 2):
        inner = '{"a": ' + inner + "}"
    return '{"policy": "batching", "params": {}, "target": ' + inner + "}"


def test_nesting_is_bounded_before_anything_walks_the_config(svc: Svc, raw: TestClient) -> None:
    mc = _deployment(raw, svc, "memcached", "deep")
    headers = {**svc.write, "content-type": "application/json"}

    def post(config_text: str) -> Any:
        return raw.post(f"{API}/configs/{mc}/versions", content='{"publish": false, "config": ' + config_text + "}",
                        headers=headers)

    assert svc.settings.config_max_depth == 32
    r = post(_nested(32))
    assert r.status_code == 201, r.text  # stored and answered
    for depth in (33, 300, 900):  # 260 and more was a 500: the answer could not be serialised
        r = post(_nested(depth))
        assert r.status_code == 422 and set(r.json()) == SHAPE, (depth, r.status_code, r.text[:300])
        assert r.json()["field"].startswith("config.target.a.a") and "config_max_depth" in r.json()["detail"]
    # deeper than Python's JSON parser goes: the same 422, in the same shape
    r = post(_nested(10_000))
    assert r.status_code == 422 and set(r.json()) == SHAPE and r.json()["field"] == "body", r.text[:300]
    r = raw.patch(f"{API}/deployments/{mc}", content='{"current_config": ' + _nested(10_000) + "}", headers=headers)
    assert r.status_code == 422 and set(r.json()) == SHAPE, r.text[:300]
    svc.settings.config_max_depth = 8  # the limit is a setting
    assert post(_nested(9)).status_code == 422
    assert post(_nested(8)).status_code == 201
    assert len(raw.get(f"{API}/configs/{mc}/versions", headers=svc.read).json()) == 2
