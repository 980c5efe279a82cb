"""A write token cannot make the worker send a secret anywhere: only password variables under the rule are ever
read, and only hosts inside the operator's networks are connected to. Checked against an attacker's CQL endpoint
that records every byte it receives (tests/servers/fake_cql.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from control.db import DeploymentRow
from control.egress import PASSWORD_ENV_PREFIX, Egress
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc, admin_headers, cassandra_deployment, memcached_deployment
from tests.servers.fake_cql import FakeCqlServer

API = "/api/v1"
SENSITIVE = ("TAILTUNE_DATABASE_URL", "TAILTUNE_OPTUNA_STORAGE", "TAILTUNE_MLFLOW_TRACKING_URI",
             "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "HOME", "PATH", "TAILTUNE_CASSANDRA_PASSWORD_")


def _run(svc: Svc, n: int = 1) -> list[str | None]:
    w = Worker(svc.settings, svc.db, "w-egress", handlers=default_handlers(), schedule=False)
    return [w.run_once() for _ in range(n)]


def _deployment(svc: Svc, name: str, port: int, password_env: str) -> dict[str, Any]:
    body = cassandra_deployment(name, port)
    body["connection"] = {**body["connection"], "username": "tailtune", "password_env": password_env}  # type: ignore[dict-item]
    r = svc.client.post(f"{API}/deployments", json=body, headers=admin_headers(svc))  # the admin binds it
    assert r.status_code == 201, r.text
    dep: dict[str, Any] = r.json()
    return dep


def _publish(svc: Svc, dep_id: int) -> None:
    r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": {"policy": "fifo", "params": {}}},
                        headers=svc.write)
    assert r.status_code == 201, r.text


def test_the_api_refuses_every_variable_outside_the_rule(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    names = sorted({n for n in (*os.environ, *SENSITIVE) if n.isupper() and len(n) <= 64 and n.isidentifier()})
    refused = [n for n in names if Egress().password_env_problem(n) is not None]
    assert "TAILTUNE_DATABASE_URL" in refused and PASSWORD_ENV_PREFIX in refused  # the bare prefix names nothing
    for i, name in enumerate(refused):
        body = cassandra_deployment(f"egress-{i}", 9042)
        body["connection"] = {**body["connection"], "username": "u", "password_env": name}  # type: ignore[dict-item]
        r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
        assert r.status_code == 422, (name, r.text)
        assert r.json()["field"] == "connection.password_env" and "TAILTUNE_PASSWORD_ENVS" in r.json()["detail"]
    dep = _deployment(svc, "egress-ok", 9042, f"{PASSWORD_ENV_PREFIX}ORDERS")
    r = svc.client.patch(f"{API}/deployments/{dep['id']}",
                         json={"connection": {**dep["connection"], "password_env": "TAILTUNE_DATABASE_URL"}},
                         headers=admin_headers(svc))
    assert r.status_code == 422 and r.json()["field"] == "connection.password_env", r.text
    # the operator can allow a name of their own
    svc.settings.password_envs = ["LEGACY_CASSANDRA_PW"]
    _deployment(svc, "egress-legacy", 9042, "LEGACY_CASSANDRA_PW")


def test_no_variable_outside_the_rule_leaves_the_worker(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> None:
    allowed_secret, stolen_secrets = "allowed-pw-7c1e", {"AWS_SECRET_ACCESS_KEY": "aws-secret-55d0",
                                                         "TAILTUNE_DATABASE_URL": None}
    monkeypatch.setenv(f"{PASSWORD_ENV_PREFIX}FAKE", allowed_secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-55d0")
    stolen_secrets["TAILTUNE_DATABASE_URL"] = svc.settings.resolved_database_url
    svc.settings.job_max_attempts = 1
    svc.settings.publish_attempts = 1
    with FakeCqlServer() as fake:
        # the recorder works: an allowed variable's password does reach the endpoint the deployment names
        dep = _deployment(svc, "egress-control", fake.port, f"{PASSWORD_ENV_PREFIX}FAKE")
        _publish(svc, dep["id"])
        assert _run(svc) == ["failed"]  # the fake never lets the driver in
        assert allowed_secret.encode() in fake.received()
    for name, secret in stolen_secrets.items():
        assert secret
        with FakeCqlServer() as fake:
            dep = _deployment(svc, f"egress-{name.lower().replace('_', '-')}", fake.port,
                              f"{PASSWORD_ENV_PREFIX}FAKE")
            # a row the API would refuse, written straight into the database
            with svc.db.session() as s:
                row = s.get(DeploymentRow, dep["id"])
                assert row is not None
                row.connection = {**row.connection, "password_env": name}
            _publish(svc, dep["id"])
            assert _run(svc) == ["failed"]
            assert fake.connections == 0 and fake.received() == b""
            job = svc.client.get(f"{API}/jobs?deployment_id={dep['id']}", headers=svc.read).json()[0]
            text = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).text
            assert "is not a variable the worker may read" in text and secret not in text
            got = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()
            assert got["publish_status"] == "failed" and PASSWORD_ENV_PREFIX in got["publish_error"]


def test_the_worker_connects_only_inside_the_allowed_networks(
    svc: Svc, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"{PASSWORD_ENV_PREFIX}FAKE", "net-pw-0a9d")
    svc.settings.job_max_attempts = 1
    svc.settings.publish_attempts = 1
    svc.settings.connect_networks = ["10.0.0.0/8"]
    with FakeCqlServer() as fake:
        body = cassandra_deployment("egress-net", fake.port)
        r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
        assert r.status_code == 422 and r.json()["field"] == "connection.contact_points[0]", r.text
        assert "TAILTUNE_CONNECT_NETWORKS" in r.json()["detail"]
        r = svc.client.post(f"{API}/deployments", json=memcached_deployment("egress-mc", ["127.0.0.1:11211"]),
                            headers=svc.write)
        assert r.status_code == 422 and r.json()["field"] == "connection.servers[0]", r.text
        # a host name passes the API (it resolves on the worker's side) and is refused there
        body["connection"] = {**body["connection"], "contact_points": ["localhost"],  # type: ignore[dict-item]
                              "username": "tailtune", "password_env": f"{PASSWORD_ENV_PREFIX}FAKE"}
        r = svc.client.post(f"{API}/deployments", json=body, headers=admin_headers(svc))
        assert r.status_code == 201, r.text
        dep = r.json()
        _publish(svc, dep["id"])
        assert _run(svc) == ["failed"]
        assert fake.connections == 0 and fake.received() == b""
        got = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()
        assert "outside the networks the worker may connect to" in got["publish_error"], got
        # readiness does not open a connection to it either
        ready = svc.client.get(f"{API}/health/ready", headers=svc.read).json()
        assert any("outside TAILTUNE_CONNECT_NETWORKS" in t["detail"] for t in ready["targets"]), ready
        assert fake.connections == 0
        # inside the networks, the same deployment is connected to
        svc.settings.connect_networks = ["127.0.0.0/8", "::1/128"]
        _publish(svc, dep["id"])
        assert _run(svc) == ["failed"]
        assert fake.connections >= 1
