"""The `echo` job: one checkpointed step, its result the payload's text upper-cased."""

from __future__ import annotations

from control.db import JobRow
from control.queue import enqueue
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc


def test_echo_runs_its_step(svc: Svc) -> None:
    with svc.db.session() as s:
        job_id = enqueue(s, svc.settings, "echo", {"text": "hi"}).id
    assert Worker(svc.settings, svc.db, "w1", handlers=default_handlers(), schedule=False).run_once() == "succeeded"
    with svc.db.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        assert row.result == {"echo": "HI"}
        assert [(st["name"], st["status"]) for st in row.steps] == [("echo", "done")]
