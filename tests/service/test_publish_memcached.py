"""Publishing to a real memcached: immutable version keys, CAS-guarded current key, retries, failures
reported.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from pymemcache.client.base import Client

from jobs.handlers import default_handlers
from jobs.worker import Worker
from service.testing.memcached_server import MemcachedNode
from tailtune.control.publishers import MemcachedPublisher, PublishConflict, PublishFailed, publish_with_retry
from tailtune.control.publishers.memcached import current_key, version_key
from tests.service.conftest import Svc, memcached_deployment

API = "/api/v1"


def _get(node: MemcachedNode, key: str) -> dict[str, object] | None:
    c = Client((node.host, node.port))
    try:
        raw = c.get(key)
    finally:
        c.close()
    return None if raw is None else json.loads(raw)


def test_versions_only_move_forward(memcached_node: MemcachedNode) -> None:
    pub = MemcachedPublisher("mc-forward", {"servers": [memcached_node.address]}, 1.0)
    assert pub.read_current() is None
    o1 = pub.publish(1, {"policy": "batching", "params": {"batch": 2}})
    assert (o1.advanced, o1.current_version) == (True, 1)
    o2 = pub.publish(2, {"policy": "chisel", "params": {"thr_l": 4096}})
    assert (o2.advanced, o2.current_version) == (True, 2)
    again = pub.publish(1, {"policy": "batching", "params": {"batch": 2}})  # an old publisher wakes up late
    assert (again.advanced, again.current_version) == (False, 2)
    assert pub.publish(2, {"policy": "chisel", "params": {"thr_l": 4096}}).advanced is False  # idempotent
    assert pub.read_current() == (2, {"policy": "chisel", "params": {"thr_l": 4096}})
    assert _get(memcached_node, current_key("mc-forward")) == {
        "deployment": "mc-forward",
        "version": 2,
        "config": {"policy": "chisel", "params": {"thr_l": 4096}},
    }
    assert _get(memcached_node, version_key("mc-forward", 1)) == {
        "deployment": "mc-forward",
        "version": 1,
        "config": {"policy": "batching", "params": {"batch": 2}},
    }
    with pytest.raises(PublishConflict):
        pub.publish(1, {"policy": "other"})  # version keys are immutable


def test_concurrent_publishers_cannot_regress(memcached_node: MemcachedNode) -> None:
    conn = {"servers": [memcached_node.address]}
    barrier = threading.Barrier(8)

    def publish(versions: list[int]) -> None:
        pub = MemcachedPublisher("mc-race", conn, 2.0)
        barrier.wait()
        for v in versions:
            pub.publish(v, {"policy": "batching", "params": {"batch": v}})

    threads = [threading.Thread(target=publish, args=(list(range(1 + k, 41, 8)),)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert MemcachedPublisher("mc-race", conn, 1.0).read_current() == (
        40,
        {"policy": "batching", "params": {"batch": 40}},
    )


def test_target_stopped_mid_publish_is_retried(memcached_node: MemcachedNode) -> None:
    node = MemcachedNode()
    node.start()
    try:
        pub = MemcachedPublisher("mc-retry", {"servers": [node.address]}, 0.5)
        pub.publish(1, {"policy": "batching", "params": {}})
        node.stop()
        logs: list[str] = []

        def restart_after_first_failure(delay: float) -> None:
            if node.proc is None:
                node.start()  # the target comes back while we back off
            time.sleep(delay)

        out = publish_with_retry(
            pub,
            2,
            {"policy": "chisel", "params": {}},
            attempts=4,
            backoff_s=0.05,
            log=logs.append,
            sleep=restart_after_first_failure,
        )
        assert (out.version, out.advanced) == (2, True)
        assert "attempt 1/4 failed" in logs[0] and "retrying in 0.05s" in logs[0]
        assert "version 2 published (attempt 2" in logs[-1]
        # memcached restarted empty: the publish wrote both keys again, whole
        assert _get(node, current_key("mc-retry")) == {
            "deployment": "mc-retry",
            "version": 2,
            "config": {"policy": "chisel", "params": {}},
        }
        node.stop()
        with pytest.raises(PublishFailed, match="after 3 attempts"):
            publish_with_retry(pub, 3, {"policy": "x"}, attempts=3, backoff_s=0.0)
    finally:
        node.close()


def test_publish_job_reports_on_job_and_deployment(svc: Svc, memcached_node: MemcachedNode) -> None:
    dead = MemcachedNode()  # a port with nothing listening
    dead.close()
    good = svc.client.post(
        f"{API}/deployments",
        json=memcached_deployment("mc-good", [memcached_node.address]),
        headers=svc.write,
    ).json()
    bad = svc.client.post(
        f"{API}/deployments", json=memcached_deployment("mc-down", [dead.address]), headers=svc.write
    ).json()
    cfg = {"policy": "chisel", "params": {"split_keys": 512, "merge": 1, "elephant_threshold": 50}}
    svc.settings.job_max_attempts = 1  # no job-level retry here: the publish retries are what is checked
    j_good = svc.client.post(
        f"{API}/configs/{good['id']}/versions", json={"config": cfg}, headers=svc.write
    ).json()
    j_bad = svc.client.post(
        f"{API}/configs/{bad['id']}/versions", json={"config": cfg}, headers=svc.write
    ).json()
    w = Worker(svc.settings, svc.db, "w-pub", handlers=default_handlers(), schedule=False)
    statuses = {w.run_once(), w.run_once()}
    assert statuses == {"succeeded", "failed"}
    job = svc.client.get(f"{API}/jobs/{j_good['job_id']}", headers=svc.read).json()
    assert job["status"] == "succeeded" and job["result"]["current_version"] == 1
    dep = svc.client.get(f"{API}/deployments/{good['id']}", headers=svc.read).json()
    assert dep["publish_status"] == "ok" and dep["current_config"] == cfg
    ver = svc.client.get(f"{API}/configs/{good['id']}/versions/1", headers=svc.read).json()
    assert ver["published"]["memcached"]["current_version"] == 1
    assert MemcachedPublisher("mc-good", {"servers": [memcached_node.address]}, 1).read_current() == (1, cfg)
    job = svc.client.get(f"{API}/jobs/{j_bad['job_id']}", headers=svc.read).json()
    assert job["status"] == "failed" and "failed after 3 attempts" in job["error"]
    assert job["logs"].count("retrying in") == 2 and job["steps"][0]["status"] == "failed"
    dep = svc.client.get(f"{API}/deployments/{bad['id']}", headers=svc.read).json()
    assert dep["publish_status"] == "failed" and "failed after 3 attempts" in dep["publish_error"]
    assert dep["current_config"] == {"policy": "batching", "params": {}}  # unchanged


# --- forward only across a pool, partial publishes, configs too large ---------------------------------------
def _mc_dep(svc: Svc, name: str, servers: list[str]) -> int:
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment(name, servers), headers=svc.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _publish_now(svc: Svc, dep_id: int, body: dict[str, object], path: str = "versions") -> dict[str, object]:
    r = svc.client.post(f"{API}/configs/{dep_id}/{path}", json=body, headers=svc.write)
    assert r.status_code in (201, 202), r.text
    job_id = r.json()["job_id"]
    w = Worker(svc.settings, svc.db, "w-fwd", handlers=default_handlers(), schedule=False)
    while w.run_once() is not None:
        pass
    return dict(svc.client.get(f"{API}/jobs/{job_id}", headers=svc.read).json())


V1 = {"policy": "chisel", "params": {"merge": 1, "split_keys": 8, "elephant_threshold": 50}}
V2 = {"policy": "chisel", "params": {"merge": 2, "split_keys": 8, "elephant_threshold": 50}}


@pytest.mark.parametrize("restart", ["one", "all"])
def test_republishing_an_older_version_never_regresses(
    svc: Svc, memcached_node: MemcachedNode, restart: str
) -> None:
    other = MemcachedNode()
    other.start()
    try:
        servers = [memcached_node.address, other.address]
        name = f"mc-fwd-{restart}"
        dep = _mc_dep(svc, name, servers)
        assert _publish_now(svc, dep, {"config": V1})["status"] == "succeeded"
        assert _publish_now(svc, dep, {"config": V2})["status"] == "succeeded"
        other.stop()  # memcached restarts empty
        other.start()
        if restart == "all":
            c = Client((memcached_node.host, memcached_node.port))
            c.delete(current_key(name))
            c.close()
        job = _publish_now(svc, dep, {"version": 1}, "publish")
        assert job["status"] == "succeeded", job["error"]
        for node in (memcached_node, other):
            assert _get(node, current_key(name)) == {"deployment": name, "version": 2, "config": V2}
        assert _get(other, version_key(name, 1)) is not None  # the republished version's own key is back
        d = svc.client.get(f"{API}/deployments/{dep}", headers=svc.read).json()
        assert d["current_config"] == V2 and d["publish_status"] == "ok"
        assert "older than the published version 2" in str(job["logs"])
    finally:
        other.close()


def test_a_partial_publish_is_reported_naming_the_servers(svc: Svc, memcached_node: MemcachedNode) -> None:
    other = MemcachedNode()
    other.start()
    try:
        servers = [memcached_node.address, other.address]
        dep = _mc_dep(svc, "mc-partial", servers)
        assert _publish_now(svc, dep, {"config": V1})["status"] == "succeeded"
        other.stop()
        svc.settings.job_max_attempts = 1
        job = _publish_now(svc, dep, {"config": V2})
        assert job["status"] == "failed"
        d = svc.client.get(f"{API}/deployments/{dep}", headers=svc.read).json()
        assert d["publish_status"] == "partial", d
        assert memcached_node.address in d["publish_error"] and other.address in d["publish_error"]
        assert "partial" in str(job["error"]) and other.address in str(job["error"])
        assert d["current_config"] == V1  # the record says what every server serves
    finally:
        other.close()


def test_a_config_too_large_for_memcached_is_not_retried(svc: Svc, memcached_node: MemcachedNode) -> None:
    small = MemcachedNode(item_max="1k")  # this server's item limit is 1 KiB
    small.start()
    try:
        big = {"policy": "chisel", "params": {"merge": 2, "split_keys": 8, "elephant_threshold": 50},
               "target": {"memcached": {"note": "x" * 2000}}}
        dep = _mc_dep(svc, "mc-big", [small.address])
        job = _publish_now(svc, dep, {"config": big})
        assert job["status"] == "failed" and job["attempts"] == 1, job["error"]
        assert "too large" in str(job["error"]) and "retrying" not in str(job["logs"])
        svc.settings.memcached_item_max_bytes = 1500  # known ahead: refused before sending
        dep2 = _mc_dep(svc, "mc-big2", [memcached_node.address])
        job = _publish_now(svc, dep2, {"config": big})
        assert job["status"] == "failed" and job["attempts"] == 1 and "memcached_item_max_bytes" in str(job["error"])
        assert svc.client.get(f"{API}/deployments/{dep2}", headers=svc.read).json()["publish_status"] == "failed"
    finally:
        small.close()
