"""Analyses via the API and the worker: trigger on an uploaded trace, status, summary.json, report.html."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc

API = "/api/v1"
TRACE = "request_id,ts,key,value_size\n" + "".join(
    f"{r},{r * 0.01:.2f},k{(r * 7 + j) % 23},{100 + j}\n" for r in range(40) for j in range(1 + r % 4)
)
pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _drain(svc: Svc) -> None:
    w = Worker(svc.settings, svc.db, "w-a", handlers=default_handlers(), schedule=False)
    while w.run_once() is not None:
        pass


def test_analysis_of_an_uploaded_trace(svc: Svc, spark: Any) -> None:
    svc.settings.spark_master = "local[2]"  # the session fixture's master: getOrCreate reuses it
    t = svc.client.post(f"{API}/traces?name=a.csv", content=TRACE.encode(), headers=svc.write).json()
    r = svc.client.post(f"{API}/analyses", json={"trace_id": t["id"]}, headers=svc.write)
    assert r.status_code == 409 and r.json()["field"] == "trace_id"  # not ingested yet
    _drain(svc)
    r = svc.client.post(
        f"{API}/analyses", json={"trace_id": t["id"], "servers": 4, "replication": 2}, headers=svc.write
    )
    assert r.status_code == 202
    a = r.json()
    assert a["status"] == "queued" and a["options"] == {"servers": 4, "replication": 2}
    assert svc.client.get(f"{API}/analyses/{a['id']}/summary.json", headers=svc.read).status_code == 409
    _drain(svc)
    got = svc.client.get(f"{API}/analyses/{a['id']}", headers=svc.read).json()
    assert got["status"] == "succeeded", got
    summary = svc.client.get(f"{API}/analyses/{a['id']}/summary.json", headers=svc.read)
    assert summary.headers["content-type"].startswith("application/json")
    doc = summary.json()
    assert doc["multiget_size"]["max"] == 4  # requests have 1..4 keys
    assert doc["key_popularity"]["distinct_keys"] == 23
    report = svc.client.get(f"{API}/analyses/{a['id']}/report.html", headers=svc.read)
    assert report.headers["content-type"].startswith("text/html") and "<html" in report.text.lower()
    detail = svc.client.get(f"{API}/traces/{t['id']}", headers=svc.read).json()
    assert detail["analyses"] == [{"id": a["id"], "status": "succeeded", "error": None}]
