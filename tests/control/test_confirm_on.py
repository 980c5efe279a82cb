"""`confirm_on` on a deployment, through the API: the deployment itself or a registered deployment of its kind, set
by a write token, cleared with null; anything else a 422 naming the field. (What a nightly does with it:
tests/jobs/test_nightly_confirm.py.)"""

from __future__ import annotations

from tests.app_fixtures import Svc, cassandra_deployment, memcached_deployment

API = "/api/v1"


def test_confirm_on_names_itself_or_a_deployment_of_its_kind(svc: Svc) -> None:
    r = svc.client.post(f"{API}/deployments", json={**memcached_deployment("shop", ["127.0.0.1:11211"]),
                                                    "confirm_on": "shop"}, headers=svc.write)
    assert r.status_code == 201 and r.json()["confirm_on"] == "shop", r.text
    dep_id = r.json()["id"]
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"confirm_on": "staging"}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "confirm_on" and "no deployment" in r.json()["detail"]
    r = svc.client.post(f"{API}/deployments", json=cassandra_deployment("ring", 9042), headers=svc.write)
    assert r.status_code == 201, r.text
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"confirm_on": "ring"}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "confirm_on" and "cassandra" in r.json()["detail"]
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment("staging", ["127.0.0.1:11212"]),
                        headers=svc.write)
    assert r.status_code == 201, r.text
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"confirm_on": "staging"}, headers=svc.write)
    assert r.status_code == 200 and r.json()["confirm_on"] == "staging", r.text
    assert svc.client.get(f"{API}/deployments/{dep_id}", headers=svc.read).json()["confirm_on"] == "staging"
    r = svc.client.patch(f"{API}/deployments/{dep_id}", json={"confirm_on": None}, headers=svc.write)
    assert r.status_code == 200 and r.json()["confirm_on"] is None
    r = svc.client.post(f"{API}/deployments", json={**memcached_deployment("bad", ["127.0.0.1:11213"]),
                                                    "confirm_on": "Not A Name"}, headers=svc.write)
    assert r.status_code == 422 and "confirm_on" in r.text


def test_a_memcached_deployment_declares_its_worker_threads_as_slots(svc: Svc) -> None:
    r = svc.client.post(f"{API}/deployments", json={**memcached_deployment("threads", ["127.0.0.1:11211"]),
                                                    "topology": {"slots": 16}}, headers=svc.write)
    assert r.status_code == 201, r.text
    dep = r.json()
    assert dep["topology"] == {"servers": 1, "slots": 16}
    assert dep["sources"] == {"topology.servers": "declared", "topology.slots": "declared"}
