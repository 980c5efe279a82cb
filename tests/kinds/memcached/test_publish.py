"""Publishing to a real memcached: immutable version keys, CAS-guarded current key, retries, failures
reported.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Mapping

import pytest
from pymemcache.client.base import Client

from control.publishers import Known, PublishFailed, publish_with_retry
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.memcached.publisher import MemcachedPublisher, current_key, version_key
from tests.app_fixtures import Svc, memcached_deployment
from tests.servers.memcached_server import MemcachedNode

API = "/api/v1"


def _get(node: MemcachedNode, key: str) -> dict[str, object] | None:
    c = Client((node.host, node.port))
    try:
        raw = c.get(key)
    finally:
        c.close()
    return None if raw is None else json.loads(raw)


def _known(deployment_id: int, versions: Mapping[int, Mapping[str, object]], *live: int) -> Known:
    """What the metadata DB knows of a deployment (for publishers used without the service)."""
    return Known(deployment_id, versions, frozenset({deployment_id, *live}))


def test_versions_only_move_forward(memcached_node: MemcachedNode) -> None:
    pub = MemcachedPublisher("mc-forward", {"servers": [memcached_node.address]}, 1.0)
    c1, c2 = {"policy": "batching", "params": {"batch": 2}}, {"policy": "chisel", "params": {"thr_l": 4096}}
    known = _known(5, {1: c1, 2: c2})
    assert pub.read_current() is None
    o1 = pub.publish(1, c1, known=known)
    assert (o1.advanced, o1.current_version) == (True, 1)
    o2 = pub.publish(2, c2, known=known)
    assert (o2.advanced, o2.current_version) == (True, 2)
    again = pub.publish(1, c1, known=known)  # an old publisher wakes up late
    assert (again.advanced, again.current_version) == (False, 2)
    assert pub.publish(2, c2, known=known).advanced is False  # idempotent
    assert pub.read_current() == (2, c2)
    assert _get(memcached_node, current_key("mc-forward")) == {
        "deployment": "mc-forward",
        "deployment_id": 5,
        "version": 2,
        "config": c2,
    }
    assert _get(memcached_node, version_key("mc-forward", 1)) == {
        "deployment": "mc-forward",
        "deployment_id": 5,
        "version": 1,
        "config": c1,
    }
    # a version key the DB did not make (the DB is the source of truth): replaced, and said so
    out = pub.publish(1, {"policy": "other"}, known=_known(5, {1: {"policy": "other"}, 2: c2}))
    assert out.applied is not None and "v1 holds version 1 with a config tailtune did not make" in (
        out.applied["replaced_forged"][memcached_node.address]
    )
    assert _get(memcached_node, version_key("mc-forward", 1))["config"] == {"policy": "other"}  # type: ignore[index]
    with pytest.raises(ValueError, match="no version 3"):
        pub.publish(3, c2, known=known)  # only versions the DB made are published
    with pytest.raises(ValueError, match="no version 9"):
        pub.publish(1, c1, head=(9, c2), known=known)  # nor become current through `head`


def test_concurrent_publishers_cannot_regress(memcached_node: MemcachedNode) -> None:
    conn = {"servers": [memcached_node.address]}
    barrier = threading.Barrier(8)

    known = _known(1, {v: {"policy": "batching", "params": {"batch": v}} for v in range(1, 41)})

    def publish(versions: list[int]) -> None:
        pub = MemcachedPublisher("mc-race", conn, 2.0)
        barrier.wait()
        for v in versions:
            pub.publish(v, {"policy": "batching", "params": {"batch": v}}, known=known)

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
        known = _known(2, {1: {"policy": "batching", "params": {}}, 2: {"policy": "chisel", "params": {}},
                           3: {"policy": "x"}})
        pub.publish(1, {"policy": "batching", "params": {}}, known=known)
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
            known=known,
        )
        assert (out.version, out.advanced) == (2, True)
        assert "attempt 1/4 failed" in logs[0] and "retrying in 0.05s" in logs[0]
        assert "version 2 published (attempt 2" in logs[-1]
        # memcached restarted empty: the publish wrote both keys again, whole
        assert _get(node, current_key("mc-retry")) == {
            "deployment": "mc-retry",
            "deployment_id": 2,
            "version": 2,
            "config": {"policy": "chisel", "params": {}},
        }
        node.stop()
        with pytest.raises(PublishFailed, match="after 3 attempts"):
            publish_with_retry(pub, 3, {"policy": "x"}, attempts=3, backoff_s=0.0, known=known)
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
            assert _get(node, current_key(name)) == {
                "deployment": name, "deployment_id": dep, "version": 2, "config": V2
            }
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


# --- the metadata DB is the source of truth: same-name deployments, documents tailtune never made ------------
def _raw(node: MemcachedNode, key: str) -> bytes | None:
    c = Client((node.host, node.port))
    try:
        raw = c.get(key)
    finally:
        c.close()
    return None if raw is None else bytes(raw)


def _put(node: MemcachedNode, key: str, value: bytes) -> None:
    c = Client((node.host, node.port))
    try:
        c.set(key, value, noreply=False)
    finally:
        c.close()


V3 = {"policy": "chisel", "params": {"merge": 3, "split_keys": 8, "elephant_threshold": 50}}


@pytest.mark.db_backends
@pytest.mark.parametrize("new_v1", ["same-config", "other-config"])
def test_a_recreated_deployment_never_serves_the_deleted_ones_versions(
    svc: Svc, memcached_node: MemcachedNode, new_v1: str, db_backend: str
) -> None:
    """Publish v1-v3, delete the deployment, create one with the same name, publish: both servers hold the new
    deployment's v1 and nothing of the deleted one's."""
    other = MemcachedNode()
    other.start()
    try:
        nodes = (memcached_node, other)
        name = f"mc-reused-{db_backend}-{new_v1}"  # memcached_node serves the whole session
        old = _mc_dep(svc, name, [n.address for n in nodes])
        for cfg in (V1, V2, V3):
            job = _publish_now(svc, old, {"config": cfg})
            assert job["status"] == "succeeded", job["error"]
        assert all(_get(n, current_key(name))["version"] == 3 for n in nodes)  # type: ignore[index]
        assert svc.client.delete(f"{API}/deployments/{old}", headers=svc.write).status_code == 204
        new = _mc_dep(svc, name, [n.address for n in nodes])
        assert new != old  # ids are never reused
        cfg = V1 if new_v1 == "same-config" else {"policy": "chisel", "params": {"merge": 7, "split_keys": 8,
                                                                               "elephant_threshold": 50}}
        job = _publish_now(svc, new, {"config": cfg})
        d = svc.client.get(f"{API}/deployments/{new}", headers=svc.read).json()
        assert (job["status"], d["publish_status"]) == ("succeeded", "ok"), (job["error"], d["publish_error"])
        raw = job["result"]
        assert isinstance(raw, dict)
        result = dict(raw)
        assert isinstance(result.pop("verify_job_id"), int) and result.pop("next_check_at") > 0  # its check, queued
        assert result == {"target": "memcached", "version": 1, "advanced": True, "current_version": 1}
        want = {"deployment": name, "deployment_id": new, "version": 1, "config": cfg}
        for n in nodes:
            assert _get(n, current_key(name)) == want, n.address
            assert _get(n, version_key(name, 1)) == want
            for v in (2, 3):  # the deleted deployment's version keys went with it
                assert _raw(n, version_key(name, v)) is None
            assert b'"merge":3' not in (_raw(n, current_key(name)) or b"")
        assert d["current_config"] == cfg
    finally:
        other.close()


@pytest.mark.parametrize("forged", ["copied", "bare"])
def test_a_version_tailtune_never_made_is_replaced_never_copied(
    svc: Svc, memcached_node: MemcachedNode, forged: str
) -> None:
    """A `current` document with version 999 written to one server by someone else (any cache client can): the
    next publish replaces it, records and logs what it replaced, and no server ever gets 999."""
    other = MemcachedNode()
    other.start()
    try:
        name = f"mc-forged-{forged}"
        dep = _mc_dep(svc, name, [memcached_node.address, other.address])
        assert _publish_now(svc, dep, {"config": V1})["status"] == "succeeded"
        held = _get(other, current_key(name))
        assert held is not None
        if forged == "copied":  # what tailtune wrote, version bumped (the deployment id, if any, kept)
            doc = {**held, "version": 999, "config": V3}
        else:
            doc = {"deployment": name, "version": 999, "config": V3}
        bad = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        _put(other, current_key(name), bad)
        svc.settings.job_max_attempts = 1
        job = _publish_now(svc, dep, {"config": V2})
        assert job["status"] == "succeeded", job["error"]
        assert f"memcached {other.address}: replaced content tailtune never made" in str(job["logs"])
        d = svc.client.get(f"{API}/deployments/{dep}", headers=svc.read).json()
        assert (d["publish_status"], d["current_config"]) == ("ok", V2)
        for n in (memcached_node, other):
            got = _get(n, current_key(name))
            assert got is not None and (got["version"], got["config"]) == (2, V2)  # ours, never 999
        ver = svc.client.get(f"{API}/configs/{dep}/versions/2", headers=svc.read).json()
        replaced = ver["published"]["memcached"]["replaced_forged"]
        assert list(replaced) == [other.address] and "holds version 999" in replaced[other.address]
    finally:
        other.close()


def _doc(name: str, version: int, config: Mapping[str, object], deployment_id: int | None) -> bytes:
    doc: dict[str, object] = {"deployment": name, "version": version, "config": config}
    if deployment_id is not None:
        doc["deployment_id"] = deployment_id
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    ("held", "why"),
    [
        (_doc("mc-judge", 1, V1, 3), "holds version 1 of deployment id 3, not deployment 'mc-judge' (id 7)"),
        (_doc("mc-judge", 1, V1, 9), "of deployment id 9"),  # newer than ours: not a deleted same-name one
        (_doc("other-name", 1, V1, 4), "of deployment id 4"),  # a deleted deployment, but not of this name
        (_doc("mc-judge", 2, V2, 7), "holds version 2 which tailtune never made for"),
        (_doc("mc-judge", 1, V2, 7), "holds version 1 with a config tailtune did not make for"),
        (_doc("mc-judge", 1, V2, None), "holds version 1 without a deployment id"),
        (b"not json", "not a JSON document"),
        (b'{"version": "1"}', "without an integer version"),
    ],
    ids=["live-id", "newer-id", "other-name", "unmade-version", "other-config", "no-id", "not-json", "no-version"],
)
def test_content_the_db_never_made_is_replaced_on_that_server_and_reported(
    memcached_node: MemcachedNode, held: bytes, why: str
) -> None:
    other = MemcachedNode()
    other.start()
    try:
        name = f"mc-judge-{zlib.crc32(held)}"  # memcached_node serves the whole session
        held = held.replace(b'"mc-judge"', json.dumps(name).encode())
        why = why.replace("'mc-judge'", repr(name))
        _put(other, current_key(name), held)
        pub = MemcachedPublisher(name, {"servers": [memcached_node.address, other.address]}, 1.0)
        known = _known(7, {1: V1}, 3)  # deployment 3 is live (another name): its id here is no leftover
        out = pub.publish(1, V1, known=known)
        assert out.applied is not None and out.applied["replaced_forged"].keys() == {other.address}
        assert why in out.applied["replaced_forged"][other.address]
        for n in (memcached_node, other):
            assert _raw(n, current_key(name)) == _doc(name, 1, V1, 7)
            assert _raw(n, version_key(name, 1)) == _doc(name, 1, V1, 7)
    finally:
        other.close()


def test_keys_of_a_deleted_deployment_are_replaced_and_ours_without_the_id_adopted(
    memcached_node: MemcachedNode,
) -> None:
    name, servers = "mc-takeover", {"servers": [memcached_node.address]}
    # a deleted deployment (id 4) of the same name published v1..v5; v4 is someone else's key now
    for v in (1, 2, 3, 5):
        _put(memcached_node, version_key(name, v), _doc(name, v, V3, 4))
    _put(memcached_node, version_key(name, 4), b"kept")
    _put(memcached_node, current_key(name), _doc(name, 5, V3, 4))
    pub = MemcachedPublisher(name, servers, 1.0, stale_versions_max=3)  # looks at v1..v3 only
    out = pub.publish(2, V2, known=_known(6, {1: V1, 2: V2}))
    assert (out.current_version, out.advanced) == (2, True)
    assert _raw(memcached_node, current_key(name)) == _doc(name, 2, V2, 6)
    assert _raw(memcached_node, version_key(name, 2)) == _doc(name, 2, V2, 6)
    assert [_raw(memcached_node, version_key(name, v)) for v in (1, 3, 4, 5)] == [
        None, None, b"kept", _doc(name, 5, V3, 4)  # v5 is past stale_versions_max
    ]
    # ours, written before documents carried the id: taken as ours, rewritten with the id
    legacy = "mc-legacy"
    _put(memcached_node, current_key(legacy), _doc(legacy, 2, V2, None))
    _put(memcached_node, version_key(legacy, 1), _doc(legacy, 1, V1, None))
    pub = MemcachedPublisher(legacy, servers, 1.0)
    out = pub.publish(1, V1, known=_known(8, {1: V1, 2: V2}))
    assert (out.current_version, out.advanced) == (2, False)
    assert _raw(memcached_node, current_key(legacy)) == _doc(legacy, 2, V2, 8)
    assert _raw(memcached_node, version_key(legacy, 1)) == _doc(legacy, 1, V1, 8)


def test_documents_carry_the_mac_of_the_config_key(
    memcached_node: MemcachedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TAILTUNE_MEMCACHED_CONFIG_KEY_ENV naming a variable, every document carries the MAC a pool client
    verifies; ours written before (no MAC) is rewritten with it; a missing or short key refuses the publish,
    naming the variable and never its value."""
    from tailtune_client.config import MemcachedConfigSource, signed

    from control.publishers import PublishRejected

    name, servers = "mc-mac", {"servers": [memcached_node.address]}
    known = _known(12, {1: V1, 2: V2})
    MemcachedPublisher(name, servers, 1.0).publish(1, V1, known=known)  # no key yet: no MAC
    pub = MemcachedPublisher(name, servers, 1.0, config_key_env="TT_MAC_KEY")
    for value, why in (("", "is not set"), ("short-key-value", "is shorter than 16 bytes")):
        monkeypatch.setenv("TT_MAC_KEY", value)
        with pytest.raises(PublishRejected, match=f"TT_MAC_KEY .*{why}") as err:
            pub.publish(2, V2, known=known)
        assert not value or value not in str(err.value)
    key = "0123456789abcdef-the-real-one"
    monkeypatch.setenv("TT_MAC_KEY", key)
    out = pub.publish(2, V2, known=known)
    assert (out.current_version, out.applied) == (2, None)
    assert _raw(memcached_node, current_key(name)) == signed(json.loads(_doc(name, 2, V2, 12)), key.encode())
    assert pub.publish(1, V1, known=known).current_version == 2  # v1's key rewritten with the MAC
    assert _raw(memcached_node, version_key(name, 1)) == signed(json.loads(_doc(name, 1, V1, 12)), key.encode())
    source = MemcachedConfigSource(name, [(memcached_node.host, memcached_node.port)], 1.0, key=key)
    cfg = source.fetch()
    assert cfg is not None and (cfg.version, cfg.deployment_id) == (2, 12) and source.forged["count"] == 0
