"""One path from a deployment to a `TuneRequest`: `tailtune tune --deployment` and the nightly job build equal
requests for the same deployment (`control.tune_request`), a stock server's patched current config
included (dropped with a note: a stock server runs no scheduler)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from base.errors import TailtuneError
from base.settings import get_settings
from tuner.tune import TuneRequest

#: What each caller chooses about how the study runs (not what it tunes): normalised before the comparison.
_HOW: dict[str, Any] = {
    "study": None, "storage": None, "timeout_s": None, "jobs": 1, "mlflow": True, "plots": True, "cdf_points": 0,
}


class _Captured(TailtuneError):
    """Raised by the stand-in `run_tune` once it has the request."""


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[TuneRequest]:
    requests: list[TuneRequest] = []

    def fake_run_tune(req: TuneRequest, **_: Any) -> Any:
        requests.append(req)
        raise _Captured("captured")

    monkeypatch.setattr("tuner.tune.run_tune", fake_run_tune)
    return requests


def _dataset(cli: Any, tmp_path: Path) -> str:
    trace = tmp_path / "t.parquet"
    r = cli("generate", "--profile", "soundcloud", "--requests", "400", "--seed", "1", "--out", str(trace))
    assert r.exit_code == 0, r.stderr
    r = cli("ingest", str(trace), "--json")
    assert r.exit_code == 0, r.stderr
    return str(json.loads(r.stdout)["id"])


def _nightly_request(dep_name: str, dataset: str, summary: Path, captured: list[TuneRequest]) -> TuneRequest:
    """The nightly job's request for `dep_name`, its ingest, analyze and drift steps done by an earlier attempt."""
    from control.db import DeploymentRow, JobRow, database_for
    from control.queue import enqueue
    from jobs.handlers import default_handlers
    from jobs.worker import Worker

    settings = get_settings()
    db = database_for(settings.resolved_database_url)
    done = {"status": "done", "attempt": 1, "started_at": 0.0, "finished_at": 1.0, "error": None}
    with db.session() as s:
        dep_id = s.query(DeploymentRow).filter_by(name=dep_name).one().id
        job = enqueue(s, settings, "nightly", {"tune": {"trials": 3, "seeds": 2}, "publish": False},
                      deployment_id=dep_id, max_attempts=1)
        job.steps = [
            {**done, "name": "ingest", "output": {"traces": [], "datasets": [dataset]}},
            {**done, "name": "analyze", "output": {"dataset_id": dataset, "out_dir": str(summary.parent),
                                                   "summary": str(summary)}},
            {**done, "name": "drift", "output": {"changed": True}},
        ]
        s.flush()
        job_id = job.id
    before = len(captured)
    Worker(settings, db, "w-req", handlers=default_handlers(), schedule=False).run_once()
    with db.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None and row.error is not None
        assert "captured" in row.error, row.error
    db.dispose()
    assert len(captured) == before + 1
    return captured[-1]


@pytest.mark.parametrize(
    ("server", "current", "kept"),
    [
        ("stock", {"policy": "rein", "params": {"k": 4}}, False),  # a stock server cannot run it: dropped
        ("stock", {"policy": "stock", "params": {"speculative_retry": "99p"}}, True),
        ("rein-patched", {"policy": "rein", "params": {"k": 4}}, True),
    ],
)
def test_cli_and_nightly_build_equal_requests(
    cli: Any, tmp_path: Path, captured: list[TuneRequest], server: str, current: dict[str, Any], kept: bool
) -> None:
    body = {"name": "shop", "kind": "cassandra", "topology": {"servers": 6, "slots": 2, "replication": 3},
            "connection": {"contact_points": ["10.0.0.7"]}, "server": server, "tables": ["shop.carts"],
            "objective": {"metric": "p95"}, "current_config": current}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    assert cli("deployments", "create", str(f)).exit_code == 0
    dataset = _dataset(cli, tmp_path)
    summary = get_settings().home_dir / "analyses" / "a1" / "summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"arrivals": {"duration_s": 10.0, "rate_mean": 40.0}}))

    r = cli("tune", "--deployment", "shop", "--dataset", dataset, "--summary", str(summary), "--trials", "3",
            "--seeds", "2", "--objective", "p95")
    assert "captured" in r.stderr, r.stderr
    from_cli = captured[-1]
    nightly = _nightly_request("shop", dataset, summary, captured)

    assert replace(from_cli, **_HOW) == replace(nightly, **_HOW)
    assert (nightly.current is not None) is kept
    assert (from_cli.deployment, from_cli.server, from_cli.driver, from_cli.tables) == (
        "cassandra", server, "java4", ("shop.carts",))
    if not kept:
        assert "needs a patched server" in " ".join(r.stderr.split())
