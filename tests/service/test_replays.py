"""POST /deployments/{id}/replays at the door (both DB backends): refused for a deployment that does not allow the
live replay (409, nothing queued), for a duration over TAILTUNE_REPLAY_MAX_DURATION_S (422 naming duration_s), for a
body that is not strict, an unknown dataset, a read token; accepted as a queued `replay` job with the CLI's
options as its payload. GET /deployments/{id}/fidelity: the summary and the records, paginated like other lists.
(The job run against a real memcached is tests/jobs/test_replay_job.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from control import fidelity_store
from control.db import JobRow
from tests.app_fixtures import Svc, admin_headers, memcached_deployment
from tests.control.fidelity_reports import report

pytestmark = pytest.mark.db_backends

API = "/api/v1"


def _deployment(svc: Svc, *, allowed: bool, name: str = "cache") -> int:
    body = {**memcached_deployment(name, ["127.0.0.1:11211"]), "replay_allowed": allowed}
    r = svc.client.post(f"{API}/deployments", json=body, headers=admin_headers(svc) if allowed else svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


@pytest.fixture
def dataset(svc: Svc, tmp_path: Path) -> str:
    from ingest.pipeline import ingest_file

    path = tmp_path / "gets.csv"
    path.write_text("request_id,ts,key,value_size\n" + "".join(f"{i},{i * 0.01:.3f},k{i % 50},100\n"
                                                                 for i in range(200)))
    return ingest_file(path, settings=svc.settings).id


def _body(dataset: str, **extra: Any) -> dict[str, Any]:
    return {"dataset": dataset, "configs": [{"name": "A", "spec": "current"}, {"name": "B", "spec": "chisel"}],
            "duration_s": 2.0, "block_s": 0.5, **extra}


def _jobs(svc: Svc) -> list[JobRow]:
    with svc.db.session() as s:
        return [j for j in s.query(JobRow).all() if j.kind == "replay"]


def test_a_deployment_that_does_not_allow_the_replay_is_refused_at_the_door(svc: Svc, dataset: str) -> None:
    dep_id = _deployment(svc, allowed=False)
    r = svc.client.post(f"{API}/deployments/{dep_id}/replays", json=_body(dataset), headers=svc.write)
    assert r.status_code == 409, r.text
    assert r.json()["field"] == "replay_allowed" and "does not allow the live replay" in r.json()["detail"]
    assert _jobs(svc) == []


def test_a_duration_over_the_maximum_is_refused(svc: Svc, dataset: str) -> None:
    dep_id = _deployment(svc, allowed=True)
    limit = svc.settings.replay_max_duration_s
    for extra in ({"duration_s": limit + 1}, {"duration_s": limit / 2 + 1, "repeats": 2}):
        r = svc.client.post(f"{API}/deployments/{dep_id}/replays", json=_body(dataset, **extra), headers=svc.write)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "duration_s" and "replay_max_duration_s" in r.json()["detail"]
    assert _jobs(svc) == []
    # exactly the maximum is accepted
    r = svc.client.post(f"{API}/deployments/{dep_id}/replays", json=_body(dataset, duration_s=limit),
                        headers=svc.write)
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(("change", "field"), [
    ({"configs": [{"name": "A", "spec": "current"}]}, "configs"),
    ({"configs": [{"name": "A", "spec": "current"}, {"name": "A", "spec": "chisel"}]}, "distinct"),
    ({"configs": [{"name": "A b", "spec": "current"}, {"name": "B", "spec": "chisel"}]}, "name"),
    ({"configs": [{"name": f"a{i}", "spec": "current"} for i in range(17)]}, "configs"),
    ({"rate_scale": 2.0, "load": 0.5}, "not both"),
    ({"rate_scale": 0.0}, "rate_scale"),
    ({"duration_s": "10"}, "duration_s"),  # strict: no string for a number
    ({"repeats": 0}, "repeats"),
    ({"block_s": 0}, "block_s"),
    ({"speed": 2}, "speed"),  # unknown field
    ({"dataset": "../etc"}, "dataset"),
])
def test_a_body_that_is_not_strict_is_refused_naming_the_field(svc: Svc, dataset: str, change: dict[str, Any],
                                                               field: str) -> None:
    dep_id = _deployment(svc, allowed=True)
    r = svc.client.post(f"{API}/deployments/{dep_id}/replays", json={**_body(dataset), **change}, headers=svc.write)
    assert r.status_code == 422, r.text
    assert field in r.text
    assert _jobs(svc) == []


def test_an_unknown_dataset_or_deployment_and_a_read_token(svc: Svc, dataset: str) -> None:
    dep_id = _deployment(svc, allowed=True)
    r = svc.client.post(f"{API}/deployments/{dep_id}/replays", json=_body("nosuchdataset"), headers=svc.write)
    assert r.status_code == 404 and r.json()["field"] == "dataset", r.text
    r = svc.client.post(f"{API}/deployments/{dep_id + 9}/replays", json=_body(dataset), headers=svc.write)
    assert r.status_code == 404
    r = svc.client.post(f"{API}/deployments/{dep_id}/replays", json=_body(dataset), headers=svc.read)
    assert r.status_code == 403
    assert _jobs(svc) == []


def test_a_replay_is_queued_as_a_job_with_the_clis_options(svc: Svc, dataset: str) -> None:
    dep_id = _deployment(svc, allowed=True)
    r = svc.client.post(f"{API}/deployments/{dep_id}/replays", json=_body(dataset, rate_scale=2.0, seed=3),
                        headers=svc.write)
    assert r.status_code == 202, r.text
    job = r.json()
    assert (job["kind"], job["status"], job["deployment_id"]) == ("replay", "queued", dep_id)
    assert job["payload"] == {"dataset": dataset, "configs": [["A", "current"], ["B", "chisel"]], "rate_scale": 2.0,
                              "load": None, "duration_s": 2.0, "repeats": 1, "block_s": 0.5, "seed": 3}


def test_fidelity_gives_the_summary_and_the_records_paginated(svc: Svc) -> None:
    dep_id = _deployment(svc, allowed=True)
    r = svc.client.get(f"{API}/deployments/{dep_id}/fidelity", headers=svc.read)
    assert r.status_code == 200, r.text
    assert r.json()["records"] == [] and r.json()["summary"]["records"] == 0
    assert r.json()["summary"]["agreement"]["m"] == 0
    with svc.db.session() as s:
        ids = [fidelity_store.record(s, dep_id, report(1000.0 + i, {"A": 10.0, "B": 8.0}, {"A": 9.0, "B": 7.0},
                                                       [("A", "B", "p99", -20.0, (-30.0, -10.0))]),
                                     job_id=None, source="cli") for i in range(3)]
    r = svc.client.get(f"{API}/deployments/{dep_id}/fidelity?limit=2&offset=1", headers=svc.read)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert [x["id"] for x in doc["records"]] == [ids[1], ids[0]]  # newest first, one skipped
    assert doc["records"][0]["report"]["arms"][0]["name"] == "A"
    assert (doc["summary"]["pooled"], doc["summary"]["agreement"]["k"], doc["summary"]["agreement"]["m"]) == (3, 3, 3)
    r = svc.client.get(f"{API}/deployments/{dep_id}/fidelity?limit={svc.settings.api_max_list + 1}", headers=svc.read)
    assert r.status_code == 422 and r.json()["field"] == "limit"
    assert svc.client.get(f"{API}/deployments/{dep_id}/fidelity").status_code == 401
    assert svc.client.get(f"{API}/deployments/{dep_id + 9}/fidelity", headers=svc.read).status_code == 404
