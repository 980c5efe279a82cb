"""Clients report what they observe; the API shows expected vs observed per config version; a `report` token
may only report."""

from __future__ import annotations

from typing import Any

import pytest

from control.configs import add_version
from control.db import JobRow
from control.observations import merge_histograms, percentile_ms
from service.auth import create_token
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.memcached_server import MemcachedNode

API = "/api/v1"
EXPECTED = {"p50_ms": 0.25, "p95_ms": 0.6, "p99_ms": 1.2, "mean_ms": 0.3}


def _tuned_version(svc: Svc, dep_id: int) -> int:
    with svc.db.session() as s:
        job = JobRow(kind="nightly", deployment_id=dep_id, payload={}, status="succeeded", attempts=1,
                     max_attempts=3, run_after=0.0, cancel_requested=False, steps=[], logs="",
                     result={"recommendation": {"policy": "chisel", "expected": EXPECTED}}, created_at=0.0)
        s.add(job)
        s.flush()
        row = add_version(s, dep_id, {"policy": "chisel", "params": {"split_keys": 8, "merge": 2,
                                                                      "elephant_threshold": 20}},
                          source="tuning", job_id=job.id, settings=svc.settings)
        return row.version


def test_client_report_gives_expected_vs_observed(svc: Svc, memcached_node: MemcachedNode) -> None:
    from tailtune_client.memcached import Client

    server = f"{memcached_node.host}:{memcached_node.port}"
    dep_id = int(svc.client.post(f"{API}/deployments", json=memcached_deployment("obs", [server]),
                                 headers=svc.write).json()["id"])
    version = _tuned_version(svc, dep_id)
    doc = {"deployment_id": dep_id, "version": version, "config": {"memcached_client": {
        "mode": "chisel", "split_keys": 8, "merge": 2, "elephant_threshold": 20}}}
    reporter = {"Authorization": f"Bearer {create_token(svc.db, 'app-reporter', 'report')}"}
    with Client([server], config=doc) as c:
        c.set_many({f"k{i}": b"v" for i in range(60)})
        for n in (1, 5, 30, 60):
            assert len(c.get_many([f"k{i}" for i in range(n)])) == n
        payload: dict[str, Any] = dict(c.report())
    r = svc.client.post(f"{API}/deployments/{dep_id}/observations", json=payload, headers=reporter)
    assert r.status_code == 200, r.text
    assert r.json()["stored"] >= 1
    # resending the same window replaces it (no double count)
    assert svc.client.post(f"{API}/deployments/{dep_id}/observations", json=payload,
                           headers=reporter).status_code == 200
    view = svc.client.get(f"{API}/deployments/{dep_id}/observations", headers=svc.read).json()
    (row,) = [v for v in view if v["config_version"] == version]
    assert row["expected"] == EXPECTED
    assert row["observed"]["requests"] == 4 and row["clients"] == 1
    assert row["observed"]["classes"]["51+"]["requests"] == 1
    assert set(row["error"]) == {"p50_pct", "p95_pct", "p99_pct"}
    # the report token may only report
    assert svc.client.get(f"{API}/deployments/{dep_id}/observations", headers=reporter).status_code == 403
    assert svc.client.get(f"{API}/configs/{dep_id}", headers=reporter).status_code == 403
    assert svc.client.post(f"{API}/deployments/{dep_id}/observations", json=payload,
                           headers=svc.read).status_code == 403


def test_bad_reports_are_rejected(svc: Svc) -> None:
    dep_id = int(svc.client.post(f"{API}/deployments", json=memcached_deployment("obs2", ["127.0.0.1:1"]),
                                 headers=svc.write).json()["id"])
    url = f"{API}/deployments/{dep_id}/observations"
    assert svc.client.post(url, json={"schema": "x"}, headers=svc.write).status_code == 422
    bad = {"schema": "tailtune.client.observations/1", "client": {"id": "a"}, "window": {"start": 2, "end": 1},
           "observations": []}
    assert svc.client.post(url, json=bad, headers=svc.write).status_code == 422


def test_percentiles_match_the_client_estimator() -> None:
    from tailtune_client.histogram import LogHistogram

    hs = []
    for seed in range(3):
        h = LogHistogram()
        for i in range(1, 500):
            h.record(float((i * 37 + seed * 101) % 5000 + 50))
        hs.append(h)
    merged_client = hs[0].copy()
    for h in hs[1:]:
        merged_client.merge(h)
    mine = merge_histograms([h.to_json() for h in hs])
    ref: dict[str, Any] = dict(merged_client.to_json())
    for q, key in ((0.5, "p50_ms"), (0.95, "p95_ms"), (0.99, "p99_ms")):
        assert percentile_ms(mine, q) == pytest.approx(ref[key], abs=2e-6)


# --- a report checked whole at the door; readers skip what they cannot use -------------------------------------
def _good_obs(version: int | None = 1) -> dict[str, Any]:
    from tailtune_client.report import Observation

    obs = Observation(version, "batching", {})
    for us in (200.0, 300.0, 450.0, 1200.0):
        obs.requests += 1
        obs.classes["2-10"].record(us)
    return dict(obs.to_json())


def _report(observations: list[Any], client: str = "c1", start: float = 1000.0) -> dict[str, Any]:
    return {"schema": "tailtune.client.observations/1", "client": {"id": client},
            "window": {"start": start, "end": start + 60.0}, "observations": observations}


def _with(path: str, value: Any) -> dict[str, Any]:
    """A good observation with the value at `path` (dotted; `counts` items by index) replaced."""
    import copy

    doc = copy.deepcopy(_good_obs())
    parts = path.split(".")
    node: Any = doc
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


BAD = [  # (observation, the field the 422 names)
    (_with("classes.2-10.counts", [[100000, 4]]), "observations[0].classes.2-10.counts[0]"),
    (_with("all.counts", [["a", 4]]), "observations[0].all.counts[0]"),
    (_with("classes.2-10.counts.0", [20, "x"]), "observations[0].classes.2-10.counts[0]"),
    (_with("classes.2-10.counts.0", [20.5, 1]), "observations[0].classes.2-10.counts[0]"),
    (_with("failed_requests", "x"), "observations[0].failed_requests"),
    (_with("all.min_observed_us", "-inf"), "observations[0].all.min_observed_us"),
    (_with("all.min_observed_us", float("-inf")), "observations[0].all.min_observed_us"),
    (_with("classes.2-10.max_observed_us", float("nan")), "observations[0].classes.2-10.max_observed_us"),
    (_with("config_version", 2**63), "observations[0].config_version"),
    (_with("config_version", 2**31), "observations[0].config_version"),
    (_with("config_version", -1), "observations[0].config_version"),
    (_with("config_version", "1"), "observations[0].config_version"),
    (_with("all.count", "many"), "observations[0].all.count"),
    (_with("all.count", 5), "observations[0].all.count"),
    (_with("all.buckets_per_decade", "x"), "observations[0].all.buckets_per_decade"),
    (_with("classes", "x"), "observations[0].classes"),
    (_with("classes", {"huge": {}}), "observations[0].classes"),
    (_with("classes.51+", [1, 2]), "observations[0].classes.51+"),
    (_with("all.sum_us", 1e300), "observations[0].all.sum_us"),
    (_with("params", {"k": "v"}), "observations[0].params.k"),
    ("x", "observations[0]"),
]


@pytest.mark.parametrize(("obs", "field"), BAD, ids=[f for _, f in BAD])
def test_a_report_the_readers_cannot_merge_is_refused_naming_the_field(svc: Svc, obs: Any, field: str) -> None:
    dep_id = int(svc.client.post(f"{API}/deployments", json=memcached_deployment("bad", ["127.0.0.1:1"]),
                                 headers=svc.write).json()["id"])
    url = f"{API}/deployments/{dep_id}/observations"
    import json

    r = svc.client.post(url, content=json.dumps(_report([_good_obs(2), obs])),  # json.dumps: -Infinity, NaN
                        headers={**svc.write, "Content-Type": "application/json"})
    body = r.json()
    assert r.status_code == 422, r.text
    assert body["field"] == field.replace("[0]", "[1]", 1) and body["field"] in body["detail"], body
    # nothing of the report was stored (its good observation neither)
    assert svc.client.get(url, headers=svc.read).json() == []


def test_a_bootstrap_report_is_version_0(svc: Svc) -> None:
    dep_id = int(svc.client.post(f"{API}/deployments", json=memcached_deployment("boot", ["127.0.0.1:1"]),
                                 headers=svc.write).json()["id"])
    url = f"{API}/deployments/{dep_id}/observations"
    assert svc.client.post(url, json=_report([_good_obs(None)]), headers=svc.write).status_code == 200
    (row,) = svc.client.get(url, headers=svc.read).json()
    assert row["config_version"] == 0 and row["bootstrap"] is True and row["observed"]["requests"] == 4


#: What an older version or someone with database access could have left in `observations.observation`.
BAD_ROWS: list[Any] = [
    {"config_version": 1, "all": {"scheme": "log10", "buckets_per_decade": 20, "count": 1, "sum_us": 5.0,
                                  "min_observed_us": 5.0, "max_observed_us": 5.0, "counts": [[100000, 1]]}},
    {"config_version": 1, "classes": {"1": {"counts": [["a", "b"]], "count": "x"}}},
    {"config_version": 1, "failed_requests": "x", "all": {"count": 0, "counts": []}},
    {"config_version": 1, "all": {"count": 1, "sum_us": 1.0, "min_observed_us": "-inf", "max_observed_us": 1.0,
                                  "counts": [[1, 1]]}},
    {"config_version": 1, "all": {"count": "many"}},
    {"config_version": 1, "all": {"buckets_per_decade": "x"}},
    {"config_version": 1, "all": [1, 2, 3]},
    [1, 2],
    "a string",
    None,
]


@pytest.mark.db_backends
def test_rows_no_reader_can_use_are_skipped_and_said_so(svc: Svc) -> None:
    from base.settings import get_settings
    from control.db import ObservationRow
    from control.verify import verify_version
    from tests.service.test_console import sign_in

    dep_id = int(svc.client.post(f"{API}/deployments", json=memcached_deployment("rows", ["127.0.0.1:1"]),
                                 headers=svc.write).json()["id"])
    r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": {"policy": "batching", "params": {}},
                                                                   "publish": False}, headers=svc.write)
    assert r.status_code == 201, r.text
    url = f"{API}/deployments/{dep_id}/observations"
    assert svc.client.post(url, json=_report([_good_obs(1)]), headers=svc.write).status_code == 200
    with svc.db.session() as s:
        for i, doc in enumerate(BAD_ROWS):
            s.add(ObservationRow(deployment_id=dep_id, client_id=f"bad{i}", window_start=2000.0 + i,
                                 window_end=2060.0 + i, config_version=1, observation=doc, received_at=0.0))
    r = svc.client.get(url, headers=svc.read)
    assert r.status_code == 200, r.text
    (row,) = r.json()
    assert row["observed"]["requests"] == 4 and row["skipped"] == len(BAD_ROWS) and "could not be read" in row["note"]
    sign_in(svc, svc.read)
    for page in ("/", f"/deployments/{dep_id}"):
        r = svc.client.get(page)
        assert r.status_code == 200 and "could not be read" in r.text, page
    with svc.db.session() as s:
        verdict = verify_version(s, get_settings(), dep_id, 1)
    assert verdict["skipped"] == len(BAD_ROWS) and verdict["status"] == "pending"


def _documents() -> Any:
    """Report observations: the client's own, with any value anywhere replaced by a hostile one."""
    from hypothesis import strategies as st

    hostile = st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
        st.lists(st.integers(min_value=-5, max_value=200_000), max_size=3),
        st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    )
    paths = st.sampled_from([
        "config_version", "mode", "params", "requests", "failed_requests", "keys", "classes", "all",
        "all.count", "all.sum_us", "all.min_observed_us", "all.max_observed_us", "all.counts", "all.counts.0",
        "all.counts.0.0", "all.counts.0.1", "all.scheme", "all.buckets_per_decade", "all.min_us",
        "classes.2-10", "classes.2-10.count", "classes.2-10.counts.0.0", "classes.2-10.counts.0.1",
        "classes.2-10.min_observed_us", "classes.2-10.sum_us", "classes.1",
    ])
    return st.lists(st.tuples(paths, hostile), min_size=0, max_size=3)


def _mutated(edits: list[tuple[str, Any]]) -> Any:
    import copy

    doc: Any = copy.deepcopy(_good_obs())
    for path, value in edits:
        node: Any = doc
        parts = path.split(".")
        try:
            for p in parts[:-1]:
                node = node[int(p)] if isinstance(node, list) else node[p]
            last = parts[-1]
            if isinstance(node, list):
                node[int(last)] = value
            elif isinstance(node, dict):
                node[last] = value
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    return doc


def test_any_report_document_is_refused_or_readable_by_every_reader(svc: Svc) -> None:
    import json

    from hypothesis import HealthCheck, given, settings

    from base.settings import get_settings
    from control.verify import verify_version
    from tests.service.test_console import sign_in

    dep_id = int(svc.client.post(f"{API}/deployments", json=memcached_deployment("fuzz", ["127.0.0.1:1"]),
                                 headers=svc.write).json()["id"])
    assert svc.client.post(f"{API}/configs/{dep_id}/versions", json={
        "config": {"policy": "batching", "params": {}}, "publish": False}, headers=svc.write).status_code == 201
    url = f"{API}/deployments/{dep_id}/observations"
    sign_in(svc, svc.read)
    n = [0]

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(_documents())
    def check(edits: list[tuple[str, Any]]) -> None:
        n[0] += 1
        doc = _mutated(edits)
        body = json.dumps(_report([doc], client=f"c{n[0]}", start=1000.0 + n[0]))
        r = svc.client.post(url, content=body, headers={**svc.write, "Content-Type": "application/json"})
        assert r.status_code in (200, 422), r.text
        if r.status_code == 422:
            assert r.json()["field"], r.text
        got = svc.client.get(url, headers=svc.read)
        assert got.status_code == 200, got.text
        assert all(v["skipped"] == 0 for v in got.json())  # what was stored is readable
        for page in ("/", f"/deployments/{dep_id}"):
            assert svc.client.get(page).status_code == 200, page
        with svc.db.session() as s:
            verify_version(s, get_settings(), dep_id, force=True)

    check()
