"""Spark transforms on the hand-made trace of conftest.py: exact expected tables (assertDataFrameEqual)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from analysis import transforms as tr

pytestmark = pytest.mark.spark


@pytest.fixture
def hand(spark: SparkSession, hand_parquet: Path) -> DataFrame:
    return tr.normalize(spark.read.parquet(str(hand_parquet)))


def test_normalize_adds_missing_optional_columns(hand: DataFrame) -> None:
    assert hand.columns == ["request_id", "ts", "key", "value_size", "op", "client_id", "latency_us", "table"]
    assert hand.where("op is not null").count() == 0


def test_requests_and_size_histogram(spark: SparkSession, hand: DataFrame) -> None:
    reqs = tr.requests(hand)
    expected = spark.createDataFrame(
        [(1, 0.0, 3, 600, 600.0), (2, 1.0, 1, 100, 200.0), (3, 2.5, 2, 300, None), (4, 4.0, 1, None, None)],
        "request_id long, ts double, size long, bytes long, latency_us double",
    )
    assertDataFrameEqual(reqs, expected)
    assertDataFrameEqual(tr.size_histogram(reqs), spark.createDataFrame(
        [(1, 2), (2, 1), (3, 1)], "size long, requests long"), checkRowOrder=True)


def test_window_and_key_counts(spark: SparkSession, hand: DataFrame) -> None:
    # t0 = 0, 2 windows of 2 s; ts = 4.0 falls on the end and is clamped into the last window
    wkc = tr.window_key_counts(hand, 0.0, 2.0, 2)
    assertDataFrameEqual(wkc, spark.createDataFrame(
        [(0, "a", 2), (0, "b", 1), (0, "c", 1), (1, "a", 1), (1, "b", 1), (1, "d", 1)],
        "window int, key string, count long"))
    only = spark.createDataFrame([("b",), ("d",)], "key string")
    assertDataFrameEqual(tr.window_key_counts(hand, 0.0, 2.0, 2, only), spark.createDataFrame(
        [(0, "b", 1), (1, "b", 1), (1, "d", 1)], "window int, key string, count long"))
    # window 1 has a, b, d once each: the tie goes to the smallest key
    assertDataFrameEqual(tr.hot_set_by_window(wkc, 1), spark.createDataFrame(
        [(0, 1, "a", 2), (1, 1, "a", 1)], "window int, rank int, key string, count long"), checkRowOrder=True)


def test_key_tables(spark: SparkSession, hand: DataFrame) -> None:
    keys = tr.key_counts(hand)
    assertDataFrameEqual(keys, spark.createDataFrame(
        [("a", 3, 100, 300), ("b", 2, 200, 400), ("c", 1, 300, 300), ("d", 1, None, None)],
        "key string, count long, value_size long, bytes long"))
    assertDataFrameEqual(tr.count_of_counts(keys), spark.createDataFrame(
        [(3, 1), (2, 1), (1, 2)], "count long, keys long"), checkRowOrder=True)
    assertDataFrameEqual(tr.top_keys(keys, 3), spark.createDataFrame(
        [("a", 3), ("b", 2), ("c", 1)], "key string, count long"), checkRowOrder=True)
    assertDataFrameEqual(tr.value_size_histogram(keys), spark.createDataFrame(
        [(100, 1, 3), (200, 1, 2), (300, 1, 1)], "value_size long, keys long, accesses long"),
        checkRowOrder=True)
    # unordered variants (the pipeline sorts the collected rows itself): same rows
    assertDataFrameEqual(tr.count_of_counts(keys, ordered=False), tr.count_of_counts(keys))
    assertDataFrameEqual(tr.value_size_histogram(keys, ordered=False), tr.value_size_histogram(keys))


def test_arrivals(spark: SparkSession, hand: DataFrame) -> None:
    reqs = tr.requests(hand)
    # 3 windows of 4/3 s: arrivals 0.0, 1.0 | 2.5 | 4.0 (clamped into the last window)
    rate = tr.arrival_rate(spark, reqs, 0.0, 4 / 3, 3)
    assertDataFrameEqual(rate, spark.createDataFrame(
        [(0, 0.0, 2, 1.5), (1, 4 / 3, 1, 0.75), (2, 8 / 3, 1, 0.75)],
        "window int, start double, requests long, rate double"), checkRowOrder=True)
    gaps = tr.inter_arrivals(reqs, 0.0, 4.0, 1)
    assertDataFrameEqual(gaps, spark.createDataFrame([(0, 1.0), (0, 1.5), (0, 1.5)], "window int, gap double"))
    # with 2 windows of 2 s the gap 1.0 → 2.5 crosses a boundary and is left out
    assertDataFrameEqual(tr.inter_arrivals(reqs, 0.0, 2.0, 2),
                         spark.createDataFrame([(0, 1.0), (1, 1.5)], "window int, gap double"))


def test_latency_deciles(spark: SparkSession, hand: DataFrame) -> None:
    reqs = tr.requests(hand)  # latencies: r1 600 µs (3 keys), r2 200 µs (1 key)
    out = tr.latency_deciles(reqs, [300.0] * 9)
    assertDataFrameEqual(out, spark.createDataFrame(
        [(1, 1, 1.0, 200.0), (10, 1, 3.0, 600.0)],
        "decile int, requests long, mean_size double, mean_latency_us double"), checkRowOrder=True)


def test_fanout_and_server_load(spark: SparkSession, hand: DataFrame) -> None:
    keys = tr.key_counts(hand)
    ks = keys.join(spark.createDataFrame([("a", 0), ("b", 1), ("c", 1), ("d", 0)], "key string, server int"),
                   "key").select("key", "count", "server")
    fan = tr.fanout_per_request(hand, ks)
    assertDataFrameEqual(fan, spark.createDataFrame(
        [(1, 2, 2), (2, 1, 1), (3, 2, 1), (4, 1, 1)], "request_id long, opsets long, bottleneck long"))
    # RF 2 on 3 servers: a(3)→{0,1}, b(2)→{1,2}, c(1)→{1,2}, d(1)→{0,1}, each replica serving count/2
    assertDataFrameEqual(tr.server_load(spark, ks, 3, 2), spark.createDataFrame(
        [(0, 2.0), (1, 3.5), (2, 1.5)], "server int, load double"), checkRowOrder=True)


def test_request_sample_keeps_whole_requests_and_about_the_fraction(spark: SparkSession) -> None:
    rows = [(r, f"k{j}") for r in range(20_000) for j in range(1 + r % 3)]
    df = spark.createDataFrame(rows, "request_id long, key string")
    kept = df.where(tr.request_sample(0.25)).groupBy("request_id").count().collect()
    sizes = {r["request_id"]: r["count"] for r in kept}
    assert all(n == 1 + rid % 3 for rid, n in sizes.items())  # every kept request has all its rows
    assert 4_700 < len(sizes) < 5_300  # 5,000 expected; ±4.5 binomial standard errors
    again = {r["request_id"] for r in df.where(tr.request_sample(0.25)).select("request_id").collect()}
    assert again == set(sizes)  # deterministic
    assert df.where(tr.request_sample(1.0)).count() == df.count()


def test_key_servers_uses_the_python_ring(spark: SparkSession, hand: DataFrame) -> None:
    from analysis.topology import primary_server

    keys = tr.key_counts(hand)
    got = {r["key"]: r["server"] for r in tr.key_servers(keys, 5).collect()}
    assert got == {k: primary_server(k, 5) for k in "abcd"}
