"""The `replay` job end to end against the session's real memcached: a memcached deployment granted
`replay_allowed` through the admin path, a small trace, POST /deployments/{id}/replays, a real worker runs the
live replay (batching against Chisel through tailtune-client) and stores its report as a fidelity record that GET
/deployments/{id}/fidelity returns; blocks of 0.5 s, so the bootstrap says the comparison is not estimated. A
cancelled replay job leaves no scratch key on the server; a lagging generator fails the job and its report is kept,
flagged, not pooled; a refused replay fails for good. No timing is asserted."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from base.settings import get_settings
from control.db import JobRow
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc, admin_headers
from tests.servers.memcached_server import MemcachedNode

pytestmark = [pytest.mark.slow, pytest.mark.db_backends]

API = "/api/v1"
SCRATCH = b"tailtune:replay:"


@pytest.fixture
def replay_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Set before `svc` builds its settings: a short warm-up, and no lag refusal on a box shared with other tests
    (the lag test lowers it again)."""
    monkeypatch.setenv("TAILTUNE_REPLAY_WARMUP_S", "0.5")
    monkeypatch.setenv("TAILTUNE_REPLAY_MAX_LAG_MS", "600000")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _dataset(svc: Svc, tmp_path: Path, requests: int) -> str:
    """`requests` multigets 4 ms apart, mostly 1–6 keys, every 40th an elephant of 80."""
    from ingest.pipeline import ingest_file

    rnd = random.Random(7)
    lines = ["request_id,ts,key,value_size"]
    for i in range(requests):
        for k in rnd.sample(range(2000), 80 if i % 40 == 0 else rnd.randint(1, 6)):
            lines.append(f"{i},{i * 0.004:.6f},item:{k},{rnd.randint(10, 3000)}")
    path = tmp_path / "gets.csv"
    path.write_text("\n".join(lines) + "\n")
    return ingest_file(path, settings=svc.settings).id


def _deployment(svc: Svc, node: MemcachedNode) -> int:
    body = {"name": "cache", "kind": "memcached", "replay_allowed": True, "connection": {"servers": [node.address]}}
    r = svc.client.post(f"{API}/deployments", json=body, headers=admin_headers(svc))
    assert r.status_code == 201 and r.json()["replay_allowed"] is True, r.text
    return int(r.json()["id"])


def _scratch_keys(node: MemcachedNode) -> int:
    """The keys on the server under the replay's scratch prefix (memcached's `lru_crawler metadump all`)."""
    with socket.create_connection((node.host, node.port), timeout=10) as sock:
        sock.sendall(b"lru_crawler metadump all\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return sum(1 for line in data.split(b"\r\n") if line.startswith(b"key=" + SCRATCH.replace(b":", b"%3A"))
               or line.startswith(b"key=" + SCRATCH))


def _post(svc: Svc, dep_id: int, dataset: str, **extra: Any) -> int:
    arms = [{"name": "batch", "spec": "batching"}, {"name": "chisel", "spec": "chisel"}]
    body = {"dataset": dataset, "configs": arms, "duration_s": 2.0, "block_s": 0.5, **extra}
    r = svc.client.post(f"{API}/deployments/{dep_id}/replays", json=body, headers=svc.write)
    assert r.status_code == 202, r.text
    return int(r.json()["id"])


def _job(svc: Svc, job_id: int) -> JobRow:
    with svc.db.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        s.expunge(row)
        return row


def test_a_replay_job_stores_a_record_that_fidelity_returns(replay_env: None, svc: Svc, tmp_path: Path,
                                                            memcached_node: MemcachedNode) -> None:
    dataset = _dataset(svc, tmp_path, 800)
    dep_id = _deployment(svc, memcached_node)
    job_id = _post(svc, dep_id, dataset)
    assert Worker(svc.settings, svc.db, "w-replay", handlers=default_handlers(), schedule=False).run_once() \
        == "succeeded", _job(svc, job_id).error
    job = _job(svc, job_id)
    result = job.result or {}
    assert result["arms"] == ["batch", "chisel"] and result["blocks"] == 4 and result["lag_ok"] is True
    assert set(result["observed_p99_ms"]) == {"batch", "chisel"} and set(result["predicted_p99_ms"]) == {"batch",
                                                                                                       "chisel"}
    assert result["p99"][0]["interval_pct"] is None and "the bootstrap needs at least 20" in result["p99"][0]["reason"]
    step = job.steps[0]
    assert step["name"] == "replay" and step["status"] == "done" and step["progress"]["stage"] in ("done", "compare")
    r = svc.client.get(f"{API}/deployments/{dep_id}/fidelity", headers=svc.read)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert [x["id"] for x in doc["records"]] == [result["record_id"]]
    rec = doc["records"][0]
    assert (rec["job_id"], rec["source"], rec["flag"], rec["arms"], rec["blocks"]) == (job_id, "replay", None, 2, 4)
    assert rec["report"]["deployment"] == "cache" and rec["report"]["observed"]["batch"]["requests"] > 100
    assert rec["report"]["cluster"]["arms"]["chisel"]["wrong_answers"] == 0
    assert doc["summary"]["pooled"] == 1 and doc["summary"]["agreement"]["m"] == 0  # nothing resolved at 0.5 s
    assert doc["summary"]["error"]["p99"]["n"] == 2
    assert _scratch_keys(memcached_node) == 0


def test_a_cancelled_replay_job_leaves_no_scratch_keys(replay_env: None, svc: Svc, tmp_path: Path,
                                                       memcached_node: MemcachedNode) -> None:
    dataset = _dataset(svc, tmp_path, 3000)  # 12 s: the cancel lands long before the end
    dep_id = _deployment(svc, memcached_node)
    job_id = _post(svc, dep_id, dataset, duration_s=11.0)
    worker = Worker(svc.settings, svc.db, "w-cancel", handlers=default_handlers(), schedule=False)
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.setdefault("status", worker.run_once()), daemon=True)
    thread.start()
    during = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and thread.is_alive():  # until the generator is sending
        steps = _job(svc, job_id).steps
        progress = steps[0].get("progress") if steps else None
        if progress and progress["stage"] == "replay" and progress["fraction"] >= 0.2:
            during = _scratch_keys(memcached_node)
            break
        time.sleep(0.1)
    assert during > 0, "the replay was not seen sending"
    r = svc.client.post(f"{API}/jobs/{job_id}/cancel", headers=svc.write)
    assert r.status_code in (200, 202), r.text
    thread.join(300)
    assert out.get("status") == "cancelled", _job(svc, job_id).error
    job = _job(svc, job_id)
    assert job.steps[0]["status"] == "cancelled" and job.result is None
    assert _scratch_keys(memcached_node) == 0  # the driver deleted them before the job ended
    r = svc.client.get(f"{API}/deployments/{dep_id}/fidelity", headers=svc.read)
    assert r.json()["records"] == []


def test_a_lagging_generator_fails_the_job_and_its_report_is_kept_not_pooled(
        replay_env: None, svc: Svc, tmp_path: Path, memcached_node: MemcachedNode,
        monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = _dataset(svc, tmp_path, 400)
    dep_id = _deployment(svc, memcached_node)
    job_id = _post(svc, dep_id, dataset, duration_s=1.0)
    monkeypatch.setenv("TAILTUNE_REPLAY_MAX_LAG_MS", "0.000001")  # no generator sends within a nanosecond
    get_settings.cache_clear()
    settings = get_settings()
    assert Worker(settings, svc.db, "w-lag", handlers=default_handlers(), schedule=False).run_once() == "failed"
    job = _job(svc, job_id)
    assert job.error is not None and "the load generator sent late" in job.error and "fidelity record" in job.error
    assert job.attempts == 1  # not retried
    doc = svc.client.get(f"{API}/deployments/{dep_id}/fidelity", headers=svc.read).json()
    assert [r["flag"] for r in doc["records"]] == ["lag_too_high"]
    assert doc["records"][0]["report"]["generator"]["lag_ok"] is False and doc["records"][0]["job_id"] == job_id
    assert (doc["summary"]["records"], doc["summary"]["pooled"], doc["summary"]["flagged"]) == (1, 0, 1)
    assert _scratch_keys(memcached_node) == 0


def test_a_refused_replay_fails_for_good_with_its_message(replay_env: None, svc: Svc, tmp_path: Path,
                                                          memcached_node: MemcachedNode) -> None:
    dataset = _dataset(svc, tmp_path, 400)
    dep_id = _deployment(svc, memcached_node)
    job_id = _post(svc, dep_id, dataset, load=0.5)  # the deployment has no calibrated capacity
    assert Worker(svc.settings, svc.db, "w-ref", handlers=default_handlers(), schedule=False).run_once() == "failed"
    job = _job(svc, job_id)
    assert job.attempts == 1 and job.error is not None and "calibrated capacity" in job.error
    # a payload written by hand is checked before the first step
    from control.queue import enqueue

    with svc.db.session() as s:
        bad = enqueue(s, svc.settings, "replay", {"dataset": dataset, "configs": [["A", "current"]]},
                      deployment_id=dep_id).id
    assert Worker(svc.settings, svc.db, "w-bad", handlers=default_handlers(), schedule=False).run_once() == "failed"
    row = _job(svc, bad)
    assert row.steps == [] and row.error is not None and "configs" in row.error
