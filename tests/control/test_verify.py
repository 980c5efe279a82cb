"""Verify after publish: the one-sided p99 test, the expected band, and the outcomes a `verify` job records on the
version (rolled back, verified, unexpected, pending, no reference, superseded, a canary promoted), through the
API, the real worker and a real memcached for the publishes the verdicts start. The clients' reports here are
histograms made from fixed samples (the client's own histogram code); tests/clients/test_verify_live.py drives
real requests through the shipped client."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from tailtune_client.histogram import LogHistogram
from tailtune_client.report import REPORT_SCHEMA, Observation

from control.configs import add_version
from control.db import JobRow
from control.observations import merge_histograms
from control.verify import (
    expectation,
    expected_band,
    horizon_s,
    p99_ratio_test,
    server_comparison,
    verify_version,
)
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.memcached_server import MemcachedNode

API = "/api/v1"
BATCHING = {"policy": "batching", "params": {}}
CHISEL = {"policy": "chisel", "params": {"split_keys": 4, "merge": 2, "elephant_threshold": 20}}


def _samples(seed: int, n: int, median_us: float) -> list[float]:
    rng = random.Random(seed)
    return [rng.lognormvariate(0.0, 0.35) * median_us for _ in range(n)]


def _obs(version: int, samples: list[float]) -> dict[str, Any]:
    obs = Observation(version, "batching", {})
    for us in samples:
        obs.requests += 1
        obs.classes["2-10"].record(us)
    return dict(obs.to_json())


def _report(svc: Svc, dep_id: int, per_version: dict[int, list[float]], *, client: str = "c1",
            start: float = 1000.0, end: float = 2000.0) -> None:
    payload = {"schema": REPORT_SCHEMA, "client": {"id": client}, "window": {"start": start, "end": end},
               "observations": [_obs(v, xs) for v, xs in per_version.items()]}
    r = svc.client.post(f"{API}/deployments/{dep_id}/observations", json=payload, headers=svc.write)
    assert r.status_code == 200, r.text


def _deployment(svc: Svc, name: str, node: MemcachedNode) -> int:
    svc.settings.verify_min_requests = 200
    svc.settings.verify_after_windows = 1  # one report window per version here
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment(name, [node.address]), headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _version(svc: Svc, dep_id: int, config: dict[str, Any]) -> int:
    r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": config, "publish": False},
                        headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["version"])


def _run(svc: Svc) -> list[str]:
    w = Worker(svc.settings, svc.db, "w-verify", handlers=default_handlers(), schedule=False)
    out = []
    while (status := w.run_once()) is not None:
        out.append(status)
    return out


def _verify(svc: Svc, dep_id: int, version: int | None = None) -> dict[str, Any]:
    r = svc.client.post(f"{API}/deployments/{dep_id}/verify", json={"version": version} if version else None,
                        headers=svc.write)
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["kind"] == "verify" and job["status"] == "queued" and job["payload"]["force"] is True
    return dict(job)


def _versions(svc: Svc, dep_id: int) -> dict[int, dict[str, Any]]:
    rows = svc.client.get(f"{API}/configs/{dep_id}/versions", headers=svc.read).json()
    return {int(r["version"]): r for r in rows}


# --- the test and the band ----------------------------------------------------------------------------------
def _hist(samples: list[float]) -> LogHistogram:
    return merge_histograms([_obs(1, samples)["all"]])


def test_p99_ratio_test_is_one_sided_and_repeatable() -> None:
    base = _hist(_samples(1, 600, 500.0))
    def test(before: LogHistogram, after: LogHistogram, margin_pct: float = 10.0) -> dict[str, Any]:
        return p99_ratio_test(before, after, alpha=0.05, margin_pct=margin_pct, resamples=2000)

    worse = test(base, _hist(_samples(2, 600, 1500.0)))
    assert worse["worse"] is True and worse["p_value"] < 0.01 and worse["lower_bound"] > 1.1
    assert 2.0 < worse["ratio"] < 4.5
    assert test(base, _hist(_samples(2, 600, 1500.0))) == worse  # seeded: the same verdict
    better = test(base, _hist(_samples(3, 600, 200.0)))
    assert better["worse"] is False and better["p_value"] > 0.5  # one-sided: much better is not "different"
    assert test(base, _hist(_samples(4, 600, 500.0)))["worse"] is False
    # a 30% worse p99 is a regression for a 10% margin, not for a 50% one
    slower = _hist(_samples(5, 4000, 650.0))
    big = _hist(_samples(6, 4000, 500.0))
    assert test(big, slower)["worse"] is True
    assert test(big, slower, 50.0)["worse"] is False


def test_expected_band_widens_by_the_interval_the_sampling_bound_and_the_model_error() -> None:
    rec = {"expected": {"p50_ms": 0.4, "p99_ms": 2.0, "ci": {"p99": 0.5}, "ci_method": "Student-t over 3 seeds"},
           "sampling": {"error_bound": {"p99_pct": 20.0}}}
    exp = expectation(rec, job_id=7)
    assert exp == {"p50_ms": 0.4, "p99_ms": 2.0, "p99_ci_ms": 0.5, "ci_method": "Student-t over 3 seeds",
                   "sampling_error_pct": 20.0, "calibration_p99_ms": None, "source": "recommendation of job 7"}
    lo, hi = expected_band(exp, 100.0)
    assert (lo, hi) == pytest.approx((1.5 / 2.2, 2.5 * 2.2))
    assert expected_band({"p99_ms": 2.0}, 0.0) == (2.0, 2.0)
    assert expectation({"expected": {"p50_ms": 1.0}}) is None  # no p99: nothing to hold a version to


def test_expected_band_holds_the_calibrations_interval() -> None:
    """A calibrated service time replayed at each end of its interval gave p99 1.2 and 3.5 ms around the expected
    2.0 ± 0.5: the band runs from min(1.5, 1.2) to max(2.5, 3.5), then widened by the model's error (hand-worked)."""
    rec = {"expected": {"p99_ms": 2.0, "ci": {"p99": 0.5},
                        "calibration": {"service_time_mean_ms": [0.2, 0.4], "p99_ms": [3.5, 1.2]}}}
    exp = expectation(rec)
    assert exp is not None and exp["calibration_p99_ms"] == [1.2, 3.5]
    assert expected_band(exp, 100.0) == pytest.approx((1.2 / 2.0, 3.5 * 2.0))
    assert expected_band(exp, 0.0) == pytest.approx((1.2, 3.5))
    # an interval inside the replay's own does not narrow it
    exp["calibration_p99_ms"] = [1.9, 2.1]
    assert expected_band(exp, 0.0) == pytest.approx((1.5, 2.5))


def test_server_comparison_converts_the_seconds_and_applies_the_threshold() -> None:
    def snap(count: int, p99_s: float) -> dict[str, Any]:
        return {"source": "system_views.coordinator_read_latency", "unit": "s", "note": "n",
                "nodes": {"10.0.0.1": {"ks.t": {"count": count, "p50th_ms": 0.0, "p99th_ms": p99_s, "max_ms": p99_s,
                                                "per_second": 1.0}}}}

    same = server_comparison(snap(100, 0.002), snap(1100, 0.003), margin_pct=10.0)
    assert same is not None
    assert (same["reads_since_publish"], same["p99_before_ms"], same["p99_after_ms"]) == (1000, 2.0, 3.0)
    assert same["worse"] is False  # 1 ms more: within the table's 1 ms resolution
    worse = server_comparison(snap(100, 0.002), snap(1100, 0.009), margin_pct=10.0)
    assert worse is not None and worse["worse"] is True
    restarted = server_comparison(snap(5000, 0.002), snap(300, 0.002), margin_pct=10.0)
    assert restarted is not None and restarted["reads_since_publish"] == 300  # the node's counter started over
    assert server_comparison(None, snap(1, 0.001), margin_pct=10.0) is None


# --- outcomes -------------------------------------------------------------------------------------------------
@pytest.mark.db_backends  # on SQLite and on PostgreSQL
def test_a_worse_version_is_rolled_back_with_its_reason(svc: Svc, memcached_node: MemcachedNode) -> None:
    dep_id = _deployment(svc, "vf-worse", memcached_node)
    v1, v2 = _version(svc, dep_id, BATCHING), _version(svc, dep_id, CHISEL)
    _report(svc, dep_id, {v1: _samples(1, 400, 500.0)}, start=1000.0, end=2000.0)
    _report(svc, dep_id, {v2: _samples(2, 400, 1500.0)}, start=2000.0, end=3000.0)
    job = _verify(svc, dep_id)
    assert job["payload"]["version"] == v2
    before = time.time()
    assert _run(svc) == ["succeeded", "succeeded"]  # the verify job, then the publish of the rollback
    got = svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()
    assert got["result"]["status"] == "rolled_back" and got["result"]["rollback_version"] == 3
    versions = _versions(svc, dep_id)
    ver = versions[v2]["verification"]
    assert ver["status"] == "rolled_back" and ver["reference_version"] == v1
    assert ver["reason"].startswith("worse than version 1: p99 ")
    assert ver["test"]["name"] == "bootstrap-p99-ratio" and ver["test"]["worse"] is True
    assert ver["test"]["p_value"] < svc.settings.verify_alpha
    assert (ver["before"]["version"], ver["before"]["requests"]) == (v1, 400)
    assert (ver["after"]["version"], ver["after"]["requests"]) == (v2, 400)
    assert ver["after"]["p99_ms"] > 2 * ver["before"]["p99_ms"] and ver["job_id"] == job["id"]
    back = versions[3]
    assert back["source"] == "rollback" and back["config"] == BATCHING
    assert back["note"].startswith("automatic rollback of version 2: worse than version 1")
    assert back["published"]["memcached"]["current_version"] == 3  # published by the job it queued
    assert svc.client.get(f"{API}/configs/{dep_id}", headers=svc.read).json()["version"] == 3
    with svc.db.session() as s:  # the rollback itself is checked later, not now
        recheck = s.get(JobRow, ver["recheck_job_id"])
        assert recheck is not None and recheck.kind == "verify" and recheck.status == "queued"
        # due at the horizon: verify_after_windows report windows after the rollback
        assert recheck.payload == {"version": 3} and recheck.run_after >= before + horizon_s(svc.settings)
    # asked again, the rolled-back version is judged again but only the latest may be rolled back
    _verify(svc, dep_id, v2)
    assert _run(svc) == ["succeeded"]
    assert _versions(svc, dep_id)[v2]["verification"]["status"] == "rolled_back"
    assert len(_versions(svc, dep_id)) == 3


def _tuned(svc: Svc, dep_id: int, config: dict[str, Any], p99_ms: float) -> int:
    rec = {"expected": {"p50_ms": p99_ms / 2, "p99_ms": p99_ms, "ci": {"p99": 0.01}}}
    with svc.db.session() as s:
        row = add_version(s, dep_id, config, settings=svc.settings, source="tuning")
        row.verification = {"status": "unchecked", "expected": expectation(rec)}
        return row.version


def test_pending_until_enough_requests_then_verified_within_the_expected_band(
    svc: Svc, memcached_node: MemcachedNode
) -> None:
    dep_id = _deployment(svc, "vf-pending", memcached_node)
    v1 = _version(svc, dep_id, BATCHING)
    _report(svc, dep_id, {v1: _samples(1, 400, 500.0)})
    xs = _samples(2, 400, 450.0)  # p99 about 1 ms
    v2 = _tuned(svc, dep_id, CHISEL, 1.0)
    assert _versions(svc, dep_id)[v2]["verification"]["status"] == "unchecked"
    _report(svc, dep_id, {v2: xs[:50]}, client="c2", start=2000.0, end=2100.0)
    _verify(svc, dep_id)
    before = time.time()
    assert _run(svc) == ["succeeded"]
    ver = _versions(svc, dep_id)[v2]["verification"]
    assert ver["status"] == "pending" and ver["checks"] == 1
    assert ver["reason"] == "50 requests of version 2 reported; at least 200 needed (verify_min_requests)"
    with svc.db.session() as s:
        recheck = s.get(JobRow, ver["recheck_job_id"])
        assert recheck is not None and recheck.dedupe_key == f"verify:{dep_id}:{v2}:1"
        assert recheck.run_after >= before + svc.settings.verify_recheck_s
    # the same client's window, resent with everything since: replaces the first (no double count)
    _report(svc, dep_id, {v2: xs}, client="c2", start=2000.0, end=3000.0)
    _verify(svc, dep_id)
    assert _run(svc) == ["succeeded"]
    ver = _versions(svc, dep_id)[v2]["verification"]
    assert ver["status"] == "verified", ver["reason"]
    assert ver["after"]["requests"] == 400 and ver["checks"] == 2
    assert [e["status"] for e in ver["log"]] == ["pending"]
    assert ver["expected"]["within"] is True and ver["expected"]["p99_ms"] == 1.0
    lo, hi = ver["expected"]["band_ms"]
    assert lo <= ver["after"]["p99_ms"] <= hi and (lo, hi) == pytest.approx((0.99 / 2, 1.01 * 2))
    assert "not worse than version 1" in ver["reason"] and "within the expected" in ver["reason"]
    # what the API shows beside the observations is the expectation stored with the version
    view = svc.client.get(f"{API}/deployments/{dep_id}/observations", headers=svc.read).json()
    assert [v["expected"] for v in view if v["config_version"] == v2] == [{"p50_ms": 0.5, "p99_ms": 1.0}]


def test_off_the_model_is_unexpected_and_kept(svc: Svc, memcached_node: MemcachedNode) -> None:
    dep_id = _deployment(svc, "vf-off", memcached_node)
    v1 = _version(svc, dep_id, BATCHING)
    _report(svc, dep_id, {v1: _samples(1, 400, 500.0)})
    v2 = _tuned(svc, dep_id, CHISEL, 0.05)  # the model promised 50 µs
    _report(svc, dep_id, {v2: _samples(2, 400, 480.0)}, client="c2")
    _verify(svc, dep_id)
    assert _run(svc) == ["succeeded"]
    versions = _versions(svc, dep_id)
    ver = versions[v2]["verification"]
    assert ver["status"] == "unexpected" and ver["expected"]["within"] is False
    assert "outside the expected 0.050 ms band" in ver["reason"]
    assert len(versions) == 2  # nothing rolled back


def test_nothing_to_compare_with_and_a_superseded_version(svc: Svc, memcached_node: MemcachedNode) -> None:
    dep_id = _deployment(svc, "vf-ref", memcached_node)
    v1 = _version(svc, dep_id, BATCHING)
    _report(svc, dep_id, {v1: _samples(1, 300, 500.0)})
    _verify(svc, dep_id)
    assert _run(svc) == ["succeeded"]
    ver = _versions(svc, dep_id)[v1]["verification"]
    assert ver["status"] == "no_reference"
    assert ver["reason"] == "no earlier version reported to compare with, and no expectation is stored"
    v2 = _version(svc, dep_id, CHISEL)
    _report(svc, dep_id, {v2: _samples(2, 20, 2000.0)}, client="c2")
    _verify(svc, dep_id)
    assert _run(svc) == ["succeeded"]
    assert _versions(svc, dep_id)[v2]["verification"]["status"] == "pending"
    v3 = _version(svc, dep_id, BATCHING)
    with svc.db.session() as s:  # the scheduled re-check of v2 runs after v3 was added: no rollback of v2
        out = verify_version(s, svc.settings, dep_id, v2)
    assert out["status"] == "superseded" and out["reason"].startswith("version 3 was added before a verdict (pending")
    with svc.db.session() as s:  # a verdict is not revisited unless asked for
        again = verify_version(s, svc.settings, dep_id, v2)
        assert again["checked"] is False and again["reason"] == "version 2 is already superseded"
    versions = _versions(svc, dep_id)
    assert versions[v2]["verification"]["status"] == "superseded" and max(versions) == v3


@pytest.mark.db_backends
def test_a_canary_that_is_not_worse_is_promoted(svc: Svc, memcached_node: MemcachedNode) -> None:
    dep_id = _deployment(svc, "vf-canary", memcached_node)
    v1 = _version(svc, dep_id, BATCHING)
    _report(svc, dep_id, {v1: _samples(1, 400, 500.0)}, start=0.0, end=900.0)  # before the canary
    v2 = _version(svc, dep_id, {**CHISEL, "canary_fraction": 0.5})
    # during the canary: both versions in the same windows
    _report(svc, dep_id, {v1: _samples(3, 300, 900.0), v2: _samples(4, 300, 400.0)}, start=1000.0, end=2000.0)
    job = _verify(svc, dep_id)
    assert _run(svc) == ["succeeded", "succeeded"]  # verify, then the publish of the promotion
    versions = _versions(svc, dep_id)
    ver = versions[v2]["verification"]
    assert ver["status"] == "verified" and ver["promoted_version"] == 3
    assert ver["before"]["windows"] == "concurrent" and ver["before"]["requests"] == 300  # the canary's peers
    promoted = versions[3]
    assert promoted["source"] == "promotion" and promoted["config"] == CHISEL  # every request runs it now
    assert promoted["note"].startswith("promotion of canary version 2: not worse than version 1")
    assert promoted["published"]["memcached"]["current_version"] == 3
    assert svc.client.get(f"{API}/jobs/{job['id']}", headers=svc.read).json()["result"]["promoted_version"] == 3


def test_canary_fraction_is_one_accepted_key_and_a_rollback_drops_it(svc: Svc, memcached_node: MemcachedNode) -> None:
    dep_id = _deployment(svc, "vf-frac", memcached_node)
    for good in (0.25, 1, 1.0):
        _version(svc, dep_id, {**CHISEL, "canary_fraction": good})
    for bad in (0, 1.5, -0.1, True, "0.5", None):
        r = svc.client.post(f"{API}/configs/{dep_id}/versions",
                            json={"config": {**CHISEL, "canary_fraction": bad}, "publish": False}, headers=svc.write)
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["field"] == "config.canary_fraction" and "must be a number in (0, 1]" in r.json()["detail"]
    r = svc.client.post(f"{API}/configs/{dep_id}/rollback", json={"version": 1, "publish": False}, headers=svc.write)
    assert r.status_code == 201 and r.json()["config"] == CHISEL


def test_the_verify_route(svc: Svc, memcached_node: MemcachedNode) -> None:
    dep_id = _deployment(svc, "vf-route", memcached_node)
    url = f"{API}/deployments/{dep_id}/verify"
    r = svc.client.post(url, headers=svc.write)
    assert r.status_code == 404 and r.json()["field"] == "deployment_id" and "no accepted config" in r.json()["detail"]
    _version(svc, dep_id, BATCHING)
    assert svc.client.post(url, headers=svc.read).status_code == 403  # a write token
    assert svc.client.post(f"{API}/deployments/999/verify", headers=svc.write).status_code == 404
    r = svc.client.post(url, json={"version": 7}, headers=svc.write)
    assert r.status_code == 404 and r.json()["field"] == "version"
    assert svc.client.post(url, json={"version": 1, "publish": True}, headers=svc.write).status_code == 422
    assert svc.client.post(url, json={"version": "1"}, headers=svc.write).status_code == 422
    r = svc.client.post(url, headers=svc.write)
    assert r.status_code == 202 and r.json()["payload"] == {"version": 1, "force": True}
    assert r.json()["deployment_id"] == dep_id
