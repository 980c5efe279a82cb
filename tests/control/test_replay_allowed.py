"""`replay_allowed` is an admin-only attribute (control.grants): an admin token sets it and its record; a write
token cannot set it (403 naming the field, nothing written), may keep it as an admin set it and may clear it; and
the replay's own check refuses a row that says allowed without the admin's record (one written straight into the
database)."""

from __future__ import annotations

from sqlalchemy import select

from control.db import DeploymentGrantRow, DeploymentRow
from control.grants import REPLAY_ALLOWED, granted, replay_grant_problem
from tests.app_fixtures import Svc, admin_headers, memcached_deployment

API = "/api/v1"


def _grant(svc: Svc, dep_id: int) -> object:
    with svc.db.session() as s:
        return granted(s, dep_id, REPLAY_ALLOWED)


def test_a_write_token_cannot_allow_the_replay(svc: Svc) -> None:
    body = {**memcached_deployment("shop", ["127.0.0.1:11211"]), "replay_allowed": True}
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 403, r.text
    assert r.json()["field"] == "replay_allowed" and "admin" in r.json()["detail"]
    with svc.db.session() as s:
        assert s.scalar(select(DeploymentRow).where(DeploymentRow.name == "shop")) is None
    # registered without it, a write token cannot turn it on later either
    r = svc.client.post(f"{API}/deployments", json={**body, "replay_allowed": False}, headers=svc.write)
    assert r.status_code == 201 and r.json()["replay_allowed"] is False
    dep_id = r.json()["id"]
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"replay_allowed": True}, headers=svc.write)
    assert r.status_code == 403 and r.json()["field"] == "replay_allowed"
    assert svc.client.get(f"{API}/deployments/{dep_id}", headers=svc.read).json()["replay_allowed"] is False
    assert _grant(svc, dep_id) is None


def test_an_admin_allows_it_a_write_token_keeps_or_clears_it(svc: Svc) -> None:
    admin = admin_headers(svc)
    body = {**memcached_deployment("shop", ["127.0.0.1:11211"]), "replay_allowed": True}
    r = svc.client.post(f"{API}/deployments", json=body, headers=admin)
    assert r.status_code == 201 and r.json()["replay_allowed"] is True, r.text
    dep_id = r.json()["id"]
    assert _grant(svc, dep_id) is True
    with svc.db.session() as s:
        row = s.get(DeploymentRow, dep_id)
        assert row is not None and replay_grant_problem(row.replay_allowed, granted(s, dep_id, REPLAY_ALLOWED)) is None
    # a write token changes other fields (and restates the admin's value) freely
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"timezone": "UTC", "replay_allowed": True},
                         headers=svc.write)
    assert r.status_code == 200 and r.json()["replay_allowed"] is True, r.text
    assert _grant(svc, dep_id) is True
    # ... and may clear it: the record goes with it, so setting it again needs the admin again
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"replay_allowed": False}, headers=svc.write)
    assert r.status_code == 200 and r.json()["replay_allowed"] is False
    assert _grant(svc, dep_id) is None
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"replay_allowed": True}, headers=svc.write)
    assert r.status_code == 403
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"replay_allowed": True}, headers=admin)
    assert r.status_code == 200 and _grant(svc, dep_id) is True


def test_a_row_allowed_without_the_admins_record_is_refused(svc: Svc) -> None:
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment("shop", ["127.0.0.1:11211"]),
                        headers=svc.write)
    dep_id = r.json()["id"]
    with svc.db.session() as s:  # written straight into the database
        row = s.get(DeploymentRow, dep_id)
        assert row is not None
        row.replay_allowed = True
    with svc.db.session() as s:
        row = s.get(DeploymentRow, dep_id)
        assert row is not None
        problem = replay_grant_problem(row.replay_allowed, granted(s, dep_id, REPLAY_ALLOWED))
        assert problem is not None and "not set by an admin" in problem
        assert s.scalars(select(DeploymentGrantRow).where(DeploymentGrantRow.deployment_id == dep_id)).all() == []
    assert "does not allow" in (replay_grant_problem(False, None) or "")
