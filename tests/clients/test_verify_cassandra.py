"""Verify on the tests' real Cassandra node: the publisher reads each table's coordinator read latency from
`system_views` before it changes anything, the verify job reads it again, and the version records both beside
its expectation; the driver-profile helper runs a canary version on a fraction of the requests and reports both
versions' latency to the real API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tailtune_client.cassandra import CANARY_PROFILE, STABLE_PROFILE, TunedProfiles

from control.configs import add_version
from control.verify import expectation
from jobs.handlers import default_handlers
from jobs.worker import Worker
from service.auth import create_token
from tests.app_fixtures import Svc, cassandra_deployment
from tests.servers.cassandra_server import CassandraNode

API = "/api/v1"
KS = "tt_verify"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def session(cassandra_node: CassandraNode) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5)
    try:
        s = cluster.connect()
        s.execute(f"CREATE KEYSPACE IF NOT EXISTS {KS} WITH replication = {{'class': 'SimpleStrategy', "
                  "'replication_factor': 1}")
        s.execute(f"CREATE TABLE IF NOT EXISTS {KS}.kv (pk int PRIMARY KEY, v text)")
        insert = s.prepare(f"INSERT INTO {KS}.kv (pk, v) VALUES (?, ?)")
        for i in range(100):
            s.execute(insert, (i, f"v{i}"))
        yield s
    finally:
        cluster.shutdown()


def _run(svc: Svc) -> list[str]:
    w = Worker(svc.settings, svc.db, "w-verify-cass", handlers=default_handlers(), schedule=False)
    out = []
    while (status := w.run_once()) is not None:
        out.append(status)
    return out


def _read(session: Any, n: int) -> None:
    select = session.prepare(f"SELECT v FROM {KS}.kv WHERE pk = ?")
    for i in range(n):
        assert session.execute(select, (i % 100,)).one().v == f"v{i % 100}"


def _counts(latency: dict[str, Any], table: str) -> int:
    return sum(int(tables[table]["count"]) for tables in latency["nodes"].values())


def test_verify_records_the_coordinator_latency_before_and_after_against_expected(
    svc: Svc, cassandra_node: CassandraNode, session: Any
) -> None:
    svc.settings.verify_min_requests = 200
    # the node's p99 moves by milliseconds with this machine's load; here only a tenfold rise would be "worse"
    svc.settings.verify_min_regression_pct = 900.0
    table = f"{KS}.kv"
    body = {**cassandra_deployment("verify-cass", cassandra_node.port, "tt_verify_cfg"), "tables": [table]}
    dep_id = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()["id"]
    r = svc.client.post(f"{API}/configs/{dep_id}/versions",
                        json={"config": {"policy": "stock", "params": {"speculative_retry": "99p"}}}, headers=svc.write)
    assert r.status_code == 201, r.text
    assert _run(svc) == ["succeeded"]
    first = svc.client.get(f"{API}/configs/{dep_id}/versions/1", headers=svc.read).json()["published"]["cassandra"]
    lat = first["latency"]
    assert (lat["source"], lat["unit"]) == ("system_views.coordinator_read_latency", "s")
    # the environment's reference, timed by the publisher through its connection before it changed anything
    ref = first["reference"]
    assert ref["request"] == "SELECT release_version FROM system.local"
    assert ref["probes"] == svc.settings.verify_reference_probes and ref["p99_ms"] > 0
    assert "hold seconds" in lat["note"]
    (node,) = lat["nodes"]  # one node, asked itself
    assert set(lat["nodes"][node][table]) >= {"count", "p50th_ms", "p99th_ms", "max_ms", "per_second"}
    _read(session, 300)

    # v2 as the nightly job stores a tuned version: with what the model expects of it
    with svc.db.session() as s:
        row = add_version(s, dep_id, {"policy": "stock", "params": {"speculative_retry": "50ms"}},
                          settings=svc.settings, source="tuning")
        row.verification = {"status": "unchecked", "expected": expectation({"expected": {"p99_ms": 2.0}})}
    assert svc.client.post(f"{API}/configs/{dep_id}/publish", json={"version": 2}, headers=svc.write).status_code == 202
    assert _run(svc) == ["succeeded"]
    second = svc.client.get(f"{API}/configs/{dep_id}/versions/2", headers=svc.read).json()
    before = second["published"]["cassandra"]["latency"]
    assert _counts(before, table) >= _counts(lat, table) + 300  # read before its ALTER TABLE: after v1's reads
    assert second["published"]["cassandra"]["tables"][table] == {"before": "99p", "after": "50ms"}
    _read(session, 250)

    r = svc.client.post(f"{API}/deployments/{dep_id}/verify", headers=svc.write)
    assert r.status_code == 202, r.text
    assert _run(svc) == ["succeeded"]
    ver = svc.client.get(f"{API}/configs/{dep_id}/versions/2", headers=svc.read).json()["verification"]
    assert ver["status"] == "verified", ver["reason"]
    server = ver["server"]
    assert server["name"] == "server-p99-threshold" and server["worse"] is False
    assert 250 <= server["reads_since_publish"] < 300  # the reads since v2's publish (and nothing of v1's)
    assert server["before"] == before and server["after"]["unit"] == "s"
    after_raw = server["after"]["nodes"][node][table]["p99th_ms"]
    assert server["p99_after_ms"] == pytest.approx(after_raw * 1000.0)  # seconds → ms
    assert ver["before"]["p99_ms"] == server["p99_before_ms"] and ver["after"]["p99_ms"] == server["p99_after_ms"]
    assert ver["after"]["reads_since_publish"] == server["reads_since_publish"]
    assert ver["expected"]["p99_ms"] == 2.0 and ver["expected"]["compared"].startswith("no: the server's figures")
    assert ver["reason"].startswith("coordinator p99 ") and "not worse" in ver["reason"]

    # version 2's config again, spelled as Cassandra also accepts it: identical, whatever the figures say
    r = svc.client.post(f"{API}/configs/{dep_id}/versions",
                        json={"config": {"policy": "stock", "params": {"speculative_retry": "50MS"}}},
                        headers=svc.write)
    assert r.status_code == 201, r.text
    assert _run(svc) == ["succeeded"]
    _read(session, 250)
    assert svc.client.post(f"{API}/deployments/{dep_id}/verify", headers=svc.write).status_code == 202
    assert _run(svc) == ["succeeded"]
    third = svc.client.get(f"{API}/configs/{dep_id}/versions/3", headers=svc.read).json()["verification"]
    assert third["status"] == "identical" and third["reference_version"] == 2, third["reason"]


def test_driver_profiles_run_a_canary_and_report_both_versions(
    svc: Svc, served: str, cassandra_node: CassandraNode, session: Any
) -> None:
    from cassandra.cluster import Cluster
    from cassandra.policies import ConstantSpeculativeExecutionPolicy, NoSpeculativeExecutionPolicy
    from cassandra.query import SimpleStatement

    body = {**cassandra_deployment("verify-profiles", cassandra_node.port, "tt_verify_cfg"), "driver": "python"}
    dep_id = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()["id"]

    def add(config: dict[str, Any]) -> None:
        r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": config, "publish": False},
                            headers=svc.write)
        assert r.status_code == 201, r.text

    plain = {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 1}}
    hedged = {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 3,
                                            "driver.speculative_execution.delay": 50}}
    add(plain)
    url = f"{served}{API}/configs/{dep_id}"
    read_token = svc.read["Authorization"].removeprefix("Bearer ")
    reporter = create_token(svc.db, "profiles-app", "report")
    select = SimpleStatement(f"SELECT v FROM {KS}.kv WHERE pk = %s", is_idempotent=True)
    with TunedProfiles(url, token=read_token, poll_interval=0, deployment="verify-profiles") as profiles:
        cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5,
                          execution_profiles=profiles.execution_profiles())
        try:
            s = cluster.connect()
            for i in range(20):
                assert profiles.execute(s, select, (i,)).one().v == f"v{i}"
            add({**hedged, "canary_fraction": 0.5})
            assert profiles.refresh() is True
            assert profiles.canary() == {"version": 2, "fraction": 0.5, "stable_version": 1}
            canary, stable = profiles.profiles[CANARY_PROFILE], profiles.profiles[STABLE_PROFILE]
            assert isinstance(canary.speculative_execution_policy, ConstantSpeculativeExecutionPolicy)
            assert isinstance(stable.speculative_execution_policy, NoSpeculativeExecutionPolicy)
            for i in range(200):
                assert profiles.execute(s, select, (i % 100,), keys=1).one().v == f"v{i % 100}"
            by = {o["config_version"]: o["requests"] for o in profiles.latency()}
            assert by[1] - 20 + by[2] == 200 and by[2] > 50 and by[1] - 20 > 50
            assert profiles.report_to(f"{served}{API}/deployments/{dep_id}/observations", reporter) is True
            view = svc.client.get(f"{API}/deployments/{dep_id}/observations", headers=svc.read).json()
            assert {v["config_version"]: v["observed"]["requests"] for v in view} == by
            # a version without canary_fraction runs on every request, in both profiles
            add(hedged)
            assert profiles.refresh() is True and profiles.canary() is None
            assert isinstance(stable.speculative_execution_policy, ConstantSpeculativeExecutionPolicy)
            assert profiles.pick() == (STABLE_PROFILE, profiles.settings) and profiles.settings.version == 3
        finally:
            cluster.shutdown()
