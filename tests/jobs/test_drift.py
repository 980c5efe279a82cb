"""Drift-aware nightlies, through the API and the worker: a nightly whose workload has not moved since the running
config's study skips the study and says so; a shifted workload re-tunes and names what moved; `force` re-tunes
anyway.

The characterizations are real (Spark, `jobs.characterize.run`) of generated traces: `facebook` with seeds 1 and 2
(the same workload on two days) and `facebook` with μ = 2.9 instead of 2.5 (heavier multigets). The nightly
jobs' ingest and analyze steps are checkpointed on them; the worker runs the rest — drift, the real tuner,
decide, publish to a real memcached.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from base.settings import Settings
from control.db import JobRow
from control.queue import enqueue
from ingest.generate import write_trace
from ingest.pipeline import ingest_file
from jobs.context import JobContext
from jobs.drift import check, config_sha, inputs_of
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.memcached_server import MemcachedNode

API = "/api/v1"
REQUESTS = 2000
#: name → (profile, seed, profile options)
TRACES: dict[str, tuple[str, int, dict[str, Any]]] = {
    "day1": ("facebook", 1, {}), "day2": ("facebook", 2, {}), "heavier": ("facebook", 1, {"mu": 2.9}),
}


@pytest.fixture(scope="module")
def analyses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """name → (trace file, its real characterization's directory), on 4 servers RF 1 (the deployment's)."""
    from analysis.pipeline import Options
    from jobs.characterize import run

    base = tmp_path_factory.mktemp("drift")
    settings = Settings(home=base / "home")
    out: dict[str, tuple[Path, Path]] = {}
    for name, (profile, seed, options) in TRACES.items():
        trace = base / f"{name}.parquet"
        write_trace(trace, profile, REQUESTS, seed, **options)
        run(str(trace), base / name, dataset=False, settings=settings, master="local[2]",
            opts=Options(servers=4, replication=1, slack_replay=False))
        out[name] = (trace, base / name)
    return out


def _done(name: str, output: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "status": "done", "attempt": 1, "started_at": 0.0, "finished_at": 1.0, "error": None,
            "output": output}


class Nightlies:
    """Nightly jobs of one deployment whose ingest and analyze steps are done on a given characterization."""

    def __init__(self, svc: Svc, analyses: dict[str, tuple[Path, Path]], dep_id: int) -> None:
        self.svc, self.analyses, self.dep_id, self.n = svc, analyses, dep_id, 0
        self.datasets: dict[str, str] = {}

    def run(self, name: str, **body: Any) -> dict[str, Any]:
        svc = self.svc
        trace, analysis = self.analyses[name]
        if name not in self.datasets:
            self.datasets[name] = ingest_file(trace, settings=svc.settings).id
        self.n += 1
        rel = f"analyses/drift-{self.n}-{name}"  # each job has its own analysis directory, as the analyze step
        shutil.copytree(analysis, svc.settings.home_dir / rel)
        payload = {"deployment_id": self.dep_id, "tune": {"trials": 2, "seeds": 1}, **body}
        r = svc.client.post(f"{API}/jobs", json=payload, headers=svc.write)
        assert r.status_code == 202, r.text
        job_id = int(r.json()["id"])
        dataset = self.datasets[name]
        with svc.db.session() as s:
            row = s.get(JobRow, job_id)
            assert row is not None
            row.steps = [_done("ingest", {"traces": [], "datasets": [dataset]}),
                         _done("analyze", {"dataset_id": dataset, "out_dir": rel, "summary": f"{rel}/summary.json"})]
        w = Worker(svc.settings, svc.db, "w-drift", handlers=default_handlers(), schedule=False)
        while (status := w.run_once()) is not None:
            assert status == "succeeded", svc.client.get(f"{API}/jobs", headers=svc.read).json()[0]["logs"]
        job: dict[str, Any] = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
        assert job["status"] == "succeeded", job["logs"]
        return job


def _steps(job: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["status"] for s in job["steps"]}


@pytest.mark.slow
@pytest.mark.spark
def test_an_unchanged_workload_skips_the_study_and_a_shifted_one_retunes(
    svc: Svc, analyses: dict[str, tuple[Path, Path]], memcached_node: MemcachedNode
) -> None:
    svc.settings.tune_confirm_seeds = 1
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("drift-nightly", [memcached_node.address]),
                          headers=svc.write).json()
    # the running config is a stored version: v1
    r = svc.client.post(f"{API}/configs/{dep['id']}/versions",
                        json={"config": dep["current_config"], "publish": False}, headers=svc.write)
    assert r.status_code == 201 and r.json()["version"] == 1, r.text
    jobs = Nightlies(svc, analyses, dep["id"])

    # day 1: nothing to compare against → the study runs
    first = jobs.run("day1")
    drift = first["result"]["drift"]
    assert drift["changed"] is True and drift["against_version"] == 1 and drift["against_job"] is None
    assert drift["reason"] == "no earlier study of this deployment to compare against"
    assert _steps(first)["drift"] == "done" and _steps(first)["tune"] == "done"
    decision = first["result"]["decision"]
    running = decision["version"] if decision["accepted"] else 1  # accepted → published: the running version
    assert first["result"]["basis"]["version"] == running

    # day 2, another seed of the same workload: nothing moved → the study is skipped
    second = jobs.run("day2")
    drift = second["result"]["drift"]
    assert drift["changed"] is False and drift["forced"] is False, drift["reason"]
    assert drift["against_job"] == first["id"] and drift["against_version"] == running
    assert drift["moved"] == [] and drift["inputs_changed"] == []
    assert set(drift["quantities"]) == {"multiget_size", "multiget_size_p99", "zipf_alpha", "hot_set",
                                        "hot_set_share", "value_size", "request_rate", "fanout"}
    for name, q in drift["quantities"].items():
        assert q["moved"] is False and q["value"] is not None and q["value"] < q["threshold"], name
        assert set(q) >= {"statistic", "value", "threshold", "moved"}
    assert drift["quantities"]["multiget_size"]["statistic"] == "ks_distance"
    kept = f"workload unchanged: kept v{running}"
    assert second["result"]["decision"] == {"accepted": False, "reason": kept, "version": None}
    steps = {s["name"]: s for s in second["steps"]}
    assert [s["name"] for s in second["steps"]] == ["ingest", "analyze", "drift", "tune", "decide", "verify"]
    assert steps["tune"]["status"] == "skipped" and steps["tune"]["output"] == {"reason": kept}
    assert steps["decide"]["status"] == "skipped"
    assert "recommendation" not in second["result"] and "basis" not in second["result"]
    assert second["mlflow_run_id"] is None and f"step tune: skipped: {kept}" in second["logs"]
    assert "drift: multiget_size: ks_distance" in second["logs"]

    # force: the same workload is re-tuned anyway, the figures still reported
    forced = jobs.run("day2", force=True)
    drift = forced["result"]["drift"]
    assert drift["changed"] is False and drift["forced"] is True and drift["against_job"] == first["id"]
    assert _steps(forced)["tune"] == "done" and forced["result"]["recommendation"]["policy"]
    assert forced["payload"]["force"] is True
    decision = forced["result"]["decision"]
    running = decision["version"] if decision["accepted"] else running

    # heavier multigets: the study runs, the drift names what moved, against the newest study (the forced one)
    shifted = jobs.run("heavier")
    drift = shifted["result"]["drift"]
    assert drift["changed"] is True and drift["against_job"] == forced["id"]
    assert drift["against_version"] == running
    q = drift["quantities"]
    assert {"multiget_size", "multiget_size_p99"} <= set(drift["moved"]), drift["reason"]
    assert not {"value_size", "request_rate", "zipf_alpha"} & set(drift["moved"])  # the sizes moved, not those
    assert q["multiget_size"]["value"] > 0.1 and q["multiget_size"]["old"]["mean"] < q["multiget_size"]["new"]["mean"]
    assert drift["reason"].startswith(f"moved since job {forced['id']}'s study: multiget_size (ks_distance ")
    assert _steps(shifted)["tune"] == "done" and shifted["result"]["basis"]["config_sha256"]


def _ctx(svc: Svc, dep_id: int) -> JobContext:
    with svc.db.session() as s:
        job = enqueue(s, svc.settings, "nightly", {}, deployment_id=dep_id)
        job.status, job.lease_owner, job.lease_expires, job.attempts = "running", "w-check", time.time() + 600, 1
        s.flush()
        s.expunge(job)
    return JobContext(svc.db, svc.settings, "w-check", job)


def _analysis(home: Path, rel: str, rate: float, servers: int = 4) -> str:
    out = home / rel
    (out / "tables").mkdir(parents=True)
    doc = {"arrivals": {"rate_mean": rate}, "multiget_size": {"p99": 9},
           "fanout": {"servers": servers, "replication": 1, "opsets_mean": 2.0}}
    (out / "summary.json").write_text(json.dumps(doc))
    pq.write_table(pa.table({"size": pa.array([1, 9], pa.int64()), "requests": pa.array([500, 500], pa.int64())}),
                   out / "tables" / "multiget_size_histogram.parquet")
    return rel


def _study(svc: Svc, dep_id: int, result: dict[str, Any]) -> int:
    """A finished nightly job whose study ran (its result as the nightly writes it)."""
    with svc.db.session() as s:
        job = enqueue(s, svc.settings, "nightly", {}, deployment_id=dep_id)
        job.status, job.result, job.finished_at = "succeeded", result, time.time()
        s.flush()
        return int(job.id)


@pytest.mark.db_backends
def test_the_running_config_and_the_deployment_are_compared_too(svc: Svc) -> None:
    """A study stands for one config and one set of tuning inputs: another running config, a changed objective,
    a characterization that is gone — each is drift, and says so, even when the trace is the same."""
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("drift-check", ["127.0.0.1:1"]),
                          headers=svc.write).json()
    d = {"kind": "memcached", "server": "stock", "driver": "java4", "tables": [], "objective": dep["objective"],
         "constraints": dep["constraints"], "current_config": dep["current_config"]}
    shape = {"servers": 4}
    home = svc.settings.home_dir
    old, new = _analysis(home, "analyses/old", 1000.0), _analysis(home, "analyses/new", 1020.0)
    basis = {"version": None, "config_sha256": config_sha(d["current_config"]), "inputs_sha256": inputs_of(d, shape)}
    study = _study(svc, dep["id"], {"analysis": old, "basis": basis})
    # a skipped nightly after it (no basis) is not a study: the reference stays the study
    _study(svc, dep["id"], {"analysis": new, "drift": {"changed": False}})

    out = check(_ctx(svc, dep["id"]), dep["id"], d, shape, new, force=False)
    assert out["changed"] is False and out["against_job"] == study and out["against_version"] is None
    assert out["reason"] == f"workload unchanged since job {study}'s study"
    assert out["quantities"]["request_rate"]["value"] == pytest.approx(0.02)

    # the same trace analysed on another ring: the fan-out moved, and the reason says why
    ring = _analysis(home, "analyses/ring", 1000.0, servers=8)
    out = check(_ctx(svc, dep["id"]), dep["id"], d, shape, ring, force=False)
    assert out["changed"] is True and out["moved"] == ["fanout"]
    assert out["reason"] == (f"moved since job {study}'s study: fanout (the topology it is computed on changed: "
                             "4 servers RF 1 → 8 servers RF 1)")

    # another running config
    other = {**d, "current_config": {"policy": "chisel", "params": {"split_keys": 8, "merge": 2,
                                                                    "elephant_threshold": 50}}}
    out = check(_ctx(svc, dep["id"]), dep["id"], other, shape, new, force=False)
    assert out["changed"] is True and out["reason"].startswith(
        f"the running config (a config that is no stored version) is not the one job {study}'s study chose or kept")

    # the objective and the model changed
    changed = {**d, "objective": {"metric": "p999"}}
    out = check(_ctx(svc, dep["id"]), dep["id"], changed, {"servers": 5}, new, force=True)
    assert out["changed"] is True and out["forced"] is True and out["inputs_changed"] == ["model", "objective"]
    assert f"the deployment's model, objective changed since job {study}'s study" in out["reason"]

    # the study's characterization is gone: cannot compare → changed
    shutil.rmtree(home / old)
    out = check(_ctx(svc, dep["id"]), dep["id"], d, shape, new, force=False)
    assert out["changed"] is True and out["quantities"] == {}
    assert out["reason"] == f"the characterization of job {study} (analyses/old) is gone"


@pytest.mark.parametrize("force", ["yes", 1, "true", None])
def test_force_is_checked_at_the_api_and_the_worker(svc: Svc, force: Any) -> None:
    dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("drift-force", ["127.0.0.1:1"]),
                          headers=svc.write).json()
    r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep["id"], "force": force}, headers=svc.write)
    assert r.status_code == 422 and r.json()["field"] == "force", r.text
    r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep["id"], "force": True}, headers=svc.write)
    assert r.status_code == 202 and r.json()["payload"]["force"] is True
    svc.client.post(f"{API}/jobs/{r.json()['id']}/cancel", headers=svc.write)
    with svc.db.session() as s:  # a payload written by hand
        job_id = enqueue(s, svc.settings, "nightly", {"force": force}, deployment_id=dep["id"]).id
    assert Worker(svc.settings, svc.db, "w-f", handlers=default_handlers(), schedule=False).run_once() == "failed"
    job = svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json()
    assert job["steps"] == [] and "job payload: field 'force'" in job["error"]
