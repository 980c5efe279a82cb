"""/api/v1/formats lists the format registry, read-only, behind a read token."""

from __future__ import annotations

from ingest.formats import format_names
from tests.app_fixtures import Svc

API = "/api/v1"


def test_formats_lists_the_registry(svc: Svc) -> None:
    r = svc.client.get(f"{API}/formats", headers=svc.read)
    assert r.status_code == 200, r.text
    got = r.json()
    assert [f["name"] for f in got] == list(format_names())
    assert {"name": "csv", "detected": True} in got
    assert svc.client.get(f"{API}/formats").status_code == 401
    assert svc.client.post(f"{API}/formats", headers=svc.write).status_code == 405
