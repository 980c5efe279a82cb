"""A password variable is sent only for the deployment, login and contact points an admin token bound it to
(control.grants): a write token can neither name another deployment's variable nor move a bound
deployment elsewhere, and a row written straight into the database gets no connection carrying the password.
A report token reports only for the deployments it is bound to. Against the real service and worker, with an
attacker's CQL endpoint that records every byte it receives (tests/servers/fake_cql.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from sqlalchemy import select

from control.db import DeploymentGrantRow, DeploymentRow
from control.egress import PASSWORD_ENV_PREFIX
from jobs.handlers import default_handlers
from jobs.worker import Worker
from service.auth import create_token
from tests.app_fixtures import Svc, admin_headers, cassandra_deployment, memcached_deployment
from tests.servers.fake_cql import FakeCqlServer

API = "/api/v1"
VAR = f"{PASSWORD_ENV_PREFIX}ORDERS"
SECRET = "orders-pw-91be"


def _run(svc: Svc) -> str | None:
    return Worker(svc.settings, svc.db, "w-grants", handlers=default_handlers(), schedule=False).run_once()


def _body(name: str, port: int, var: str | None = VAR) -> dict[str, Any]:
    body: dict[str, Any] = cassandra_deployment(name, port)
    if var is not None:
        body["connection"] = {**body["connection"], "username": "tailtune", "password_env": var}
    return body


def _publish_job(svc: Svc, dep_id: int) -> dict[str, Any]:
    r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": {"policy": "fifo", "params": {}}},
                        headers=svc.write)
    assert r.status_code == 201, r.text
    assert _run(svc) == "failed"  # the fake never lets the driver in; a refused one never reaches it
    job: dict[str, Any] = svc.client.get(f"{API}/jobs?deployment_id={dep_id}", headers=svc.read).json()[0]
    out: dict[str, Any] = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()
    return out


def _discover_job(svc: Svc, dep_id: int) -> dict[str, Any]:
    r = svc.client.post(f"{API}/deployments/{dep_id}/discover", headers=svc.write)
    assert r.status_code == 202, r.text
    _run(svc)
    out: dict[str, Any] = svc.client.get(f"{API}/jobs/{r.json()['id']}", headers=svc.read).json()
    return out


@pytest.fixture
def quick(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> Svc:
    monkeypatch.setenv(VAR, SECRET)
    svc.settings.job_max_attempts = 1
    svc.settings.publish_attempts = 1
    return svc


def test_a_write_token_cannot_send_another_deployments_password(quick: Svc) -> None:
    svc, admin = quick, admin_headers(quick)
    with FakeCqlServer() as bound, FakeCqlServer() as attacker:
        # the admin binds the variable to the deployment it was configured for
        r = svc.client.post(f"{API}/deployments", json=_body("orders", bound.port), headers=admin)
        assert r.status_code == 201, r.text
        orders = r.json()
        # a write token naming it for another deployment is refused, the variable named, its value never
        r = svc.client.post(f"{API}/deployments", json=_body("evil", attacker.port), headers=svc.write)
        assert r.status_code == 403, r.text
        assert r.json()["field"] == "connection.password_env" and VAR in r.json()["detail"]
        assert "admin" in r.json()["detail"] and SECRET not in r.text
        with svc.db.session() as s:
            assert s.scalar(select(DeploymentRow).where(DeploymentRow.name == "evil")) is None  # nothing written
        # ... and so is moving the bound deployment to another host, port or login
        for change in ({"port": attacker.port}, {"contact_points": ["127.0.0.2"]}, {"username": "other"},
                       {"jmx_port": attacker.port}):
            r = svc.client.patch(f"{API}/deployments/{orders['id']}",
                                 json={"connection": {**orders["connection"], **change}}, headers=svc.write)
            assert r.status_code == 403 and r.json()["field"] == "connection.password_env", (change, r.text)
        # a write token may still change what is not admin-only, and keep the connection as the admin set it
        r = svc.client.patch(f"{API}/deployments/{orders['id']}",
                             json={"connection": orders["connection"], "objective": {"metric": "p95"}},
                             headers=svc.write)
        assert r.status_code == 200, r.text
        # rows written straight into the database: another deployment naming the variable, and the bound
        # deployment pointed at the attacker
        r = svc.client.post(f"{API}/deployments", json=_body("evil", attacker.port, None), headers=svc.write)
        assert r.status_code == 201, r.text
        evil = r.json()
        with svc.db.session() as s:
            row = s.get(DeploymentRow, evil["id"])
            assert row is not None
            row.connection = {**row.connection, "username": "tailtune", "password_env": VAR}
        for job in (_publish_job(svc, evil["id"]), _discover_job(svc, evil["id"])):
            assert job["status"] == "failed" and f"{VAR} is not bound to this deployment" in job["error"], job
            assert SECRET not in json.dumps(job)
        assert attacker.connections == 0 and attacker.received() == b""
        with svc.db.session() as s:
            row = s.get(DeploymentRow, orders["id"])
            assert row is not None
            moved = dict(row.connection)
            row.connection = {**moved, "port": attacker.port}
        job = _publish_job(svc, orders["id"])
        assert "bound to other contact points" in job["error"] and SECRET not in json.dumps(job)
        assert attacker.connections == 0 and attacker.received() == b""
        with svc.db.session() as s:
            row = s.get(DeploymentRow, orders["id"])
            assert row is not None
            row.connection = moved
        # the admin-bound deployment does connect, and logs in with its password
        _publish_job(svc, orders["id"])
        assert SECRET.encode() in bound.received()
        assert attacker.connections == 0


def test_an_admin_binds_and_a_write_token_may_only_drop_the_binding(quick: Svc) -> None:
    svc, admin = quick, admin_headers(quick)
    r = svc.client.post(f"{API}/deployments", json=_body("plain", 9042, None), headers=svc.write)
    assert r.status_code == 201, r.text
    dep = r.json()
    with_password = {**dep["connection"], "username": "tailtune", "password_env": VAR}
    r = svc.client.patch(f"{API}/deployments/{dep['id']}", json={"connection": with_password}, headers=svc.write)
    assert r.status_code == 403 and r.json()["field"] == "connection.password_env", r.text
    r = svc.client.patch(f"{API}/deployments/{dep['id']}", json={"connection": with_password}, headers=admin)
    assert r.status_code == 200, r.text
    with svc.db.session() as s:
        (grant,) = s.scalars(select(DeploymentGrantRow)).all()
        assert (grant.deployment_id, grant.attribute, grant.granted_by) == (dep["id"], "password", "test-admin")
        assert grant.value == {"password_env": VAR, "username": "tailtune", "contact_points": ["127.0.0.1"],
                               "port": 9042}
    # removing the password sends nothing anywhere: a write token may, and the binding goes with it
    r = svc.client.patch(f"{API}/deployments/{dep['id']}", json={"connection": dep["connection"]},
                         headers=svc.write)
    assert r.status_code == 200, r.text
    with svc.db.session() as s:
        assert s.scalars(select(DeploymentGrantRow)).all() == []
    # the CLI writes as a write token does: binding a password is the admin token's alone
    r = svc.client.patch(f"{API}/deployments/{dep['id']}", json={"connection": with_password}, headers=admin)
    assert r.status_code == 200
    r = svc.client.delete(f"{API}/deployments/{dep['id']}", headers=svc.write)
    assert r.status_code == 204
    with svc.db.session() as s:
        assert s.scalars(select(DeploymentGrantRow)).all() == []  # the binding goes with its deployment


def test_the_cli_cannot_bind_a_password(quick: Svc, cli: Any, tmp_path: Any) -> None:
    path = tmp_path / "dep.json"
    path.write_text(json.dumps(_body("cli-orders", 9042)))
    r = cli("deployments", "create", str(path))
    assert r.exit_code == 2 and "connection.password_env" in r.stderr and VAR in r.stderr, r.stderr
    assert SECRET not in r.stderr + r.stdout


def test_an_admin_token_is_minted_on_the_service_host_only(quick: Svc, cli: Any) -> None:
    svc = quick
    r = cli("serve", "--create-token", "admin", "--token-name", "ops", "--json")
    assert r.exit_code == 0, r.stderr
    token = json.loads(r.stdout)["token"]
    headers = {"Authorization": f"Bearer {token}"}
    r = svc.client.post(f"{API}/deployments", json=_body("orders-cli", 9042), headers=headers)
    assert r.status_code == 201, r.text
    # a settings entry never grants admin
    other = "tt_settings-admin"
    svc.settings.api_tokens = [f"admin:{hashlib.sha256(other.encode()).hexdigest()}"]
    r = svc.client.get(f"{API}/deployments", headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 401, r.text


# --- report tokens ------------------------------------------------------------------------------------------
def _report(svc: Svc, dep_id: int, headers: dict[str, str]) -> Any:
    return svc.client.post(f"{API}/deployments/{dep_id}/observations", json={"schema": "x"}, headers=headers)


def test_a_report_token_reports_only_for_its_deployments(svc: Svc, cli: Any) -> None:
    ids = {}
    for name in ("shop", "cache"):
        r = svc.client.post(f"{API}/deployments", json=memcached_deployment(name, ["127.0.0.1:1"]),
                            headers=svc.write)
        assert r.status_code == 201, r.text
        ids[name] = int(r.json()["id"])
    # minted on the service host, bound to `shop`
    assert cli("serve", "--create-token", "report").exit_code == 2  # a report token names its deployments
    r = cli("serve", "--create-token", "report", "--deployment", "nosuch")
    assert r.exit_code == 2 and "deployment" in r.stderr and "nosuch" in r.stderr, r.stderr
    r = cli("serve", "--create-token", "report", "--deployment", "shop", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["deployments"] == ["shop"]
    reporter = {"Authorization": f"Bearer {json.loads(r.stdout)['token']}"}
    assert _report(svc, ids["shop"], reporter).status_code == 422  # past auth: the body is checked
    r = _report(svc, ids["cache"], reporter)
    assert r.status_code == 403 and r.json()["field"] == "deployment_id" and "shop" in r.json()["detail"], r.text
    assert _report(svc, 999_999, reporter).status_code == 403
    # the settings form
    token = "tt_settings-report"
    svc.settings.api_tokens = [f"report:{hashlib.sha256(token.encode()).hexdigest()}:cache+other"]
    settings_reporter = {"Authorization": f"Bearer {token}"}
    assert _report(svc, ids["cache"], settings_reporter).status_code == 422
    r = _report(svc, ids["shop"], settings_reporter)
    assert r.status_code == 403 and r.json()["field"] == "deployment_id", r.text
    # a write token still reports for any deployment
    assert _report(svc, ids["cache"], svc.write).status_code == 422
    # create_token binds the same way
    bound = {"Authorization": f"Bearer {create_token(svc.db, 'app', 'report', ['cache'])}"}
    assert _report(svc, ids["shop"], bound).status_code == 403
