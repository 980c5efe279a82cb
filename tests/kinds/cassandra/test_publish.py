"""Publishing to a real single-node Cassandra 5.0 (Maven Central jars, Java 17): LWT versioning and retries.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from control.publishers import Known, PublishConflict, PublishFailed, publish_with_retry
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.cassandra.publisher import NODE_QUERY, VERSIONS_TABLE, CassandraPublisher
from tests.app_fixtures import Svc, cassandra_deployment
from tests.servers.cassandra_server import CassandraNode

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
        for r in session.execute(f"SELECT version FROM tt_lwt.{VERSIONS_TABLE} WHERE deployment_uid = 'name:cass-a'")
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


def _node_reads(session: Any, ks: str, name: str) -> tuple[int, dict[str, Any]] | None:
    row = session.execute(session.prepare(NODE_QUERY.format(ks=ks)), (name,)).one()
    return None if row is None else (int(row.version), json.loads(row.config)["config"])


def test_a_recreated_deployment_takes_over_from_the_deleted_one(
    svc: Svc, cassandra_node: CassandraNode, session: Any
) -> None:
    """Rows are keyed by the deployment's identity (id + creation nonce): a deleted and recreated `cas1` is not
    taken for the old one. Its v1 is what the nodes read (the old deployment's v3 is fenced, its version rows
    deleted), and its v3 is published, not a conflict with the old v3."""
    svc.settings.job_max_attempts = 1
    svc.settings.publish_timeout_s = 10.0
    w = Worker(svc.settings, svc.db, "w-recreate", handlers=default_handlers(), schedule=False)
    spec = cassandra_deployment("cas1", cassandra_node.port, keyspace="tt_recreate")

    def publish(dep_id: int, k: int) -> int:
        r = svc.client.post(
            f"{API}/configs/{dep_id}/versions", json={"config": {"policy": "rein", "params": {"k": k}}},
            headers=svc.write,
        )
        assert r.status_code == 201, r.text
        assert w.run_once() == "succeeded"
        assert svc.client.get(f"{API}/deployments/{dep_id}", headers=svc.read).json()["publish_status"] == "ok"
        return int(r.json()["version"])

    old = svc.client.post(f"{API}/deployments", json=spec, headers=svc.write).json()
    versions = [publish(old["id"], k) for k in (1, 2, 3)]
    assert _node_reads(session, "tt_recreate", "cas1") == (versions[-1], {"policy": "rein", "params": {"k": 3}})
    assert svc.client.delete(f"{API}/deployments/{old['id']}", headers=svc.write).status_code == 204
    new = svc.client.post(f"{API}/deployments", json=spec, headers=svc.write).json()
    assert new["id"] != old["id"]
    first = publish(new["id"], 11)
    assert first == versions[0]  # the new deployment's versions start again
    assert _node_reads(session, "tt_recreate", "cas1") == (first, {"policy": "rein", "params": {"k": 11}})
    assert publish(new["id"], 12) == versions[1]
    assert publish(new["id"], 13) == versions[2]  # the old deployment's v3 is no conflict
    assert _node_reads(session, "tt_recreate", "cas1") == (versions[2], {"policy": "rein", "params": {"k": 13}})
    uids = {r.deployment_uid for r in session.execute(f"SELECT deployment_uid FROM tt_recreate.{VERSIONS_TABLE}")}
    assert len(uids) == 1 and next(iter(uids)).startswith(f"{new['id']}.")  # the deleted one's rows are gone


def test_rows_of_a_live_deployment_are_never_taken_over(cassandra_node: CassandraNode, session: Any) -> None:
    """Another live identity's current row is a conflict; an identity with the same id and another nonce (the id
    given again by another metadata DB) is not live and is fenced."""
    conn = _conn(cassandra_node, "tt_identity")
    pub = CassandraPublisher("cas-id", conn, 10.0)
    cfg = {"policy": "fifo", "params": {}}
    first = Known(7, {1: cfg}, frozenset({7}), identity="7.aaaa", live_identities=frozenset({"7.aaaa"}))
    assert pub.publish(1, cfg, known=first).advanced
    other = Known(8, {1: cfg}, frozenset({7, 8}), identity="8.bbbb", live_identities=frozenset({"7.aaaa", "8.bbbb"}))
    with pytest.raises(PublishConflict, match=r"live deployment 7\.aaaa"):
        pub.publish(1, cfg, known=other)
    reused = Known(7, {1: {"policy": "rein", "params": {"k": 2}}}, frozenset({7}), identity="7.cccc",
                   live_identities=frozenset({"7.cccc"}))
    out = pub.publish(1, {"policy": "rein", "params": {"k": 2}}, known=reused)
    assert out.applied is not None and out.applied["replaced_deleted_deployment"] == {
        "deployment_uid": "7.aaaa", "version": 1
    }
    assert _node_reads(session, "tt_identity", "cas-id") == (1, {"policy": "rein", "params": {"k": 2}})
