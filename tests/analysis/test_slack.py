"""Rein §2.3 slack bounds on hand-made per-op tables (times in ms), exact expected values."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from analysis import slack, transforms

pytestmark = pytest.mark.spark

_SCHEMA = ("utilization double, request_id long, opset long, server long, enqueue double, start double, "
           "end double, demand double")


def _ops(spark: SparkSession):  # type: ignore[no-untyped-def]
    # Single-slot servers A=0, B=1. Request 1 = x1 (A, 0→1) and x2 (B, 0→4): slack(x1) = 3.
    # On A, y (request 2) follows x1. z (request 3) follows y.
    #  u=0.5: y waiting since 0, demand 2 <= 3      → credit start(y) - start(x1) = 1
    #  u=0.7: y arrives at 0.2, after x1 started    → no credit
    #  u=0.9: y demand 3.5 > slack 3                → no credit
    rows = []
    for u, y_enq, y_dem in ((0.5, 0.0, 2.0), (0.7, 0.2, 2.0), (0.9, 0.0, 3.5)):
        rows += [
            (u, 1, 0, 0, 0.0, 0.0, 1.0, 1.0),
            (u, 1, 1, 1, 0.0, 0.0, 4.0, 4.0),
            (u, 2, 0, 0, y_enq, 1.0, 1.0 + y_dem, y_dem),
            (u, 3, 0, 0, 0.5, 1.0 + y_dem, 2.0 + y_dem, 1.0),
        ]
    return spark.createDataFrame(rows, _SCHEMA)


def test_per_op_slack_and_reduction(spark: SparkSession) -> None:
    out = slack.op_reductions(_ops(spark)).where("utilization = 0.5")
    assertDataFrameEqual(out, spark.createDataFrame(
        [(0.5, 1, 0, 0, 3.0, 1.0), (0.5, 1, 1, 1, 0.0, 0.0), (0.5, 2, 0, 0, 0.0, 0.0), (0.5, 3, 0, 0, 0.0, 0.0)],
        "utilization double, request_id long, opset long, server long, slack double, reduction double"))


def test_bounds_per_utilization(spark: SparkSession) -> None:
    assertDataFrameEqual(slack.slack_bounds(_ops(spark)), spark.createDataFrame(
        [(0.5, 4, 0.75, 0.25), (0.7, 4, 0.75, 0.0), (0.9, 4, 0.75, 0.0)],
        "utilization double, ops long, upper_ms double, lower_ms double"), checkRowOrder=True)


def test_observed_slack_from_trace_latencies(spark: SparkSession, hand_parquet: Path) -> None:
    df = transforms.normalize(spark.read.parquet(str(hand_parquet)))
    # r1: 100, 300, 600 µs → slacks 0.5, 0.3, 0 ms; r2: 200 µs → 0; rows without latency left out
    assertDataFrameEqual(slack.observed_slack(df), spark.createDataFrame(
        [(4, 0.2)], "ops long, upper_ms double"))
