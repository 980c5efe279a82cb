"""`selftest`, the tests' and smoke tests' job kind, runs only behind its setting (`TAILTUNE_SELFTEST_JOBS`, off by
default; the tests turn it on in `FAST_ENV`): off, the queue refuses it (a 422 where the API or the console would
queue one) and a worker that finds one queued fails it at once."""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from base.settings import Settings, get_settings
from control.db import JobRow
from control.errors import Invalid
from control.queue import SELFTEST, SELFTEST_OFF, enqueue
from jobs.handlers import default_handlers
from jobs.worker import Worker
from service.main import create_app
from tests.app_fixtures import Svc, memcached_deployment
from tests.service.test_console import sign_in

API = "/api/v1"


@pytest.fixture
def off(svc: Svc, monkeypatch: pytest.MonkeyPatch) -> Iterator[Svc]:
    """The test's service with the setting left as production leaves it (the same metadata DB)."""
    monkeypatch.delenv("TAILTUNE_SELFTEST_JOBS")
    get_settings.cache_clear()
    settings = get_settings()
    assert settings.selftest_jobs is False
    with TestClient(create_app(settings)) as client:
        yield dataclasses.replace(svc, settings=settings, client=client)


def _failed_selftest(svc: Svc) -> int:
    """A failed selftest job, queued while the setting was on."""
    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, SELFTEST, {"steps": 0}).id
        s.execute(update(JobRow).where(JobRow.id == job_id).values(status="failed", error="failed on purpose"))
    return job_id


def test_production_leaves_selftest_off() -> None:
    assert Settings.model_fields["selftest_jobs"].default is False


def test_the_queue_refuses_selftest_when_off(off: Svc) -> None:
    with off.db.session() as s, pytest.raises(Invalid) as refused:
        enqueue(s, off.settings, SELFTEST, {})
    assert (refused.value.status_code, refused.value.field, refused.value.detail) == (422, "kind", SELFTEST_OFF)


def test_the_console_retry_of_a_selftest_is_a_422_when_off(svc: Svc, off: Svc) -> None:
    job_id = _failed_selftest(svc)
    csrf = sign_in(off, off.write)
    script = {"x-requested-with": "fetch"}  # the console answers its own scripts in the API's error shape
    r = off.client.post(f"/jobs/{job_id}/retry", data={"csrf_token": csrf}, headers=script, follow_redirects=False)
    assert r.status_code == 422 and (r.json()["field"], r.json()["detail"]) == ("kind", SELFTEST_OFF)
    r = off.client.post(f"/jobs/{job_id}/retry", data={"csrf_token": csrf}, follow_redirects=True)
    assert SELFTEST_OFF in html.unescape(r.text)  # a person's form: the page again, the reason flashed
    csrf = sign_in(svc, svc.write)  # on (the tests' setting), the same retry queues a new job
    assert svc.client.post(f"/jobs/{job_id}/retry", data={"csrf_token": csrf},
                           follow_redirects=False).status_code == 303


def test_the_api_makes_no_selftest_job(off: Svc) -> None:
    dep = off.client.post(f"{API}/deployments", json=memcached_deployment("mc", ["127.0.0.1:1"]),
                          headers=off.write).json()
    r = off.client.post(f"{API}/jobs", json={"deployment_id": dep["id"], "kind": SELFTEST}, headers=off.write)
    assert r.status_code == 422 and r.json()["field"] == "kind"


def test_a_worker_with_selftest_off_fails_a_queued_one_at_once(svc: Svc, off: Svc) -> None:
    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, SELFTEST, {"steps": 1, "sleep_s": 0}).id
    assert Worker(off.settings, off.db, "w", handlers=default_handlers(), schedule=False).run_once() == "failed"
    with off.db.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None and row.attempts == 1 and row.steps == []
        assert row.error == f"JobFailed: {SELFTEST_OFF}"
