"""Rein §2.3 (Fig 5): upper and lower bounds of the average per-op latency reduction that slack allows.

Input: per-op records of a replay (one row per op), times in milliseconds:
`utilization` double, `request_id` long, `opset` long, `server` long, `enqueue`, `start`, `end`,
`demand` double.

Definitions (also in docs/analysis.md, "Slack bounds"):
- slack(x) = completion of x's request (the latest `end` of its ops) − end(x).
- **Upper bound** = mean over all ops of slack(x): every op could give away all of its slack.
- **Lower bound**: on each server, order the ops by (start, enqueue, request_id, opset); the op y that
  follows x in that order is "the next queued op" when it was already waiting as x started
  (enqueue(y) <= start(x)). If slack(x) > 0, demand(y) <= slack(x) and start(y) > start(x), serving y in x's
  place would have cut y's latency by start(y) − start(x) without delaying x's request; otherwise the
  reduction is 0. Lower bound = Σ reductions / number of ops (each op is "the next op" of at most one op).
- **Observed variant** (trace with `latency_us`, no queue information): slack of a row = the largest latency
  of its request − its latency; upper bound = mean slack (ms); the lower bound needs per-server queues, so
  it is not computed from observations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.window import Window

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["OP_COLUMNS", "observed_slack", "op_reductions", "slack_bounds"]

OP_COLUMNS = ("utilization", "request_id", "opset", "server", "enqueue", "start", "end", "demand")


def op_reductions(ops: DataFrame) -> DataFrame:
    """Per op: utilization, request_id, opset, server, slack and reduction (ms; the lower-bound credit)."""
    by_request = Window.partitionBy("utilization", "request_id")
    by_server = Window.partitionBy("utilization", "server").orderBy("start", "enqueue", "request_id", "opset")
    with_next = ops.select(
        *OP_COLUMNS,
        (F.max("end").over(by_request) - F.col("end")).alias("slack"),
        F.lead("enqueue").over(by_server).alias("next_enqueue"),
        F.lead("start").over(by_server).alias("next_start"),
        F.lead("demand").over(by_server).alias("next_demand"),
    )
    gain = F.col("next_start") - F.col("start")
    ok = (
        (F.col("slack") > 0)
        & F.col("next_start").isNotNull()
        & (F.col("next_enqueue") <= F.col("start"))
        & (F.col("next_demand") <= F.col("slack"))
        & (gain > 0)
    )
    return with_next.select(
        "utilization", "request_id", "opset", "server", "slack",
        F.when(ok, gain).otherwise(F.lit(0.0)).alias("reduction"),
    )


def slack_bounds(ops: DataFrame) -> DataFrame:
    """Per utilization: ops, upper_ms (mean slack), lower_ms (mean reduction), ascending utilization."""
    return (
        op_reductions(ops)
        .groupBy("utilization")
        .agg(
            F.count(F.lit(1)).alias("ops"),
            F.avg("slack").alias("upper_ms"),
            F.avg("reduction").alias("lower_ms"),
        )
        .orderBy("utilization")
    )


def observed_slack(df: DataFrame) -> DataFrame:
    """From a canonical trace with per-op `latency_us`: one row with ops and upper_ms
    (rows without latency are left out; requests whose rows all lack latency contribute nothing)."""
    by_request = Window.partitionBy("request_id")
    rows = df.where(F.col("latency_us").isNotNull()).select(
        ((F.max("latency_us").over(by_request) - F.col("latency_us")) / F.lit(1000.0)).alias("slack")
    )
    return rows.agg(F.count(F.lit(1)).alias("ops"), F.avg("slack").alias("upper_ms"))
