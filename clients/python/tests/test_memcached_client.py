"""The client against three real memcached servers: round trip, batching, chisel split and merge, failures."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest
from ttc_support import Memcached, mc_stats

from tailtune_client.config import ConfigError
from tailtune_client.memcached import Client, ClientClosed, ServerError, server_for

BATCHING = {"memcached_client": {"mode": "batching"}}


def chisel(threshold: int, split: int, merge: int) -> dict[str, Any]:
    block = {"mode": "chisel", "elephant_threshold": threshold, "split_keys": split, "merge": merge}
    return {"memcached_client": block}


def _by_server(keys: list[str], addrs: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {a: [] for a in addrs}
    for k in keys:
        out[server_for(k, addrs)].append(k)
    return out


def _queries_seen(before: dict[str, int], after: dict[str, int], keys: list[str]) -> int:
    """Multigets a server read, from its byte count: each is `get` + ` key`... + CRLF; the second `stats\\r\\n`
    (7 bytes) is in the difference too."""
    payload = after["bytes_read"] - before["bytes_read"] - 7 - sum(len(k) + 1 for k in keys)
    assert payload % 5 == 0, payload
    return payload // 5


def _latest(client: Client, version: int | None = None) -> dict[str, Any]:
    obs = [o for o in client.stats()["latency"] if version is None or o["config_version"] == version]
    assert len(obs) == 1, obs
    return dict(obs[0])


def test_round_trip_across_three_servers(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    values = {f"rt:{i}": (b"v%d-" % i) * (i % 50) for i in range(400)}
    values["rt:big"] = b"x" * 200_000
    with Client(addrs, config=BATCHING, poll_interval=0) as client:
        assert client.set_many(values) == []
        got = client.get_many([*values, "rt:absent", "rt:0"])
        assert got == values
        stats = client.stats()
    placed = _by_server(list(values), addrs)
    assert all(placed.values()), "every server holds some keys"
    for a in addrs:
        assert stats["servers"][a]["hits"] == len(placed[a])
        assert stats["servers"][a]["errors"] == 0
    assert stats["mode"] == "batching" and stats["config_version"] is None


def test_batching_sends_one_multiget_per_server_touched(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    keys = [f"b:{i}" for i in range(90)]
    with Client(addrs, config=BATCHING, poll_interval=0) as client:
        client.set_many({k: b"1" for k in keys})
        before = {a: mc_stats(a) for a in addrs}
        assert len(client.get_many(keys)) == 90
        after = {a: mc_stats(a) for a in addrs}
        obs = _latest(client)
    placed = _by_server(keys, addrs)
    for a in addrs:
        assert after[a]["cmd_get"] - before[a]["cmd_get"] == len(placed[a])
        assert _queries_seen(before[a], after[a], placed[a]) == 1
    assert obs["queries"] == 3 and obs["requests"] == 1 and obs["classes"]["51+"]["count"] == 1


def test_chisel_splits_elephants_per_server_on_separate_connections(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    keys = [f"e:{i}" for i in range(60)]
    placed = _by_server(keys, addrs)
    with Client(addrs, config=BATCHING, poll_interval=0) as loader:
        loader.set_many({k: k.encode() for k in keys})
    before = {a: mc_stats(a) for a in addrs}
    with Client(addrs, config=chisel(threshold=10, split=4, merge=1), poll_interval=0,
                connections_per_server=8) as client:
        got = client.get_many(keys)
        after = {a: mc_stats(a) for a in addrs}
        obs = _latest(client)
        mouse_keys = keys[:10]  # 10 keys: not above the threshold → one query per server touched
        before_mouse = {a: mc_stats(a) for a in addrs}
        assert client.get_many(mouse_keys) == {k: k.encode() for k in mouse_keys}
        after_mouse = {a: mc_stats(a) for a in addrs}
    assert got == {k: k.encode() for k in keys}
    chunks = {a: math.ceil(len(placed[a]) / 4) for a in addrs}
    assert obs["queries"] == sum(chunks.values())
    for a in addrs:
        assert after[a]["cmd_get"] - before[a]["cmd_get"] == len(placed[a])
        assert _queries_seen(before[a], after[a], placed[a]) == chunks[a]
        # a new client opened one connection per chunk: each chunk went out on its own connection
        assert after[a]["total_connections"] - before[a]["total_connections"] == chunks[a] + 1  # +1: mc_stats
    mouse_placed = _by_server(mouse_keys, addrs)
    for a in addrs:
        want = 1 if mouse_placed[a] else 0
        assert _queries_seen(before_mouse[a], after_mouse[a], mouse_placed[a]) == want


def test_chisel_merges_mice_that_queue_behind_each_other(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    home = addrs[0]
    mice = [k for k in (f"m:{i}" for i in range(200)) if server_for(k, addrs) == home][:4]
    with Client(addrs, config=BATCHING, poll_interval=0) as loader:
        loader.set_many({k: k.encode() for k in mice})
    results: dict[str, dict[str, bytes]] = {}
    with Client(addrs, config=chisel(threshold=50, split=10, merge=4), poll_interval=0, timeout=10,
                request_timeout=15) as client:
        before = mc_stats(home)
        pool[0].pause()
        try:
            threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, client.get_many([k]))) for k in mice]
            threads[0].start()
            deadline = time.monotonic() + 10
            # the first mouse's query is on the wire (its thread is busy, nothing queued) ...
            while client.stats()["servers"][home]["busy"] == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert client.stats()["servers"][home]["queued"] == 0
            for t in threads[1:]:
                t.start()
            # ... and the three others of its merge group queue behind it
            while client.stats()["servers"][home]["queued"] < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert client.stats()["servers"][home]["queued"] == 3
        finally:
            pool[0].resume()
        for t in threads:
            t.join(10)
        after = mc_stats(home)
        server = client.stats()["servers"][home]
        obs = _latest(client)
    assert results == {k: {k: k.encode()} for k in mice}
    assert server["queries"] == 2 and server["merged"] == 2  # the head alone, then three mice in one query
    assert obs["queries"] == 2 and obs["merged_queries"] == 1 and obs["requests"] == 4
    assert _queries_seen(before, after, mice) == 2


def test_concurrent_mixed_requests_are_all_answered_right(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    keys = [f"c:{i}" for i in range(500)]
    with Client(addrs, config=chisel(threshold=20, split=8, merge=3), poll_interval=0) as client:
        client.set_many({k: k.encode() * 3 for k in keys})
        errors: list[BaseException] = []

        def work(seed: int) -> None:
            import random

            rng = random.Random(seed)
            try:
                for _ in range(40):
                    want = rng.sample(keys, rng.choice([1, 2, 5, 15, 40, 120]))
                    assert client.get_many(want) == {k: k.encode() * 3 for k in want}
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        obs = _latest(client)
    assert not errors, errors[:3]
    assert obs["requests"] == 240
    assert sum(c["count"] for c in obs["classes"].values()) == 240


def test_dead_server_keys_missing_or_raise_without_hanging(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    keys = [f"d:{i}" for i in range(120)]
    placed = _by_server(keys, addrs)
    dead = addrs[1]
    with Client(addrs, config=BATCHING, poll_interval=0) as loader:
        loader.set_many({k: b"v" for k in keys})
    pool[1].stop()
    with Client(addrs, config=BATCHING, poll_interval=0, on_server_error="missing") as client:
        t0 = time.monotonic()
        got = client.get_many(keys)
        assert time.monotonic() - t0 < 1.5
        assert set(got) == set(keys) - set(placed[dead])
        stats = client.stats()
        assert stats["servers"][dead]["errors"] == 1 and stats["servers"][dead]["down"]
        assert "Connection" in (stats["servers"][dead]["last_error"] or "")
        assert _latest(client)["missing_keys_on_error"] == len(placed[dead])
        # while marked down its keys fail at once, without a new connection attempt
        assert set(client.get_many(keys)) == set(keys) - set(placed[dead])
        assert client.stats()["servers"][dead]["errors"] == 1
        assert sorted(client.set_many({k: b"w" for k in keys})) == sorted(placed[dead])
    with Client(addrs, config=BATCHING, poll_interval=0, on_server_error="raise", dead_timeout=0.2) as client:
        with pytest.raises(ServerError) as info:
            client.get_many(keys)
        assert list(info.value.errors) == [dead]
        assert sorted(info.value.keys) == sorted(placed[dead])
        assert set(info.value.partial) == set(keys) - set(placed[dead])
        assert client.stats()["latency"][0]["failed_requests"] == 1
        with pytest.raises(ServerError):
            client.set_many({k: b"w" for k in keys})
        # the server comes back (empty, same port): after dead_timeout the client uses it again
        pool[1].start()
        time.sleep(0.3)
        assert client.set_many({k: b"z" for k in keys}) == []
        assert client.get_many(keys) == {k: b"z" for k in keys}


def test_hung_server_times_out_instead_of_hanging(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    keys = [f"h:{i}" for i in range(60)]
    placed = _by_server(keys, addrs)
    with Client(addrs, config=chisel(threshold=10, split=5, merge=2), poll_interval=0, timeout=0.3,
                request_timeout=0.5, dead_timeout=0.3) as client:
        client.set_many({k: b"v" for k in keys})
        pool[2].pause()
        try:
            t0 = time.monotonic()
            got = client.get_many(keys)
            assert time.monotonic() - t0 < 2.0
            assert set(got) == set(keys) - set(placed[addrs[2]])
            t0 = time.monotonic()
            assert set(client.get_many(keys[:3])) <= set(keys[:3])
            assert time.monotonic() - t0 < 2.0
        finally:
            pool[2].resume()
        time.sleep(0.5)
        assert client.get_many(keys) == {k: b"v" for k in keys}
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 3.0  # close() did not wait on anything


def test_close_stops_threads_and_rejects_calls(pool: list[Memcached]) -> None:
    addrs = [n.address for n in pool]
    before = threading.active_count()
    client = Client(addrs, config=BATCHING, poll_interval=0, connections_per_server=3)
    assert threading.active_count() == before + 9
    client.get_many(["x"])
    client.close()
    client.close()
    assert threading.active_count() == before
    with pytest.raises(ClientClosed):
        client.get_many(["x"])


def test_bad_keys_and_values_are_refused_before_any_query(pool: list[Memcached]) -> None:
    with Client([pool[0].address], config=BATCHING, poll_interval=0) as client:
        for bad in ("has space", "", "k" * 251, "naïve", "nul\0"):
            with pytest.raises(ValueError):
                client.get_many([bad])
        with pytest.raises(TypeError):
            client.set_many({"k": "not bytes"})  # type: ignore[dict-item]
        assert client.stats()["servers"][pool[0].address]["queries"] == 0


def test_config_without_a_chisel_key_is_an_error_naming_it(pool: list[Memcached]) -> None:
    addrs = [pool[0].address]
    with pytest.raises(ConfigError, match=r"memcached_client\.split_keys is missing"):
        Client(addrs, config={"memcached_client": {"mode": "chisel", "elephant_threshold": 50, "merge": 2}})
    with pytest.raises(ConfigError, match=r"memcached_client\.merge must be an integer in \[1, 1024\]"):
        Client(addrs, config=chisel(50, 10, 0))
    with pytest.raises(ConfigError, match="mode must be one of"):
        Client(addrs, config={"memcached_client": {"mode": "fifo"}})
    with pytest.raises(ConfigError, match="no config"):
        Client(addrs)
