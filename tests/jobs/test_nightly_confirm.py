"""A nightly of a deployment naming `confirm_on` replays current against its recommendation live, on two real
memcached servers through tailtune-client, before it publishes (jobs/confirm.py):

* an operator's wrong model input — `topology.slots: 64`, the servers' worker threads, where the servers run
  `-t 2` — makes the real tuner recommend Chisel splitting the large multigets into many small queries; the real
  replay measures that worse (p99 above +5 %, p50 resolved worse), the gate does not pass it, and the nightly
  refuses: no version made, nothing published, a finding in the result, the job succeeded;
* a recommendation the replay does not show worse is published, the replay's headline in the version's evidence;
* a replay that cannot run (the staging deployment does not allow it; too few blocks) publishes nothing and says
  why.

The replays last seconds in blocks of 0.25 s (the settings a test may lower: `replay_min_block_s`, the confirm
duration and block): 24 blocks, over the bootstrap's 20 (48 for the refusal). The recommendation that passes runs a
Chisel config that never splits or merges (it sends what batching sends), against a gate raised for seconds of
replay (an A/A interval of 24 short blocks is tens of % wide). No timing is asserted.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from control.db import ConfigVersionRow, JobRow
from ingest.pipeline import ingest_file
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.memcached.publisher import MemcachedPublisher
from tests.app_fixtures import Svc, admin_headers
from tests.servers.memcached_server import MemcachedNode

pytestmark = pytest.mark.slow

API = "/api/v1"
#: requests of the trace, 4 ms apart: 12.8 s, of which 0.5 s warm-up and 6 s (12 s in the refusal) measured
REQUESTS = 3200
GAP_S = 0.004
#: the baseline the tuner compares with (memcached's current config) and a Chisel config that sends what it sends
BATCHING = {"policy": "batching", "params": {}}
NEVER_SPLITS = {"elephant_threshold": 1000, "merge": 1, "split_keys": 1000}


def _trace(path: Path) -> Path:
    """Mice of 1–2 keys and, every other request or so, a multiget of 32–64 keys, over 4,000 keys."""
    rnd = random.Random(11)
    lines = ["request_id,ts,key,value_size"]
    for i in range(REQUESTS):
        n = rnd.randint(32, 64) if rnd.random() < 0.45 else rnd.randint(1, 2)
        for k in rnd.sample(range(4000), n):
            lines.append(f"{i},{i * GAP_S:.6f},item:{k},{rnd.randint(10, 1000)}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def characterized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The trace and its real characterization (Spark) on 2 servers RF 1: what the nightly's analyze step makes."""
    from analysis.pipeline import Options
    from base.settings import Settings
    from jobs.characterize import run

    base = tmp_path_factory.mktemp("confirm")
    trace = _trace(base / "gets.csv")
    run(str(trace), base / "analysis", dataset=False, settings=Settings(home=base / "home"), master="local[2]",
        opts=Options(servers=2, replication=1, slack_replay=False))
    return trace, base / "analysis"


@pytest.fixture
def pool(two_memcached: list[MemcachedNode]) -> list[MemcachedNode]:
    """Two real memcached servers of 2 worker threads each (`-t 2`)."""
    return two_memcached


@pytest.fixture
def app(svc: Svc) -> Svc:
    """The service with the confirm replay cut to seconds: 6 s measured in blocks of 0.25 s (24 blocks)."""
    s = svc.settings
    s.replay_warmup_s, s.replay_min_block_s = 0.5, 0.25
    s.replay_confirm_duration_s, s.replay_confirm_block_s = 6.0, 0.25
    s.replay_max_lag_ms = 1000.0  # the Python generator shares two busy cores with the tests' servers
    s.tune_confirm_seeds = 1
    return svc


def _deployment(svc: Svc, name: str, nodes: list[MemcachedNode], **body: Any) -> dict[str, Any]:
    doc = {"name": name, "kind": "memcached", "connection": {"servers": [n.address for n in nodes]}, **body}
    headers = admin_headers(svc) if body.get("replay_allowed") else svc.write
    r = svc.client.post(f"{API}/deployments", json=doc, headers=headers)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def _done(name: str, output: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "status": "done", "attempt": 1, "started_at": 0.0, "finished_at": 1.0, "error": None,
            "output": output}


def _nightly(svc: Svc, dep_id: int, dataset: str, analysis: Path | None = None,
             tune: dict[str, Any] | None = None, trials: int = 20) -> dict[str, Any]:
    """A nightly job of the deployment whose ingest and analyze steps are done (on `dataset` and the real
    `analysis`) — and its tune step too when `tune` is given — run by a real worker to its end."""
    r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep_id, "tune": {"trials": trials, "seeds": 1}},
                        headers=svc.write)
    assert r.status_code == 202, r.text
    job_id = int(r.json()["id"])
    rel = f"analyses/job-{job_id}"
    if analysis is not None:
        shutil.copytree(analysis, svc.settings.home_dir / rel)
    steps = [_done("ingest", {"traces": [], "datasets": [dataset]}),
             _done("analyze", {"dataset_id": dataset, "out_dir": rel, "summary": f"{rel}/summary.json"})]
    if tune is not None:
        steps.append(_done("tune", tune))
    with svc.db.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        row.steps = steps
        if tune is not None:  # the drift step needs the analysis: a resumed job past it
            row.status, row.lease_owner, row.lease_expires, row.attempts = "running", "dead", time.time() - 1, 1
    w = Worker(svc.settings, svc.db, "w-confirm", handlers=default_handlers(), schedule=False)
    while w.run_once() is not None:
        pass
    job: dict[str, Any] = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert job["status"] == "succeeded", job["logs"]
    return job


def _versions(svc: Svc, dep_id: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = svc.client.get(f"{API}/configs/{dep_id}/versions", headers=svc.read).json()
    return out


def _recommendation(policy: str, params: dict[str, Any]) -> dict[str, Any]:
    """A finished tune step's recommendation (as tuner.recommend writes it) of `policy` against batching."""
    return {"policy": policy, "params": params, "verdict": "recommend", "reason": "p99 -20% (p=0.01)",
            "expected": {"p50_ms": 0.5, "p95_ms": 1.0, "p99_ms": 2.0},
            "baseline": {**BATCHING, "p50_ms": 0.6, "p95_ms": 1.3, "p99_ms": 2.5},
            "render": {"json": {"memcached_client": {"mode": policy, **params}}}, "study": "s", "mlflow_run_id": None}


@pytest.mark.spark
def test_a_recommendation_the_real_replay_shows_worse_is_not_published(
    app: Svc, pool: list[MemcachedNode], characterized: tuple[Path, Path]
) -> None:
    trace, analysis = characterized
    app.settings.replay_confirm_duration_s = 12.0  # 48 blocks: the p99 interval of a few thousand requests a side
    # the operator declares 64 worker threads per server: the servers run 2
    dep = _deployment(app, "shop", pool, topology={"slots": 64}, replay_allowed=True, confirm_on="shop")
    assert dep["confirm_on"] == "shop" and dep["topology"]["slots"] == 64
    assert dep["sources"]["topology.slots"] == "declared"
    job = _nightly(app, dep["id"], ingest_file(trace, settings=app.settings).id, analysis)
    result = job["result"]
    rec = result["recommendation"]
    assert result["model"]["sources"]["worker_threads"] == "declared"
    # the model, with 64 threads a server, finds splitting the large multigets pays
    assert rec["verdict"] == "recommend" and rec["policy"] == "chisel", rec
    assert rec["params"]["split_keys"] < 32 and rec["params"]["elephant_threshold"] < 32
    confirm = result["confirm"]
    assert confirm["outcome"] == "refused" and confirm["on"] == "shop", confirm["reason"]
    head = confirm["headline"]
    assert [a["name"] for a in head["arms"]] == ["current", "recommended"]
    assert head["arms"][0]["config"] == BATCHING
    assert head["arms"][1]["config"] == {"policy": "chisel", "params": rec["params"]}
    assert head["blocks"] == 48 and head["comparison"]["metric"] == "p99" and head["comparison"]["blocks"] == 48
    # the model predicted the recommendation better; the real servers measured it worse
    predicted = head["predicted_p99_ms"]
    assert predicted["recommended"] < predicted["current"]
    # the gate's verdict is `refuse` (the interval's lower end above +5 %) on a quiet machine; under the other
    # tests' load the shared stalls can widen the interval across +5 % (`inconclusive`): refused all the same
    assert confirm["gate"]["verdict"] in ("refuse", "inconclusive") and head["comparison"]["diff_pct"] > 5.0
    p50 = next(c for c in confirm["report"]["comparisons"] if c["metric"] == "p50")
    assert p50["interval_pct"][0] > 0.0, p50  # every split elephant waits for its round trips: resolved worse
    assert head["observed_p99_ms"]["recommended"] > head["observed_p99_ms"]["current"]
    assert confirm["finding"] and confirm["finding"] in result["findings"]
    assert "where the model predicted" in confirm["finding"]
    assert confirm["report"]["comparisons"] and confirm["report"]["generator"]["lag_ok"] is True
    # refused: no version, nothing published, the job succeeded with the decision saying why
    decision = result["decision"]
    assert decision["accepted"] is False and decision["version"] is None
    assert decision["reason"].startswith("confirm_on 'shop': refused: p99 +")
    steps = [s["name"] for s in job["steps"]]
    assert "confirm" in steps and "publish" not in steps
    assert _versions(app, dep["id"]) == []
    assert MemcachedPublisher("shop", dep["connection"], 2.0).read_current() is None
    assert "confirm: refused on 'shop'" in job["logs"] and "nothing is published" in job["logs"]
    # the replay is kept among the fidelity records of the deployment it ran at: a contradiction of the model
    fid = app.client.get(f"{API}/deployments/{dep['id']}/fidelity", headers=app.read).json()
    kept = [r for r in fid["records"] if r["source"] == "confirm"]
    assert [r["id"] for r in kept] == [confirm["fidelity_record"]] and kept[0]["job_id"] == job["id"]
    assert fid["summary"]["records"] == 1


def test_a_recommendation_the_replay_does_not_show_worse_is_published_with_its_evidence(
    app: Svc, pool: list[MemcachedNode], tmp_path: Path
) -> None:
    app.settings.replay_confirm_max_worse = 5.0  # +500 %: 24 blocks of 0.25 s bound an A/A pair only so far
    staging = _deployment(app, "staging", pool, replay_allowed=True)
    dep = _deployment(app, "prod", pool, confirm_on="staging")
    assert staging["confirm_on"] is None and dep["confirm_on"] == "staging"
    dataset = ingest_file(_trace(tmp_path / "gets.csv"), settings=app.settings).id
    job = _nightly(app, dep["id"], dataset, tune=_recommendation("chisel", NEVER_SPLITS))
    result = job["result"]
    confirm = result["confirm"]
    assert confirm["outcome"] == "confirmed", confirm["reason"]
    assert confirm["gate"]["verdict"] == "pass" and confirm["gate"]["max_worse_pct"] == 500.0
    assert result["decision"] == {"accepted": True, "version": 1,
                                  "reason": "tuner recommends it and it meets the constraints"}
    assert [s["name"] for s in job["steps"]][-4:] == ["decide", "confirm", "publish", "verify"]
    assert result["publish"]["current_version"] == 1 and "findings" not in result
    (version,) = _versions(app, dep["id"])
    evidence = version["evidence"]["confirm"]
    assert evidence == confirm["headline"] and evidence["on"] == "staging" and evidence["dataset"] == dataset
    assert evidence["arms"][0]["spec"] == "batching"
    assert evidence["arms"][1]["spec"] == "chisel:elephant_threshold=1000,merge=1,split_keys=1000"
    assert set(evidence["observed_p99_ms"]) == set(evidence["predicted_p99_ms"]) == {"current", "recommended"}
    c = evidence["comparison"]
    assert c["metric"] == "p99" and c["blocks"] == evidence["blocks"] == 24 and c["duration_s"] == 6.0
    assert c["interval_pct"][1] < 500.0 and evidence["method"] == "paired block bootstrap, percentile interval"
    assert "confirmed on 'staging'" in version["note"]
    assert MemcachedPublisher("prod", dep["connection"], 2.0).read_current() == (1, version["config"])


def test_a_replay_that_cannot_run_publishes_nothing(app: Svc, pool: list[MemcachedNode], tmp_path: Path) -> None:
    _deployment(app, "staging", pool)  # registered by a write token: replay_allowed is not set
    dep = _deployment(app, "prod", pool, confirm_on="staging")
    dataset = ingest_file(_trace(tmp_path / "gets.csv"), settings=app.settings).id
    job = _nightly(app, dep["id"], dataset, tune=_recommendation("chisel", NEVER_SPLITS))
    confirm = job["result"]["confirm"]
    assert confirm["outcome"] == "not_replayed" and confirm["report"] is None
    assert "does not allow the live replay" in confirm["reason"]
    assert job["result"]["decision"]["accepted"] is False and "publish" not in job["result"]
    assert _versions(app, dep["id"]) == []

    # too few blocks for the bootstrap: the replay runs, but is no comparison
    app.settings.replay_confirm_block_s = 0.5  # 12 blocks
    r = app.client.patch(f"{API}/deployments/{dep['id']}", json={"confirm_on": "prod"}, headers=app.write)
    assert r.status_code == 200 and r.json()["confirm_on"] == "prod"
    r = app.client.patch(f"{API}/deployments/{dep['id']}", json={"replay_allowed": True}, headers=admin_headers(app))
    assert r.status_code == 200, r.text
    job = _nightly(app, dep["id"], dataset, tune=_recommendation("chisel", NEVER_SPLITS))
    confirm = job["result"]["confirm"]
    assert confirm["outcome"] == "not_replayed" and confirm["report"]["blocks"] == 12
    assert "12 blocks: the bootstrap needs at least 20" in confirm["reason"]
    assert confirm["gate"]["verdict"] == "inconclusive" and confirm["finding"] is None
    assert _versions(app, dep["id"]) == []
    with app.db.session() as s:
        assert s.query(ConfigVersionRow).count() == 0
