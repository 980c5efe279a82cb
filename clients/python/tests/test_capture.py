"""The request capture against three real memcached servers: what a request is recorded as (before Chisel reshapes
it), the sample, the keyed hashes and their placement, and the memory and bandwidth caps (counted, never hidden)."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest
from ttc_support import Memcached, free_port, mc_stats

from tailtune_client.capture import CAPTURE_SCHEMA, RequestCapture, hashed_key
from tailtune_client.memcached import Client, server_for

CHISEL = {"memcached_client": {"mode": "chisel", "elephant_threshold": 8, "split_keys": 3, "merge": 4}}
BATCHING = {"memcached_client": {"mode": "batching"}}


def _body(capture: RequestCapture) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    body, n = capture.take()
    lines = [json.loads(x) for x in body.splitlines()]
    assert len(lines) == n + 1 and lines[0]["records"] == n
    return lines[0], lines[1:]


def test_a_request_is_recorded_as_the_application_made_it_before_chisel_splits_it(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    keys = [f"cap:{i}" for i in range(30)]
    capture = RequestCapture(rate=1.0, upload_bytes_per_s=1e9)
    with Client(addrs, config={"version": 4, "config": CHISEL}, poll_interval=0, capture=capture) as client:
        client.set_many({k: b"x" * (i + 1) for i, k in enumerate(keys[:20])})
        before = {a: mc_stats(a)["cmd_get"] for a in addrs}
        queries = sum(s["queries"] for s in client.stats()["servers"].values())
        got = client.get_many(keys)
        after = {a: mc_stats(a)["cmd_get"] for a in addrs}
        queries = sum(s["queries"] for s in client.stats()["servers"].values()) - queries
    assert len(got) == 20 and sum(after[a] - before[a] for a in addrs) == 30
    assert queries >= 4  # memcached saw the chunks of at most 3 keys per server...
    header, records = _body(capture)
    assert header["schema"] == CAPTURE_SCHEMA and header["servers"] == addrs and header["key_form"] == "plain"
    assert header["dropped"] == {"memory": 0, "bandwidth": 0, "unkeyed": 0} and header["sample_rate"] == 1.0
    sets, gets = records
    assert sets["op"] == "set" and len(sets["keys"]) == 20
    # ...the capture the one request of 30 keys the application made
    assert (gets["op"], gets["keys"], gets["config_version"], gets["failed"]) == ("get", keys, 4, False)
    assert gets["sizes"] == [i + 1 for i in range(20)] + [None] * 10
    assert gets["servers"] == [addrs.index(server_for(k, addrs)) for k in keys]
    assert gets["latency_us"] > 0 and abs(gets["ts"] - time.time()) < 60


def test_the_sample_is_decided_once_per_request(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    capture = RequestCapture(rate=0.3, seed=7, upload_bytes_per_s=1e9)
    with Client(addrs, config=BATCHING, poll_interval=0, capture=capture) as client:
        for i in range(200):
            client.get_many([f"s:{i}", f"s:{i + 1}", f"s:{i + 2}"])
    draws = random.Random(7)
    expected = [i for i in range(200) if draws.random() < 0.3]
    _, records = _body(capture)
    assert [int(r["keys"][0].split(":")[1]) for r in records] == expected  # whole requests, in their order
    st = capture.stats()
    assert (st["seen"], st["sampled"], st["recorded"]) == (200, len(expected), len(expected))


def test_keyed_hashes_keep_each_key_on_its_server(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    secret = b"0123456789abcdef-secret"
    capture = RequestCapture(rate=1.0, key_secret=secret, upload_bytes_per_s=1e9)
    keys = [f"user:{i}:profile" for i in range(60)]
    with Client(addrs, config=BATCHING, poll_interval=0, capture=capture) as client:
        client.get_many(keys)
        client.get_many(keys[:5])
    body, _ = capture.take()
    assert b"user:" not in body  # no key leaves the application in clear
    header, *records = [json.loads(x) for x in body.splitlines()]
    assert header["key_form"] == "hmac-sha256"
    names = records[0]["keys"]
    assert len(set(names)) == 60 and records[1]["keys"] == names[:5]  # the same key, the same name
    assert [server_for(n, addrs) for n in names] == [server_for(k, addrs) for k in keys]
    assert names == [hashed_key(secret, k, tuple(addrs)) for k in keys]
    assert hashed_key(b"another-secret-of-16", keys[0], tuple(addrs)) != names[0]
    with pytest.raises(ValueError, match="at least 16 bytes"):
        RequestCapture(rate=1.0, key_secret=b"short")


def test_the_memory_cap_drops_and_counts(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    capture = RequestCapture(rate=1.0, max_bytes=2048, upload_bytes_per_s=1e9)
    with Client(addrs, config=BATCHING, poll_interval=0, capture=capture) as client:
        for i in range(100):
            client.get_many([f"m:{i}:{j}" for j in range(5)])
    st = capture.stats()
    assert st["held_bytes"] <= 2048 and st["recorded"] + st["dropped"]["memory"] == 100
    assert st["dropped"]["memory"] > 0
    header, records = _body(capture)
    assert header["dropped"]["memory"] == st["dropped"]["memory"] and len(records) == st["recorded"]
    # reported once: the next upload's header counts only what was dropped since
    assert _body(capture)[0]["dropped"] == {"memory": 0, "bandwidth": 0, "unkeyed": 0}


def test_the_bandwidth_cap_drops_and_counts(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    capture = RequestCapture(rate=1.0, upload_bytes_per_s=1.0)  # about nothing since the capture started
    with Client(addrs, config=BATCHING, poll_interval=0, capture=capture) as client:
        for i in range(20):
            client.get_many([f"b:{i}"])
    header, records = _body(capture)
    assert records == [] and header["dropped"]["bandwidth"] == 20 and header["records"] == 0
    assert capture.stats()["dropped"]["bandwidth"] == 20 and capture.stats()["held"] == 0


def test_a_failed_upload_keeps_the_records_for_the_next() -> None:
    capture = RequestCapture(rate=1.0, upload_bytes_per_s=1e9, deployment_id=3)
    for i in range(5):
        capture.record(ts=1.0 + i, op="get", keys=[f"k{i}"], sizes=[1], latency_us=10.0, config_version=None)
    url = f"http://127.0.0.1:{free_port()}/api/v1/traces"  # nothing listens there
    assert capture.upload(url, "tok") is False
    st = capture.stats()
    assert st["held"] == 5 and st["uploads"] == 0 and "ConnectError" in (st["last_error"] or "")
    assert "tok" not in (st["last_error"] or "")
    _, records = _body(capture)
    assert [r["keys"] for r in records] == [[f"k{i}"] for i in range(5)]


def test_options_are_checked() -> None:
    for kwargs, what in (({"rate": 0.0}, "rate"), ({"rate": 1.5}, "rate"), ({"rate": 1, "max_bytes": 10}, "max_bytes"),
                         ({"rate": 1, "upload_bytes_per_s": 0}, "upload_bytes_per_s")):
        with pytest.raises(ValueError, match=what):
            RequestCapture(**kwargs)
