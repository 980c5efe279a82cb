"""Config from a real HTTP service (ETag polling, bearer token) and from the publisher's memcached key: live
swaps while requests are in flight, a service that goes away, documents that must not be taken."""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymemcache.client.base import Client as PmClient
from ttc_support import ConfigService, Memcached

from tailtune_client.config import ConfigError, current_key, parse_config, signed
from tailtune_client.memcached import Client, server_for

V1 = {"mode": "batching"}
V2 = {"mode": "chisel", "elephant_threshold": 10, "merge": 2, "split_keys": 4}


def _versions(client: Client) -> dict[int | None, dict[str, Any]]:
    return {o["config_version"]: dict(o) for o in client.stats()["latency"]}


def _wait(cond: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_parse_config_reads_every_published_shape() -> None:
    block = dict(V2)
    target = {"json": {"memcached_client": block}}
    stored = {"policy": "chisel", "params": {"split_keys": 4, "merge": 2, "elephant_threshold": 10}, "target": target}
    publisher_doc = json.dumps(
        {"deployment": "web", "deployment_id": 5, "version": 7, "config": stored}, sort_keys=True
    )
    service_doc = {"deployment_id": 3, "version": 8, "config": stored, "source": "tuning"}
    shapes: list[Any] = [
        {"memcached_client": block},
        target,
        stored,
        {"policy": "chisel", "params": {"split_keys": 4, "merge": 2, "elephant_threshold": 10}},
        publisher_doc,
        publisher_doc.encode(),
        service_doc,
    ]
    for shape in shapes:
        cfg = parse_config(shape)
        assert (cfg.mode, cfg.elephant_threshold, cfg.split_keys, cfg.merge) == ("chisel", 10, 4, 2)
    assert (parse_config(publisher_doc).version, parse_config(publisher_doc).deployment) == (7, "web")
    assert parse_config(publisher_doc).deployment_id == 5
    assert (parse_config(service_doc).version, parse_config(service_doc).deployment_id) == (8, 3)
    assert parse_config({"memcached_client": {"mode": "batching", "future_knob": 1}}).params() == {}
    with pytest.raises(ConfigError, match=r"config version 9: memcached_client\.elephant_threshold is missing"):
        parse_config({"version": 9, "config": {"memcached_client": {"mode": "chisel", "merge": 1, "split_keys": 2}}})
    with pytest.raises(ConfigError, match="no memcached_client block"):
        parse_config({"request_scheduler": "rein"})


def test_etag_polling_with_bearer_token(pool: list[Memcached], service: ConfigService) -> None:
    service.publish(1, V2)
    with Client([pool[0].address], config_url=service.config_url, token=service.token, poll_interval=0) as client:
        assert (client.config.version, client.config.mode, client.config.split_keys) == (1, "chisel", 4)
        assert client.refresh_config() is False
        assert client.refresh_config() is False
        assert service.hits["200"] == 1 and service.hits["304"] == 2
        assert service.seen_if_none_match == [None, '"1-1"', '"1-1"']
        service.publish(2, V1)
        assert client.refresh_config() is True
        stats = client.stats()
        assert (stats["config_version"], stats["mode"], stats["last_config_error"]) == (2, "batching", None)
        assert stats["config"]["source"] == service.config_url and stats["config"]["swaps"] == 1
    with pytest.raises(ConfigError, match="HTTP 401"):
        Client([pool[0].address], config_url=service.config_url, token="wrong", poll_interval=0)


def test_new_version_swapped_in_while_requests_are_in_flight(pool: list[Memcached], service: ConfigService) -> None:
    addrs = [n.address for n in pool]
    keys = [f"s:{i}" for i in range(400)]
    service.publish(1, V1)
    with Client(addrs, config_url=service.config_url, token=service.token, poll_interval=0.05) as client:
        client.set_many({k: k.encode() for k in keys})
        stop = threading.Event()
        failures: list[BaseException] = []
        done = [0]

        def work(seed: int) -> None:
            rng = random.Random(seed)
            try:
                while not stop.is_set():
                    want = rng.sample(keys, rng.choice([1, 3, 8, 30, 90]))
                    assert client.get_many(want) == {k: k.encode() for k in want}
                    done[0] += 1
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        _wait(lambda: done[0] >= 40)
        service.publish(2, V2)
        _wait(lambda: client.stats()["config_version"] == 2)
        at_swap = done[0]
        _wait(lambda: done[0] >= at_swap + 40)
        stop.set()
        for t in threads:
            t.join(30)
        stats = client.stats()
    assert not failures, failures[:3]
    assert (stats["config_version"], stats["mode"], stats["config"]["swaps"]) == (2, "chisel", 1)
    by_version = {o["config_version"]: o for o in stats["latency"]}
    assert by_version[1]["mode"] == "batching" and by_version[1]["requests"] > 0
    assert by_version[2]["mode"] == "chisel" and by_version[2]["requests"] > 0
    assert by_version[2]["params"] == {"elephant_threshold": 10, "merge": 2, "split_keys": 4}
    assert by_version[1]["requests"] + by_version[2]["requests"] == done[0]


def test_request_in_flight_finishes_with_the_config_it_started_with(
    pool: list[Memcached], service: ConfigService
) -> None:
    addrs = [n.address for n in pool]
    keys = [f"f:{i}" for i in range(60)]
    touched = len({server_for(k, addrs) for k in keys})
    service.publish(1, V1)
    with Client(addrs, config_url=service.config_url, token=service.token, poll_interval=0, timeout=10,
                request_timeout=15) as client:
        client.set_many({k: b"v" for k in keys})
        result: dict[str, bytes] = {}
        pool[0].pause()
        try:
            t = threading.Thread(target=lambda: result.update(client.get_many(keys)))
            t.start()
            _wait(lambda: client.stats()["servers"][addrs[0]]["busy"] == 1)
            service.publish(2, V2)
            assert client.refresh_config() is True
            assert client.config.mode == "chisel"
        finally:
            pool[0].resume()
        t.join(15)
        assert result == {k: b"v" for k in keys}
        seen = _versions(client)
        # the 60-key request ran as batching (one query per server), although chisel was current when it ended
        assert seen[1]["requests"] == 1 and seen[1]["queries"] == touched
        assert 2 not in seen or seen[2]["requests"] == 0
        client.get_many(keys)
        assert _versions(client)[2]["queries"] > touched  # the next one was split


def test_service_down_keeps_last_good_config_and_says_so(pool: list[Memcached], service: ConfigService) -> None:
    addrs = [n.address for n in pool]
    service.publish(1, V2)
    with Client(addrs, config_url=service.config_url, token=service.token, poll_interval=0) as client:
        service.stop()
        assert client.refresh_config() is False
        stats = client.stats()
        assert (stats["config_version"], stats["mode"]) == (1, "chisel")
        assert stats["config"]["stale"] is True
        assert "ConnectError" in (stats["last_config_error"] or "")
        assert stats["config"]["last_ok_at"] is not None and stats["config"]["last_error_at"] is not None
        client.set_many({"k": b"v"})
        assert client.get_many(["k"]) == {"k": b"v"}
        service.start()
        service.publish(2, V1)
        assert client.refresh_config() is True
        stats = client.stats()
        assert (stats["config_version"], stats["mode"], stats["config"]["stale"]) == (2, "batching", False)
        # a document the client cannot run is not taken: the running version stays, the error names the key
        service.publish(3, {"mode": "chisel", "elephant_threshold": 10, "merge": 2})
        assert client.refresh_config() is False
        stats = client.stats()
        assert stats["config_version"] == 2 and stats["config"]["stale"] is True
        assert "memcached_client.split_keys is missing" in (stats["last_config_error"] or "")
        # a version older than the running one is not taken either
        service.publish(1, V2)
        assert client.refresh_config() is False
        assert "older than the running version 2" in (client.stats()["last_config_error"] or "")
    service.stop()
    with Client(addrs, config={"memcached_client": V1}, config_url=service.config_url, poll_interval=0) as boot:
        stats = boot.stats()
        assert stats["mode"] == "batching" and stats["config"]["stale"] and stats["last_config_error"]
    with pytest.raises(ConfigError, match="pass config= as a bootstrap config"):
        Client(addrs, config_url=service.config_url, poll_interval=0)


KEY = b"client-test-key-0123456789"


def _publish_to_memcached(
    addrs: list[str], deployment: str, version: int, block: dict[str, Any], *, key: bytes | None = KEY,
    deployment_id: int = 3, raw: bytes | None = None,
) -> bytes:
    """What the memcached publisher writes (the canonical document with its MAC under the current key on every
    server), or `raw` instead; returns what was written."""
    stored = {"policy": block["mode"], "params": {k: v for k, v in block.items() if k != "mode"},
              "target": {"json": {"memcached_client": block}}}
    body = {"deployment": deployment, "deployment_id": deployment_id, "version": version, "config": stored}
    doc = raw if raw is not None else (
        signed(body, key) if key is not None else json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    )
    for a in addrs:
        host, _, port = a.rpartition(":")
        c = PmClient((host, int(port)), default_noreply=False)
        try:
            c.set(current_key(deployment), doc)
        finally:
            c.close()
    return doc


def test_config_from_the_publishers_memcached_key(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    _publish_to_memcached(addrs, "web", 4, V1)
    _publish_to_memcached(addrs[:1], "web", 5, V2)  # a publish that has reached one server so far
    with Client(addrs, deployment="web", config_key=KEY, poll_interval=0.05) as client:
        stats = client.stats()
        assert (stats["config_version"], stats["mode"], stats["config"]["deployment"]) == (5, "chisel", "web")
        assert stats["config"]["source"] == "memcached key tailtune:cfg:web:current"
        _publish_to_memcached(addrs, "web", 6, V1)
        _wait(lambda: client.stats()["config_version"] == 6)
        assert client.stats()["mode"] == "batching"
        pool[0].stop()
        pool[1].stop()
        assert client.refresh_config() is False  # one server still answers, with version 6: nothing new
        pool[2].stop()
        assert client.refresh_config() is False
        stats = client.stats()
        assert stats["config_version"] == 6 and stats["config"]["stale"]
        assert "no server answered" in (stats["last_config_error"] or "")


FORGED_BLOCK = {"mode": "chisel", "elephant_threshold": 2, "merge": 1, "split_keys": 2**32}


@pytest.mark.parametrize(
    ("forge", "why"),
    [
        ({"key": None, "version": 2**62, "deployment_id": 999}, "no MAC"),
        ({"key": b"not-the-publishers-key-000"}, "bad MAC"),
        ({"deployment": "shop"}, "names deployment 'shop', not 'web'"),
        ({"deployment_id": 4}, "names deployment id 4, not 3"),
        ({"block": FORGED_BLOCK}, "split_keys must be an integer in [1, 4294967295], got 4294967296"),
        ({"version": 2**62}, "version must be an integer in [0, 2147483647]"),
        ({"raw": b"\xff not json"}, "not JSON"),
    ],
    ids=["unsigned", "other-key", "other-name", "other-id", "split-keys", "version", "not-json"],
)
def test_a_forged_document_on_one_server_is_ignored_and_reported(
    pool: list[Memcached], forge: dict[str, Any], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """memcached has no authentication: any cache client can write the current key on one server. The client
    adopts only the publisher's documents (its MAC with the configured key, this deployment's name and id, values
    in range); the forged one is ignored, logged once, and named in the stats and the report."""
    addrs = [n.address for n in pool[:2]]
    _publish_to_memcached(addrs, "web", 4, V2)
    block = forge.pop("block", V1)
    raw = forge.pop("raw", None)
    args: dict[str, Any] = {"key": KEY, "deployment_id": 3, "version": 5, **forge}
    name = args.pop("deployment", "web")
    if raw is None:
        stored = {"policy": block["mode"], "params": {k: v for k, v in block.items() if k != "mode"},
                  "target": {"json": {"memcached_client": block}}}
        body = {"deployment": name, "deployment_id": args["deployment_id"], "version": args["version"],
                "config": stored}
        raw = signed(body, args["key"]) if args["key"] else json.dumps(body).encode()
    _publish_to_memcached(addrs[1:], "web", 0, V1, raw=raw)
    caplog.set_level("WARNING", logger="tailtune_client.config")
    with Client(addrs, deployment="web", deployment_id=3, config_key=KEY, poll_interval=0) as client:
        client.refresh_config()
        client.refresh_config()
        stats = client.stats()
        assert (stats["config_version"], stats["mode"]) == (4, "chisel")
        assert client.config.split_keys == 4
        forged = stats["config"]["forged"]
        assert forged is not None and forged["count"] == 1 and forged["servers"].keys() == {addrs[1]}
        assert why in forged["servers"][addrs[1]]
        assert client.report()["config"]["forged"] == forged
        logged = [r.getMessage() for r in caplog.records if "ignored a document" in r.getMessage()]
        assert len(logged) == 1 and addrs[1] in logged[0]
        # the publisher's next version, on both servers, is followed
        _publish_to_memcached(addrs, "web", 6, V1)
        assert client.refresh_config() is True
        assert client.stats()["config_version"] == 6 and client.stats()["config"]["forged"] == {
            "count": 1, "servers": {}
        }


def test_a_pool_source_needs_the_config_key(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool[:1]]
    _publish_to_memcached(addrs, "web", 1, V1, key=None)
    with pytest.raises(ConfigError, match="needs config_key="):
        Client(addrs, deployment="web", poll_interval=0)
    with pytest.raises(ConfigError, match="at least 16 bytes"):
        Client(addrs, deployment="web", config_key="short", poll_interval=0)
    with pytest.raises(ConfigError, match=r"no verified document \(ignored: .*no MAC"):
        Client(addrs, deployment="web", config_key=KEY, poll_interval=0)  # unsigned: never adopted


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    key=st.sampled_from(["elephant_threshold", "merge", "split_keys"]),
    value=st.one_of(st.integers(-2, 2**64), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3)),
)
def test_every_chisel_value_is_range_checked(key: str, value: Any) -> None:
    block: dict[str, Any] = {"mode": "chisel", "elephant_threshold": 10, "merge": 2, "split_keys": 4, key: value}
    top = {"elephant_threshold": 1_000_000, "merge": 1024, "split_keys": 2**32 - 1}[key]
    ok = (
        not isinstance(value, bool) and isinstance(value, int | float) and 1 <= value <= top and int(value) == value
    )
    if ok:
        assert getattr(parse_config({"memcached_client": block}), key) == int(value)
    else:
        with pytest.raises(ConfigError, match=f"memcached_client.{key} must be an integer in"):
            parse_config({"memcached_client": block})
