"""tailtune-client against the real project: configs published by the memcached publisher, and the service's
`GET /api/v1/configs/{id}` (ETag) served by uvicorn — picked up live while requests are in flight."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pymemcache.client.base import Client as PmClient
from tailtune_client.config import MemcachedConfigSource, current_key
from tailtune_client.memcached import Client

from control.publishers import Known
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.memcached.publisher import MemcachedPublisher
from tests.app_fixtures import Svc, memcached_deployment
from tests.clients.conftest import KEY, KEY_ENV
from tests.servers.memcached_server import MemcachedNode
from tuner.recommend import render_memcached
from tuner.space import Candidate

API = "/api/v1"
def _stored(policy: str, params: dict[str, int]) -> dict[str, Any]:
    """A config version as the nightly job stores an accepted recommendation (`Recommendation.config()`)."""
    return {"policy": policy, "params": params, "target": render_memcached(Candidate(policy, dict(params)))}


V1 = _stored("batching", {})
V2 = _stored("chisel", {"split_keys": 8, "merge": 2, "elephant_threshold": 20})


def _wait(cond: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def nodes() -> Iterator[list[MemcachedNode]]:
    started = [MemcachedNode() for _ in range(3)]
    try:
        for n in started:
            n.start()
        yield started
    finally:
        for n in started:
            n.close()


def _serve_while_checking(client: Client, publish_v2: Callable[[], object]) -> dict[str, Any]:
    keys = [f"live:{i}" for i in range(300)]
    client.set_many({k: k.encode() for k in keys})
    stop = threading.Event()
    failures: list[BaseException] = []
    done = [0]

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                want = rng.sample(keys, rng.choice([1, 4, 12, 60]))
                assert client.get_many(want) == {k: k.encode() for k in want}
                done[0] += 1
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    try:
        _wait(lambda: done[0] >= 30)
        publish_v2()
        _wait(lambda: client.stats()["config_version"] == 2)
        mark = done[0]
        _wait(lambda: done[0] >= mark + 30)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not failures, failures[:3]
    return dict(client.stats())


def test_publisher_v2_picked_up_live(nodes: list[MemcachedNode], config_key: str) -> None:
    servers = [n.address for n in nodes]
    pub = MemcachedPublisher("client-live", {"servers": servers}, 2.0, config_key_env=KEY_ENV)
    known = Known(11, {1: V1, 2: V2}, frozenset({11}))
    pub.publish(1, V1, known=known)
    with Client(servers, deployment="client-live", config_key=config_key, poll_interval=0.05) as client:
        assert (client.config.version, client.config.mode) == (1, "batching")
        assert (client.config.deployment, client.config.deployment_id) == ("client-live", 11)
        stats = _serve_while_checking(client, lambda: pub.publish(2, V2, known=known))
    assert (stats["config_version"], stats["mode"], stats["last_config_error"]) == (2, "chisel", None)
    assert stats["config"]["params"] == {"elephant_threshold": 20, "merge": 2, "split_keys": 8}
    by_version = {o["config_version"]: o for o in stats["latency"]}
    assert by_version[1]["requests"] > 0 and by_version[2]["requests"] > 0


def test_service_config_endpoint_polled_with_etag(svc: Svc, served: str, nodes: list[MemcachedNode]) -> None:
    servers = [n.address for n in nodes]
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment("client-http", servers), headers=svc.write)
    assert r.status_code == 201, r.text
    dep_id = r.json()["id"]

    def add(config: dict[str, Any]) -> None:
        r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": config, "publish": False},
                            headers=svc.write)
        assert r.status_code == 201, r.text

    add(V1)
    token = svc.read["Authorization"].removeprefix("Bearer ")
    url = f"{served}{API}/configs/{dep_id}"
    with Client(servers, config_url=url, token=token, poll_interval=0.05) as client:
        assert (client.config.version, client.config.mode, client.config.deployment_id) == (1, "batching", dep_id)
        assert client.refresh_config() is False  # 304: the ETag matched
        stats = _serve_while_checking(client, lambda: add(V2))
        # a manual config without a rendered target is read as {"mode": policy, **params}
        add({"policy": "chisel", "params": {"split_keys": 5, "merge": 1, "elephant_threshold": 30}})
        _wait(lambda: client.stats()["config_version"] == 3)
        assert client.config.split_keys == 5
    assert (stats["config_version"], stats["mode"], stats["last_config_error"]) == (2, "chisel", None)
    with pytest.raises(Exception, match="HTTP 401"):
        Client(servers, config_url=url, token="tt_wrong", poll_interval=0)


def test_memcached_source_reads_what_the_publish_job_wrote_for_a_recreated_deployment(
    svc: Svc, nodes: list[MemcachedNode], config_key: str
) -> None:
    """The publish job's document (which carries the deployment id) is what the client reads; after a deployment
    is deleted and one of the same name is created, the client gets the new one's v1, not the deleted one's v2."""
    servers = [n.address for n in nodes]

    def deploy_and_publish(*configs: dict[str, Any]) -> int:
        r = svc.client.post(f"{API}/deployments", json=memcached_deployment("client-reused", servers),
                            headers=svc.write)
        assert r.status_code == 201, r.text
        dep_id = int(r.json()["id"])
        for config in configs:
            r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": config}, headers=svc.write)
            assert r.status_code == 201, r.text
            w = Worker(svc.settings, svc.db, "w-client", handlers=default_handlers(), schedule=False)
            while w.run_once() is not None:
                pass
            dep = svc.client.get(f"{API}/deployments/{dep_id}", headers=svc.read).json()
            assert dep["publish_status"] == "ok", dep["publish_error"]
        return dep_id

    svc.settings.memcached_config_key_env = KEY_ENV
    source = MemcachedConfigSource("client-reused", [(n.host, n.port) for n in nodes], 2.0, key=config_key)
    try:
        old = deploy_and_publish(V1, V2)
        cfg = source.fetch()
        assert cfg is not None and (cfg.version, cfg.mode, cfg.deployment_id) == (2, "chisel", old)
        assert svc.client.delete(f"{API}/deployments/{old}", headers=svc.write).status_code == 204
        new = deploy_and_publish(V1)
        cfg = source.fetch()
        assert cfg is not None and (cfg.version, cfg.mode, cfg.deployment_id) == (1, "batching", new)
        assert cfg.deployment == "client-reused" and new != old
    finally:
        source.close()


def test_a_forged_current_document_is_ignored_by_clients_and_replaced_by_the_next_publish(
    svc: Svc, nodes: list[MemcachedNode], config_key: str
) -> None:
    """A hand-written `current` document on one server of two (version 2^62, a foreign deployment id, split_keys
    4294967295): clients reading the pool ignore it and report it; the next publish replaces it (recorded, never
    a conflict), and the clients follow that version."""
    svc.settings.memcached_config_key_env = KEY_ENV
    svc.settings.job_max_attempts = 1
    pool = nodes[:2]
    servers = [n.address for n in pool]
    r = svc.client.post(f"{API}/deployments", json=memcached_deployment("client-forged", servers), headers=svc.write)
    assert r.status_code == 201, r.text
    dep_id = int(r.json()["id"])
    w = Worker(svc.settings, svc.db, "w-forged", handlers=default_handlers(), schedule=False)

    def publish(config: dict[str, Any]) -> dict[str, Any]:
        r = svc.client.post(f"{API}/configs/{dep_id}/versions", json={"config": config}, headers=svc.write)
        assert r.status_code == 201, r.text
        while w.run_once() is not None:
            pass
        return dict(svc.client.get(f"{API}/deployments/{dep_id}", headers=svc.read).json())

    assert publish(V1)["publish_status"] == "ok"
    forged = _stored("chisel", {"split_keys": 4294967295, "merge": 1, "elephant_threshold": 2})
    doc = {"deployment": "client-forged", "deployment_id": 987654, "version": 2**62, "config": forged}
    c = PmClient((pool[1].host, pool[1].port), default_noreply=False)
    try:
        c.set(current_key("client-forged"), json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
    finally:
        c.close()
    clients = [
        Client(servers, deployment="client-forged", config_key=config_key, poll_interval=0) for _ in range(2)
    ]
    try:
        for client in clients:
            stats = client.stats()
            assert (stats["config_version"], stats["mode"]) == (1, "batching")
            got = stats["config"]["forged"]
            assert got is not None and got["count"] == 1 and list(got["servers"]) == [servers[1]]
            assert "no MAC" in got["servers"][servers[1]]
        dep = publish(V2)
        assert (dep["publish_status"], dep["publish_error"]) == ("ok", None)
        assert dep["current_config"] == V2
        ver = svc.client.get(f"{API}/configs/{dep_id}/versions/2", headers=svc.read).json()
        replaced = ver["published"]["memcached"]["replaced_forged"]
        assert list(replaced) == [servers[1]] and str(2**62) in replaced[servers[1]]
        for client in clients:
            assert client.refresh_config() is True
            assert (client.config.version, client.config.mode, client.config.split_keys) == (2, "chisel", 8)
            assert client.stats()["config"]["forged"] == {"count": 1, "servers": {}}
        assert KEY not in json.dumps(ver) and KEY not in json.dumps(dep)
    finally:
        for client in clients:
            client.close()
