"""Verify against a control, on time: a version identical to the one it is compared with is never judged or rolled
back (`identical`, canonical form); a regression between windows that are not concurrent is compared with the
environment's reference, a trivial request's round trips measured by the real publisher at publish time and by the
verify job at check time (`environment_changed` when the reference slowed as much); a forced bad config with a
flat reference still rolls back, by the check its publish scheduled; a publish drops the queued check of the
version it supersedes; a version is judged once, at the horizon. Real memcached, the real publisher and worker;
the network made slower by a relay in front of the real memcached (`tests.servers.delay_proxy`). The clients'
reports are histograms of fixed samples (the client's own histogram code), as in tests/control/test_verify.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from control.db import JobRow
from control.verify import MEANINGS, STATUSES, horizon_s, verify_version
from simulation.config_check import canonical_config
from tests.app_fixtures import Svc, memcached_deployment
from tests.control.test_verify import API, BATCHING, CHISEL, _report, _run, _samples, _verify, _versions
from tests.servers.delay_proxy import delay_proxy
from tests.servers.memcached_server import MemcachedNode
from tests.service.test_console import sign_in

#: CHISEL as its rendering for the client spells it: another JSON document, the same config.
CHISEL_RENDERED = {**CHISEL, "target": {"json": {"memcached_client": {
    "mode": "chisel", "elephant_threshold": 20, "merge": 2, "split_keys": 4}}}}


def _deployment(svc: Svc, name: str, server: str) -> int:
    svc.settings.verify_min_requests = 200
    svc.settings.verify_after_windows = 1
    svc.settings.verify_reference_probes = 40
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment(name, [server]), headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _version(svc: Svc, dep_id: int, config: dict[str, Any], *, publish: bool) -> int:
    r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": config, "publish": publish},
                        headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["version"])


def _verify_jobs(svc: Svc, dep_id: int) -> list[JobRow]:
    with svc.db.session() as s:
        rows = s.query(JobRow).filter(JobRow.deployment_id == dep_id, JobRow.kind == "verify").all()
        s.expunge_all()
        return sorted(rows, key=lambda j: j.id)


# --- canonical form ---------------------------------------------------------------------------------------------
def test_canonical_form_spellings_and_defaults() -> None:
    def c(config: dict[str, Any], kind: str = "cassandra") -> dict[str, Any]:
        return canonical_config(config, kind, max_depth=16, driver="java4" if kind == "cassandra" else None)

    stock = {"policy": "stock", "params": {}}
    assert c({**stock, "params": {"speculative_retry": "99PERCENTILE"}}) == c({**stock, "params":
                                                                               {"speculative_retry": "99p"}})
    assert c({**stock, "params": {"speculative_retry": "99p"}}) == c(stock)  # its default, filled in
    assert c({**stock, "params": {"speculative_retry": "none"}}) == c({**stock, "params":
                                                                       {"speculative_retry": "NEVER"}})
    assert c({**stock, "params": {"speculative_retry": "95p"}}) != c(stock)
    # a per-table option equal to what the config sets on every table is no difference; another value is
    never = {**stock, "params": {"speculative_retry": "NEVER"}}
    assert c({**never, "target": {"table_options": {"ks.t": {"speculative_retry": "NONE"}}}}) == c(never)
    assert c({**never, "target": {"table_options": {"ks.t": {"speculative_retry": "5ms"}}}}) != c(never)
    # memcached: what the client runs, however it is spelled; the canary fraction is not the config
    assert c(CHISEL_RENDERED, "memcached") == c({**CHISEL, "canary_fraction": 0.5}, "memcached") == c(CHISEL,
                                                                                                       "memcached")
    assert c(BATCHING, "memcached") != c(CHISEL, "memcached")


def test_one_vocabulary() -> None:
    assert STATUSES[-2:] == ("identical", "environment_changed") and tuple(MEANINGS) == STATUSES
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    table = [line.split("|")[1].strip().strip("`") for line in doc.splitlines() if line.startswith("| `")
             and line.split("|")[1].strip().strip("`") in STATUSES]
    assert table == list(STATUSES)  # the docs' table of states lists each once, in the same order


# --- the case: the same config again, a slower window ----------------------------------------------------
def test_the_same_config_in_a_slower_window_is_identical_and_not_rolled_back(
    svc: Svc, memcached_node: MemcachedNode
) -> None:
    dep_id = _deployment(svc, "vc-same", memcached_node.address)
    v1 = _version(svc, dep_id, CHISEL, publish=False)
    _version(svc, dep_id, BATCHING, publish=False)  # version 2: never reported
    v3 = _version(svc, dep_id, CHISEL_RENDERED, publish=True)  # version 1's config again, spelled otherwise
    _report(svc, dep_id, {v1: _samples(1, 400, 500.0)}, start=1000.0, end=2000.0)  # a quiet window
    _report(svc, dep_id, {v3: _samples(2, 400, 1500.0)}, start=5000.0, end=6000.0)  # loaded: 3x slower
    assert _run(svc) == ["succeeded"]  # the publish of version 3; its check is due at the horizon
    _verify(svc, dep_id)
    assert _run(svc) == ["succeeded"]
    versions = _versions(svc, dep_id)
    ver = versions[v3]["verification"]
    assert ver["status"] == "identical" and versions[v3]["verification_status"] == "identical"
    assert ver["reference_version"] == v1 and ver["test"] is None
    assert ver["reason"].startswith("version 3's config is identical to version 1's")
    assert len(versions) == 3  # nothing rolled back


# --- a different config, the environment slower as much -----------------------------------------------------------
def test_a_regression_the_reference_explains_is_environment_changed(svc: Svc, memcached_node: MemcachedNode) -> None:
    with delay_proxy(memcached_node.host, memcached_node.port) as proxy:
        dep_id = _deployment(svc, "vc-env", proxy.address)
        v1 = _version(svc, dep_id, BATCHING, publish=False)
        _report(svc, dep_id, {v1: _samples(1, 400, 500.0)}, start=1000.0, end=2000.0)
        v2 = _version(svc, dep_id, CHISEL, publish=True)
        assert _run(svc) == ["succeeded"]  # the publish: the reference measured on the network as it was
        published = _versions(svc, dep_id)[v2]["published"]["memcached"]
        assert published["reference"]["request"] == "version" and published["reference"]["probes"] == 40
        proxy.delay_s = 0.05  # every reply 50 ms later from now on
        _report(svc, dep_id, {v2: _samples(2, 400, 1000.0)}, client="c2", start=3000.0, end=4000.0)  # 2x slower
        _verify(svc, dep_id)
        assert _run(svc) == ["succeeded"]
    versions = _versions(svc, dep_id)
    ver = versions[v2]["verification"]
    assert ver["status"] == "environment_changed", ver["reason"]
    assert ver["test"]["worse"] is True and ver["before"]["windows"] == "all"
    env = ver["environment"]
    assert env["explains"] is True and env["test"]["worse"] is True and env["after"]["p99_ms"] >= 50.0
    assert ver["test"]["ratio"] <= env["covers_ratio"]
    assert "the environment changed as much" in ver["reason"]
    assert len(versions) == 2  # not rolled back


# --- a real regression, a flat reference, on time ------------------------------------------------------------------
def test_a_bad_config_with_a_flat_reference_is_rolled_back_by_the_publishs_check(
    svc: Svc, memcached_node: MemcachedNode
) -> None:
    dep_id = _deployment(svc, "vc-bad", memcached_node.address)
    svc.settings.verify_window_s = 0.001  # the horizon passes at once: the publish's own check runs next
    v1 = _version(svc, dep_id, BATCHING, publish=False)
    _report(svc, dep_id, {v1: _samples(1, 400, 500.0)}, start=1000.0, end=2000.0)
    v2 = _version(svc, dep_id, CHISEL, publish=True)
    _report(svc, dep_id, {v2: _samples(2, 400, 10000.0)}, client="c2", start=3000.0, end=4000.0)  # 20x slower
    # the publish, its scheduled check (no one asked), the rollback's publish, the rollback's own check
    assert _run(svc) == ["succeeded"] * 4
    versions = _versions(svc, dep_id)
    ver = versions[v2]["verification"]
    assert ver["status"] == "rolled_back", ver["reason"]
    assert ver["environment"]["explains"] is False and "the reference does not explain it" in ver["reason"]
    jobs = _verify_jobs(svc, dep_id)
    assert jobs[0].payload == {"version": v2} and jobs[0].dedupe_key == f"verify:{dep_id}:{v2}:0"
    assert ver["job_id"] == jobs[0].id
    back = versions[3]
    assert back["source"] == "rollback" and back["config"] == BATCHING
    assert back["published"]["memcached"]["current_version"] == 3
    assert back["verification"]["status"] == "pending"  # the rollback's check ran too: no client reported it yet


# --- on time: the check at the horizon, a stale check dropped, the console says when ----------------------------
def test_every_publish_schedules_its_check_and_drops_the_superseded_one(
    svc: Svc, memcached_node: MemcachedNode
) -> None:
    dep_id = _deployment(svc, "vc-time", memcached_node.address)
    svc.settings.verify_after_windows = 3
    before = time.time()
    v1 = _version(svc, dep_id, BATCHING, publish=True)
    assert _run(svc) == ["succeeded"]
    [first] = _verify_jobs(svc, dep_id)
    assert first.status == "queued" and first.payload == {"version": v1}
    assert first.run_after >= before + horizon_s(svc.settings) == before + 3 * svc.settings.verify_window_s
    v2 = _version(svc, dep_id, CHISEL, publish=True)
    assert _run(svc) == ["succeeded"]  # the publish of version 2
    old, new = _verify_jobs(svc, dep_id)
    assert old.id == first.id and old.status == "cancelled" and (old.error or "").startswith("superseded")
    assert new.status == "queued" and new.payload == {"version": v2}
    versions = _versions(svc, dep_id)
    assert versions[v1]["verification"]["status"] == "superseded"
    sign_in(svc, svc.read)
    page = svc.client.get(f"/deployments/{dep_id}").text
    assert 'id="next-check-2"' in page and 'id="next-check-1"' not in page
    assert MEANINGS["superseded"] in page  # the badge says what its status means


@pytest.mark.parametrize("windows", [1, 2])
def test_judged_once_at_the_horizon(svc: Svc, memcached_node: MemcachedNode, windows: int) -> None:
    dep_id = _deployment(svc, f"vc-horizon-{windows}", memcached_node.address)
    svc.settings.verify_after_windows = 2
    v1 = _version(svc, dep_id, BATCHING, publish=False)
    _report(svc, dep_id, {v1: _samples(1, 400, 500.0)}, start=1000.0, end=2000.0)
    v2 = _version(svc, dep_id, CHISEL, publish=False)
    xs = _samples(2, 400, 450.0)
    for w in range(windows):
        _report(svc, dep_id, {v2: xs[w * 200:(w + 1) * 200]}, client="c2", start=3000.0 + w, end=3001.0 + w)
    with svc.db.session() as s:
        out = verify_version(s, svc.settings, dep_id, v2)
    if windows < 2:
        assert out["status"] == "pending" and out["test"] is None
        assert out["reason"] == ("1 report window(s) of version 2 in; it is judged once, when 2 are "
                                 "(verify_after_windows)")
    else:
        assert out["status"] == "verified" and out["after"]["windows_reported"] == 2


def _window(slow: int, n: int = 1000, fast_us: float = 1000.0, slow_us: float = 10_000.0) -> Any:
    from tailtune_client.histogram import LogHistogram

    h = LogHistogram()
    for i in range(n):
        h.record(slow_us if i < slow else fast_us)
    return h


def test_the_test_resamples_whole_windows_so_a_noisy_windows_spread_is_not_a_regression() -> None:
    """The same config, windows of a noisy host: one of three "before" windows and two of three "after" ones met a
    slow moment (2–3 % of their requests at 10 ms). Merged, the after side's p99 is 10 ms against 1 ms — resampled as
    independent requests that is a sure regression; resampled as whole windows it is what three exchangeable
    windows do (p ≈ 0.3). A regression in every window stays one."""
    from control.observations import merge_histograms
    from control.verify import MIN_WINDOWS, p99_ratio_test

    before = [_window(20), _window(0), _window(0)]
    after = [_window(30), _window(30), _window(0)]
    kw: dict[str, Any] = {"alpha": 0.05, "margin_pct": 10.0, "resamples": 2000}
    requests = p99_ratio_test(merge_histograms(before), merge_histograms(after), **kw)
    windows = p99_ratio_test(merge_histograms(before), merge_histograms(after), before_windows=before,
                             after_windows=after, **kw)
    assert (requests["method"], requests["worse"]) == ("requests", True)
    assert (windows["method"], windows["windows"], windows["worse"]) == ("windows", [3, 3], False)
    assert windows["p_value"] > 0.2
    slower = [_window(0, fast_us=20_000.0) for _ in range(3)]
    bad = p99_ratio_test(merge_histograms(before), merge_histograms(slower), before_windows=before,
                         after_windows=slower, **kw)
    assert (bad["method"], bad["worse"]) == ("windows", True)
    # fewer than MIN_WINDOWS on a side: requests are resampled, as before
    few = p99_ratio_test(merge_histograms(before), merge_histograms(after), before_windows=before[:MIN_WINDOWS - 1],
                         after_windows=after, **kw)
    assert few["method"] == "requests"
