"""Histograms (log buckets, merge, quantiles) and the report payload sent to the service."""

from __future__ import annotations

import json
import math
import random

from ttc_support import ConfigService, Memcached

from tailtune_client.histogram import BUCKETS, LogHistogram, bucket_bounds, bucket_of, size_class
from tailtune_client.memcached import Client
from tailtune_client.report import REPORT_SCHEMA

CHISEL = {"memcached_client": {"mode": "chisel", "elephant_threshold": 50, "merge": 2, "split_keys": 20}}


def test_size_classes() -> None:
    assert [size_class(k) for k in (1, 2, 10, 11, 50, 51, 5000)] == ["1", "2-10", "2-10", "11-50", "11-50", "51+",
                                                                    "51+"]


def test_buckets_are_log_spaced_and_cover_every_value() -> None:
    assert bucket_of(0.0) == 0 and bucket_of(0.99) == 0 and bucket_of(1.0) == 1
    assert bucket_of(1e12) == BUCKETS - 1
    for us in (1.0, 3.7, 99.9, 100.0, 1234.5, 8e7):
        low, high = bucket_bounds(bucket_of(us))
        assert low <= us < high
        assert math.isclose(high / low, 10 ** (1 / 20))


def test_quantiles_within_bucket_precision_and_merge_is_union() -> None:
    rng = random.Random(3)
    a_vals = [rng.lognormvariate(6.0, 1.0) for _ in range(5000)]
    b_vals = [rng.lognormvariate(7.5, 0.5) for _ in range(3000)]
    a, b, both = LogHistogram(), LogHistogram(), LogHistogram()
    for v in a_vals:
        a.record(v)
        both.record(v)
    for v in b_vals:
        b.record(v)
        both.record(v)
    merged = a.copy()
    merged.merge(b)
    assert merged.counts == both.counts and merged.n == 8000
    ordered = sorted(a_vals + b_vals)
    for q in (0.5, 0.95, 0.99):
        exact = ordered[math.ceil(q * len(ordered)) - 1]
        est = merged.quantile_us(q)
        assert est is not None and abs(est - exact) / exact < 0.065, (q, est, exact)
    back = LogHistogram.from_json(json.loads(json.dumps(merged.to_json())))
    assert back.counts == merged.counts and back.quantile_us(0.99) == merged.quantile_us(0.99)
    merged.subtract(a)
    assert merged.counts == b.counts and merged.n == b.n
    assert LogHistogram().quantile_us(0.5) is None


def test_stats_and_report_payload(pool: list[Memcached], service: ConfigService) -> None:
    addrs = [n.address for n in pool]
    keys = [f"r:{i}" for i in range(200)]
    sizes = [1] * 20 + [5] * 10 + [30] * 6 + [120] * 4
    with Client(addrs, config=CHISEL, deployment="web", config_key="web-test-key-0123456789", poll_interval=0,
                token=service.token) as client:
        client.set_many({k: b"v" for k in keys})
        for n in sizes:
            client.get_many(keys[:n])
        stats = client.stats()
        json.dumps(stats)
        (obs,) = stats["latency"]
        assert {c: h["count"] for c, h in obs["classes"].items()} == {"1": 20, "2-10": 10, "11-50": 6, "51+": 4}
        assert obs["all"]["count"] == 40 and obs["requests"] == 40 and obs["keys"] == sum(sizes)
        for h in obs["classes"].values():
            assert h["p50_ms"] is not None and h["p50_ms"] <= h["p95_ms"] <= h["p99_ms"]  # type: ignore[operator]
        payload = client.report()
        assert payload["schema"] == REPORT_SCHEMA and payload["deployment"] == "web"
        assert payload["deployment_id"] is None
        assert payload["config"] == {"version": None, "mode": "chisel",
                                     "params": {"elephant_threshold": 50, "merge": 2, "split_keys": 20}}
        assert payload["pool"] == {"kind": "sharded", "hashing": "rendezvous-murmur3", "servers": 3}
        assert payload["observations"][0]["classes"] == obs["classes"]
        assert json.loads(json.dumps(payload)) == payload

        # accepted: the next window starts empty, where this one ended
        assert client.report_to(service.report_url) is True
        assert len(service.reports) == 1 and service.reports[0]["observations"][0]["requests"] == 40
        assert client.report()["observations"] == []
        start = client.report()["window"]["start"]
        assert start == service.reports[0]["window"]["end"]

        # refused (HTTP 500), then unreachable: never raises, says why, loses nothing
        client.get_many(keys[:1])
        service.report_status = 500
        assert client.report_to(service.report_url) is False
        assert "HTTP 500" in (client.stats()["reports"]["last_error"] or "")
        client.get_many(keys[:2])
        service.stop()
        assert client.report_to(service.report_url, timeout=1.0) is False
        assert "ConnectError" in (client.stats()["reports"]["last_error"] or "")
        service.start()
        service.report_status = 201
        assert client.report_to(service.report_url) is True
        last = service.reports[-1]
        assert len(service.reports) == 2 and last["window"]["start"] == start
        assert {c: h["count"] for c, h in last["observations"][0]["classes"].items() if h["count"]} == {
            "1": 1, "2-10": 1}
        assert client.stats()["reports"]["sent"] == 2
        # the service merges what it receives: both windows add up to everything the client saw
        total = LogHistogram()
        for rep in service.reports:
            for o in rep["observations"]:
                total.merge(LogHistogram.from_json(o["all"]))
        assert total.n == 42
        assert client.report_to("http://127.0.0.1:9/nothing", timeout=0.5) is False  # wrong address: no raise
