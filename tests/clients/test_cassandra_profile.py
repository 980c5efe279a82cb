"""`tailtune_client.cassandra` against the real project: a stock config published for a `python`-driver
deployment, fetched from the service's `GET /api/v1/configs/{id}` (uvicorn on a real socket, ETag), becomes a
cassandra-driver ExecutionProfile that runs queries on the real single-node Cassandra with the configured
speculative execution."""

from __future__ import annotations

import pytest
from tailtune_client.cassandra import (
    DriverSettings,
    build_profile,
    execution_profile,
    fetch_settings,
    parse_driver_settings,
    update_profile,
)
from tailtune_client.config import ConfigError, HttpConfigSource

from tests.app_fixtures import Svc, cassandra_deployment
from tests.servers.cassandra_server import CassandraNode

API = "/api/v1"
STOCK = {
    "policy": "stock",
    "params": {
        "speculative_retry": "99p",
        "driver.speculative_execution.max_executions": 3,
        "driver.speculative_execution.delay": 2.5,
        "driver.shuffle_replicas": 1,
    },
}


@pytest.mark.slow
def test_profile_from_the_published_config_runs_queries(
    svc: Svc, served: str, cassandra_node: CassandraNode
) -> None:
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster
    from cassandra.policies import ConstantSpeculativeExecutionPolicy, DCAwareRoundRobinPolicy, TokenAwarePolicy
    from cassandra.query import SimpleStatement

    body = {**cassandra_deployment("app", cassandra_node.port, "tt_client"), "driver": "python"}
    dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
    r = svc.client.post(f"{API}/configs/{dep['id']}/versions", json={"config": STOCK, "publish": False},
                        headers=svc.write)
    assert r.status_code == 201, r.text
    url = f"{served}{API}/configs/{dep['id']}"
    token = svc.read["Authorization"].removeprefix("Bearer ")

    # the two lines of the README
    profile = execution_profile(url, token=token)
    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        lb, spec = profile.load_balancing_policy, profile.speculative_execution_policy
        assert isinstance(lb, TokenAwarePolicy) and lb.shuffle_replicas is True
        assert isinstance(lb._child_policy, DCAwareRoundRobinPolicy)
        assert isinstance(spec, ConstantSpeculativeExecutionPolicy)
        assert (spec.delay, spec.max_attempts) == (0.0025, 2)  # 2.5 ms; Java's 3 executions = 2 extra
        session = cluster.connect()
        read = SimpleStatement("SELECT release_version FROM system.local", is_idempotent=True)
        future = session.execute_async(read)
        plan = future._spec_execution_plan  # the driver's own plan for this request
        assert isinstance(plan, ConstantSpeculativeExecutionPolicy.ConstantSpeculativeExecutionPlan)
        assert (plan.delay, plan.remaining <= 2) == (0.0025, True)
        assert future.result().one().release_version.startswith("5.0")
        # a statement not marked idempotent never speculates (the driver's default)
        other = session.execute_async(SimpleStatement("SELECT release_version FROM system.local"))
        assert not isinstance(other._spec_execution_plan, type(plan))
        assert other.result().one() is not None

        # a newer version is picked up through the ETag source and applied to the running profile
        source = HttpConfigSource(url, token, 5.0)
        try:
            first = fetch_settings(source)
            assert first is not None and first.version == 1 and first.deployment_id == dep["id"]
            assert fetch_settings(source) is None  # 304: nothing new
            off = {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 1}}
            svc.client.post(f"{API}/configs/{dep['id']}/versions", json={"config": off, "publish": False},
                            headers=svc.write)
            newer = fetch_settings(source)
        finally:
            source.close()
        assert newer == DriverSettings(False, None, 0, version=2, deployment_id=dep["id"])
        update_profile(profile, newer)
        assert lb.shuffle_replicas is False
        assert not isinstance(profile.speculative_execution_policy, ConstantSpeculativeExecutionPolicy)
        assert session.execute(read).one() is not None
    finally:
        cluster.shutdown()


def test_settings_from_params_and_refusals() -> None:
    assert parse_driver_settings({"version": 4, "config": {"policy": "stock", "params": {}}}) == DriverSettings(
        False, None, 0, version=4
    )
    got = parse_driver_settings(
        {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 2,
                                        "driver.speculative_execution.delay": 7}}
    )
    assert got == DriverSettings(False, 0.007, 1)
    with pytest.raises(ConfigError, match="rendered for the Java driver 4 only"):
        parse_driver_settings({"config": {"policy": "stock", "target": {"driver": {"java": "x", "python": None}}}})
    with pytest.raises(ConfigError, match="max_attempts must be an integer"):
        parse_driver_settings(
            {"target": {"driver": {"python": {"speculative_execution": {"delay": 0.1, "max_attempts": 1.5}}}}}
        )
    profile = build_profile(DriverSettings(True, 0.01, 1), request_timeout=3.0)
    assert profile.request_timeout == 3.0
    assert profile.speculative_execution_policy.max_attempts == 1


