"""A canary: a version published with `canary_fraction` runs on that fraction of the requests while the version
before it keeps the rest, both reported under their own version, until a version without it arrives."""

from __future__ import annotations

from typing import Any

import pytest
from ttc_support import ConfigService, Memcached

from tailtune_client.config import ConfigError, parse_config
from tailtune_client.memcached import Client

V1 = {"mode": "batching"}
V2 = {"mode": "chisel", "elephant_threshold": 10, "merge": 2, "split_keys": 4}
KEYS = [f"c:{i}" for i in range(30)]


def _requests(client: Client) -> dict[int | None, int]:
    return {o["config_version"]: o["requests"] for o in client.stats()["latency"]}


def _drive(client: Client, n: int) -> None:
    for _ in range(n):
        assert len(client.get_many(KEYS)) == len(KEYS)


def test_canary_fraction_is_read_and_checked() -> None:
    doc: dict[str, Any] = {"deployment_id": 1, "version": 3,
                           "config": {"policy": "batching", "params": {}, "canary_fraction": 0.25}}
    cfg = parse_config(doc)
    assert (cfg.canary_fraction, cfg.canary) == (0.25, True)
    assert parse_config({"memcached_client": V1, "canary_fraction": 1}).canary is False  # 1: every request
    assert parse_config({"memcached_client": V1}).canary_fraction is None
    for bad in (0, 1.5, -1, True, "0.5"):
        with pytest.raises(ConfigError, match=r"config version 3: canary_fraction must be a number in \(0, 1\]"):
            parse_config({**doc, "config": {**doc["config"], "canary_fraction": bad}})


def test_a_canary_runs_beside_the_version_before_until_a_version_without_it(
    pool: list[Memcached], service: ConfigService
) -> None:
    service.publish(1, V1)
    with Client([pool[0].address], config_url=service.config_url, token=service.token, poll_interval=0) as c:
        c.set_many({k: b"v" for k in KEYS})
        _drive(c, 10)
        assert c.stats()["config"]["canary"] is None
        service.publish(2, V2, canary_fraction=0.3)
        assert c.refresh_config() is True and c.config.version == 2
        assert c.stats()["config"]["canary"] == {"version": 2, "fraction": 0.3, "stable_version": 1}
        _drive(c, 300)
        counts = _requests(c)
        assert counts[1] - 10 + counts[2] == 300 and 40 < counts[2] < 150  # about 90 of 300
        # a newer canary replaces the first one and still runs beside version 1
        service.publish(3, V1, canary_fraction=0.5)
        assert c.refresh_config() is True
        assert c.stats()["config"]["canary"] == {"version": 3, "fraction": 0.5, "stable_version": 1}
        _drive(c, 100)
        assert _requests(c)[3] > 20 and _requests(c)[2] == counts[2]
        report = c.report()
        assert {o["config_version"] for o in report["observations"]} == {1, 2, 3}
        # a version without canary_fraction ends it: every request runs it
        service.publish(4, V2)
        assert c.refresh_config() is True and c.stats()["config"]["canary"] is None
        before = _requests(c)
        _drive(c, 50)
        after = _requests(c)
        assert after[4] == 50 and all(after[v] == before[v] for v in (1, 2, 3))


def test_a_client_started_during_a_canary(pool: list[Memcached], service: ConfigService) -> None:
    service.publish(5, V2, canary_fraction=0.5)
    bootstrap = {"deployment_id": 1, "version": 4, "config": {"memcached_client": V1}}
    with Client([pool[0].address], config=bootstrap, config_url=service.config_url, token=service.token,
                poll_interval=0) as c:  # the bootstrap config is the version before
        assert c.stats()["config"]["canary"] == {"version": 5, "fraction": 0.5, "stable_version": 4}
        c.set_many({k: b"v" for k in KEYS})
        _drive(c, 100)
        assert set(_requests(c)) == {4, 5}
    with Client([pool[0].address], config_url=service.config_url, token=service.token, poll_interval=0) as c:
        assert c.stats()["config"]["canary"] is None  # nothing ran before it here: the canary takes every request
        c.set_many({k: b"v" for k in KEYS})
        _drive(c, 20)
        assert _requests(c) == {5: 20}
