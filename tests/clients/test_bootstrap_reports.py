"""A client started before the first publish (its bootstrap config, `config_version` null) reports, and its reports
are the deployment's version 0, "before tailtune"; a report the service refuses is dropped, logged once and not
resent; the Cassandra `TunedProfiles` starts on a bootstrap config too. Real service (uvicorn), real memcached,
real Cassandra."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tailtune_client.memcached import Client

from service.auth import create_token
from tests.app_fixtures import Svc, cassandra_deployment, memcached_deployment, memcached_node
from tests.servers.cassandra_server import CassandraNode
from tests.servers.memcached_server import MemcachedNode

__all__ = ["memcached_node"]

API = "/api/v1"
BOOTSTRAP = {"memcached_client": {"mode": "batching"}}


def _deployment(svc: Svc, body: dict[str, Any]) -> int:
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _view(svc: Svc, dep_id: int) -> dict[int, dict[str, Any]]:
    r = svc.client.get(f"{API}/deployments/{dep_id}/observations", headers=svc.read)
    assert r.status_code == 200, r.text
    return {int(v["config_version"]): v for v in r.json()}


def test_a_client_on_its_bootstrap_config_reports_as_version_0(
    svc: Svc, served: str, memcached_node: MemcachedNode
) -> None:
    dep_id = _deployment(svc, memcached_deployment("boot", [memcached_node.address]))
    read = svc.read["Authorization"].removeprefix("Bearer ")
    reporter = create_token(svc.db, "boot-app", "report")
    # nothing is published yet: the config URL answers 404, the client runs its bootstrap config
    with Client([memcached_node.address], config=BOOTSTRAP, config_url=f"{served}{API}/configs/{dep_id}",
                token=read, poll_interval=0, connections_per_server=1) as c:
        assert c.stats()["config_version"] is None
        c.set_many({f"b{i}": b"v" for i in range(20)})
        for n in (1, 5, 20):
            assert len(c.get_many([f"b{i}" for i in range(n)])) == n
        assert c.report_to(f"{served}{API}/deployments/{dep_id}/observations", reporter) is True, \
            c.stats()["reports"]
    row = _view(svc, dep_id)[0]
    assert row["bootstrap"] is True and row["observed"]["requests"] == 3 and row["skipped"] == 0


def test_a_refused_report_is_dropped_logged_once_and_not_resent(
    svc: Svc, served: str, memcached_node: MemcachedNode, caplog: pytest.LogCaptureFixture
) -> None:
    dep_id = _deployment(svc, memcached_deployment("drop", [memcached_node.address]))
    url = f"{served}{API}/deployments/{dep_id}/observations"
    reporter = create_token(svc.db, "drop-app", "report")
    other = {"deployment_id": dep_id + 1000, "config": BOOTSTRAP}  # names another deployment: 422
    caplog.set_level(logging.WARNING, logger="tailtune_client.report")
    with Client([memcached_node.address], config=other, poll_interval=0, connections_per_server=1) as c:
        c.set_many({"d": b"v"})
        for _ in range(3):
            c.get_many(["d"])
            assert c.report_to(url, reporter) is False
        reports = c.stats()["reports"]
        assert reports["dropped"] == 3 and reports["dropped_requests"] == 3 and "HTTP 422" in reports["last_error"]
        assert c.report()["observations"] == []  # nothing waits to be resent
    refused = [r for r in caplog.records if "window dropped" in r.getMessage()]
    assert len(refused) == 1  # logged once
    # a transient failure keeps the window: the service unreachable, then back
    with Client([memcached_node.address], config=BOOTSTRAP, poll_interval=0, connections_per_server=1) as c:
        c.set_many({"d": b"v"})
        c.get_many(["d"])
        assert c.report_to("http://127.0.0.1:9/api/v1/x", reporter, timeout=1.0) is False
        assert c.stats()["reports"]["dropped"] == 0
        c.get_many(["d"])
        assert c.report_to(url, reporter) is True
    assert _view(svc, dep_id)[0]["observed"]["requests"] == 2


@pytest.mark.slow
def test_tuned_profiles_start_on_a_bootstrap_config_and_report(
    svc: Svc, served: str, cassandra_node: CassandraNode
) -> None:
    from cassandra.cluster import Cluster
    from cassandra.query import SimpleStatement
    from tailtune_client.cassandra import STABLE_PROFILE, TunedProfiles
    from tailtune_client.config import ConfigSourceError

    body = {**cassandra_deployment("boot-cas", cassandra_node.port, "tt_boot"), "driver": "python"}
    dep_id = _deployment(svc, body)
    url = f"{served}{API}/configs/{dep_id}"
    read = svc.read["Authorization"].removeprefix("Bearer ")
    with pytest.raises(ConfigSourceError, match="404"):
        TunedProfiles(url, token=read, poll_interval=0)  # no published version and no bootstrap config
    bootstrap = {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 1}}
    profiles = TunedProfiles(url, token=read, poll_interval=0, config=bootstrap)
    assert profiles.settings.version is None and profiles.last_error is not None and "404" in profiles.last_error
    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5,
                      execution_profiles=profiles.execution_profiles())
    try:
        session = cluster.connect()
        read_stmt = SimpleStatement("SELECT release_version FROM system.local", is_idempotent=True)
        for _ in range(5):
            assert profiles.execute(session, read_stmt).one() is not None
        reporter = create_token(svc.db, "boot-cas-app", "report")
        assert profiles.report_to(f"{served}{API}/deployments/{dep_id}/observations", reporter) is True
        assert _view(svc, dep_id)[0]["observed"]["requests"] == 5
        # the first published version replaces the bootstrap config
        stock = {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 2,
                                               "driver.speculative_execution.delay": 5.0}}
        r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": stock, "publish": False},
                            headers=svc.write)
        assert r.status_code == 201, r.text
        assert profiles.refresh() is True and profiles.settings.version == 1
        assert profiles.profiles[STABLE_PROFILE].speculative_execution_policy.delay == 0.005
    finally:
        cluster.shutdown()
        profiles.close()
