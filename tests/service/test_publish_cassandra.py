"""Publishing to a real single-node Cassandra 5.0 (Maven Central jars, Java 17): LWT versioning and retries.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jobs.handlers import default_handlers
from jobs.worker import Worker
from tailtune.control.publishers import CassandraPublisher, PublishConflict, PublishFailed, publish_with_retry
from tailtune.control.publishers.cassandra import NODE_QUERY
from tests.servers.cassandra_server import CassandraNode
from tests.service.conftest import Svc, cassandra_deployment

API = "/api/v1"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def session(cassandra_node: CassandraNode) -> Iterator[Any]:
    from cassandra.cluster import Cluster

    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5)
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def _conn(node: CassandraNode, ks: str = "tailtune_test") -> dict[str, Any]:
    return {"contact_points": [node.host], "port": node.port, "keyspace": ks}


def test_lwt_versions_and_the_node_query(cassandra_node: CassandraNode, session: Any) -> None:
    pub = CassandraPublisher("cass-a", _conn(cassandra_node, "tt_lwt"), 10.0)
    assert (pub.publish(1, {"policy": "rein", "params": {"k": 4}}).advanced, pub.read_current()) == (
        True,
        (1, {"policy": "rein", "params": {"k": 4}}),
    )
    o = pub.publish(3, {"policy": "brb-equalmax", "params": {}})
    assert (o.advanced, o.current_version) == (True, 3)
    late = pub.publish(2, {"policy": "fifo", "params": {}})  # older version arrives late: no regress
    assert (late.advanced, late.current_version) == (False, 3)
    assert pub.publish(3, {"policy": "brb-equalmax", "params": {}}).advanced is False  # idempotent
    # exactly the one documented query a node runs
    row = session.execute(session.prepare(NODE_QUERY.format(ks="tt_lwt")), ("cass-a",)).one()
    assert row.version == 3
    assert json.loads(row.config) == {
        "deployment": "cass-a",
        "version": 3,
        "config": {"policy": "brb-equalmax", "params": {}},
    }
    versions = [
        r.version
        for r in session.execute("SELECT version FROM tt_lwt.config_versions WHERE deployment = 'cass-a'")
    ]
    assert versions == [3, 2, 1]  # every version kept, newest first
    with pytest.raises(PublishConflict):
        pub.publish(1, {"policy": "different"})


def test_concurrent_publishers_cannot_regress(cassandra_node: CassandraNode) -> None:
    conn = _conn(cassandra_node, "tt_race")
    CassandraPublisher("cass-race", conn, 10.0).publish(1, {"policy": "fifo"})  # creates the schema once
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def publish(versions: list[int]) -> None:
        pub = CassandraPublisher("cass-race", conn, 10.0)
        barrier.wait()
        try:
            for v in versions:
                publish_with_retry(pub, v, {"policy": "rein", "params": {"k": v}}, attempts=5, backoff_s=0.1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(vs,)) for vs in ([4, 2], [3, 6], [5, 2])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert CassandraPublisher("cass-race", conn, 10.0).read_current() == (
        6,
        {"policy": "rein", "params": {"k": 6}},
    )


def test_target_paused_mid_publish_is_retried(cassandra_node: CassandraNode) -> None:
    pub = CassandraPublisher("cass-pause", _conn(cassandra_node, "tt_lwt"), 1.5)
    pub.publish(1, {"policy": "fifo", "params": {}})
    logs: list[str] = []
    cassandra_node.pause()  # SIGSTOP: connections hang, requests time out
    try:

        def resume_during_backoff(delay: float) -> None:
            cassandra_node.resume()
            time.sleep(delay + 1.0)

        out = publish_with_retry(
            pub,
            2,
            {"policy": "rein", "params": {"k": 2}},
            attempts=4,
            backoff_s=0.2,
            log=logs.append,
            sleep=resume_during_backoff,
        )
    finally:
        cassandra_node.resume()
    assert out.current_version == 2
    assert "attempt 1/4 failed" in logs[0]
    assert pub.read_current() == (2, {"policy": "rein", "params": {"k": 2}})


def test_unreachable_cluster_fails_job_and_deployment(svc: Svc, cassandra_node: CassandraNode) -> None:
    from tests.servers.cassandra_server import free_port

    good = svc.client.post(
        f"{API}/deployments", json=cassandra_deployment("cass-ok", cassandra_node.port), headers=svc.write
    ).json()
    down = svc.client.post(
        f"{API}/deployments", json=cassandra_deployment("cass-down", free_port()), headers=svc.write
    ).json()
    svc.settings.job_max_attempts = 1
    svc.settings.publish_timeout_s = 10.0
    cfg = {"policy": "rein", "params": {"k": 3}}
    for dep in (good, down):
        r = svc.client.post(f"{API}/configs/{dep['id']}/versions", json={"config": cfg}, headers=svc.write)
        assert r.status_code == 201
    w = Worker(svc.settings, svc.db, "w-cass", handlers=default_handlers(), schedule=False)
    assert [w.run_once(), w.run_once()] == ["succeeded", "failed"]
    ok = svc.client.get(f"{API}/deployments/{good['id']}", headers=svc.read).json()
    assert ok["publish_status"] == "ok" and ok["current_config"] == cfg
    assert CassandraPublisher("cass-ok", ok["connection"], 10.0).read_current() == (1, cfg)
    bad = svc.client.get(f"{API}/deployments/{down['id']}", headers=svc.read).json()
    assert bad["publish_status"] == "failed" and "after 3 attempts" in bad["publish_error"]
    jobs = svc.client.get(f"{API}/jobs?deployment_id={down['id']}", headers=svc.read).json()
    job = svc.client.get(f"{API}/jobs/{jobs[0]['id']}", headers=svc.read).json()  # a listing has no logs
    assert job["status"] == "failed" and job["logs"].count("retrying in") == 2
    with pytest.raises(PublishFailed):
        publish_with_retry(
            CassandraPublisher("cass-down", bad["connection"], 1.0), 1, cfg, attempts=1, backoff_s=0
        )


def test_a_wiped_current_row_gets_the_newest_version_back(cassandra_node: CassandraNode, session: Any) -> None:
    """Republishing an older version to a table that lost its current row restores the newest published
    version (the control plane hands it over as `head`), never the older one."""
    pub = CassandraPublisher("cass-wiped", _conn(cassandra_node, "tt_wiped"), 10.0)
    v2 = {"policy": "rein", "params": {"k": 2}}
    pub.publish(1, {"policy": "fifo", "params": {}})
    pub.publish(2, v2)
    session.execute("DELETE FROM tt_wiped.config_current WHERE deployment = 'cass-wiped'")
    out = pub.publish(1, {"policy": "fifo", "params": {}}, head=(2, v2))
    assert out.current_version == 2 and pub.read_current() == (2, v2)
