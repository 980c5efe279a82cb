"""Pure Spark transforms over the canonical dataset: each takes DataFrames (and the SparkSession where it
needs one) and returns a DataFrame; nothing here collects, writes or caches (the pipeline decides that).

Raw input: the canonical long format (one row per key access; rows sharing `request_id` form one multiget).
The heavy work is two aggregations of the raw rows — `requests` (by request) and `key_counts` (by key)
— and every other table derives from those two smaller tables (the per-window hot sets count only
candidate keys; see analysis.pipeline).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "arrival_rate",
    "count_of_counts",
    "fanout_per_request",
    "hot_set_by_window",
    "inter_arrivals",
    "key_counts",
    "key_counts_by_window",
    "key_servers",
    "latency_deciles",
    "normalize",
    "request_sample",
    "requests",
    "server_load",
    "size_histogram",
    "top_keys",
    "value_size_histogram",
    "window_index",
    "window_key_counts",
]

_OPTIONAL = {"op": T.StringType(), "client_id": T.StringType(), "latency_us": T.DoubleType(),
             "table": T.StringType()}


def normalize(df: DataFrame) -> DataFrame:
    """The canonical columns only, with absent optional columns added as typed nulls (so later steps never
    branch)."""
    cols = [F.col("request_id").cast("long"), F.col("ts").cast("double"), F.col("key").cast("string"),
            F.col("value_size").cast("long")]
    for name, typ in _OPTIONAL.items():
        cols.append(F.col(name).cast(typ) if name in df.columns else F.lit(None).cast(typ).alias(name))
    return df.select(*cols)


def requests(df: DataFrame) -> DataFrame:
    """One row per multiget: request_id, ts (earliest row), size (keys), bytes (null if no size known),
    latency_us (largest observed latency of its rows: the request completes with its slowest op)."""
    return df.groupBy("request_id").agg(
        F.min("ts").alias("ts"),
        F.count(F.lit(1)).alias("size"),
        F.sum("value_size").alias("bytes"),
        F.max("latency_us").alias("latency_us"),
    )


def size_histogram(reqs: DataFrame) -> DataFrame:
    """Multiget size → number of requests, ascending size."""
    return reqs.groupBy("size").agg(F.count(F.lit(1)).alias("requests")).orderBy("size")


def key_counts(df: DataFrame) -> DataFrame:
    """Per key: count (accesses), value_size (largest seen; null if unknown), bytes (sum over accesses)."""
    return df.groupBy("key").agg(
        F.count(F.lit(1)).alias("count"), F.max("value_size").alias("value_size"),
        F.sum("value_size").alias("bytes"),
    )


def window_index(t0: float, window_s: float, windows: int) -> Column:
    """The time window of a row: floor((ts - t0) / window_s), clamped into 0..windows-1 (an int column)."""
    return F.least(F.floor((F.col("ts") - F.lit(t0)) / F.lit(window_s)).cast("int"), F.lit(windows - 1))


def key_counts_by_window(df: DataFrame, t0: float, window_s: float, windows: int) -> DataFrame:
    """`key_counts` without `bytes` (unused downstream) plus `per_window` (array<long> of length `windows`:
    the key's accesses in each time window, see `window_index`) from the same single aggregation — so the
    per-window hot sets need no further pass over the raw rows."""
    w = window_index(t0, window_s, windows).alias("window")
    per = [F.count(F.when(F.col("window") == F.lit(i), F.lit(1))).alias(f"w{i}") for i in range(windows)]
    return (
        df.select("key", "value_size", w)
        .groupBy("key")
        .agg(F.count(F.lit(1)).alias("count"), F.max("value_size").alias("value_size"), *per)
        .select("key", "count", "value_size", F.array(*[f"w{i}" for i in range(windows)]).alias("per_window"))
    )


def window_key_counts(
    df: DataFrame, t0: float, window_s: float, windows: int, only: DataFrame | None = None
) -> DataFrame:
    """Accesses per (time window, key): window = floor((ts - t0) / window_s), clamped into 0..windows-1.
    With `only` (a small DataFrame with a `key` column), just those keys are counted (broadcast semi-join)."""
    if only is not None:
        df = df.join(F.broadcast(only.select("key")), "key", "left_semi")
    return df.groupBy(window_index(t0, window_s, windows).alias("window"), "key").agg(F.count(F.lit(1)).alias("count"))


def count_of_counts(keys: DataFrame, *, ordered: bool = True) -> DataFrame:
    """Access count → number of keys with that count, most accessed first (the rank-frequency curve,
    compressed). `ordered=False` leaves out the global sort (a sampling job and a shuffle) for a caller
    that sorts the few collected rows itself."""
    hist = keys.groupBy("count").agg(F.count(F.lit(1)).alias("keys"))
    return hist.orderBy(F.desc("count")) if ordered else hist


def top_keys(keys: DataFrame, n: int, *extra: str) -> DataFrame:
    """The `n` most accessed keys, ties broken by key (ascending): key, count (and the `extra` columns)."""
    return keys.orderBy(F.desc("count"), F.asc("key")).limit(n).select("key", "count", *extra)


def hot_set_by_window(wkc: DataFrame, n: int) -> DataFrame:
    """The `n` hottest keys of every time window: window, rank (1 = hottest; ties by key), key, count."""
    spec = Window.partitionBy("window").orderBy(F.desc("count"), F.asc("key"))
    return (
        wkc.select("window", "key", "count", F.row_number().over(spec).alias("rank"))
        .where(F.col("rank") <= n)
        .select("window", "rank", "key", "count")
        .orderBy("window", "rank")
    )


def value_size_histogram(keys: DataFrame, *, ordered: bool = True) -> DataFrame:
    """Value size → keys with that size and their accesses (keys of unknown size left out), ascending size
    (`ordered=False`: no global sort, as in `count_of_counts`)."""
    hist = (
        keys.where(F.col("value_size").isNotNull())
        .groupBy("value_size")
        .agg(F.count(F.lit(1)).alias("keys"), F.sum("count").alias("accesses"))
    )
    return hist.orderBy("value_size") if ordered else hist


def arrival_rate(spark: SparkSession, reqs: DataFrame, t0: float, window_s: float, windows: int) -> DataFrame:
    """Requests per time window: window, start (s since t0), requests, rate (requests/s); empty windows
    included."""
    w = window_index(t0, window_s, windows)
    counts = reqs.groupBy(w.alias("window")).agg(F.count(F.lit(1)).alias("requests"))
    grid = spark.range(windows).select(F.col("id").cast("int").alias("window"))
    return (
        grid.join(counts, "window", "left")
        .select(
            "window",
            (F.col("window") * F.lit(window_s)).alias("start"),
            F.coalesce(F.col("requests"), F.lit(0)).cast("long").alias("requests"),
            (F.coalesce(F.col("requests"), F.lit(0)) / F.lit(window_s)).alias("rate"),
        )
        .orderBy("window")
    )


def inter_arrivals(reqs: DataFrame, t0: float, window_s: float, windows: int) -> DataFrame:
    """Gaps (s) between consecutive request arrivals, computed within each time window (the
    `windows - 1` gaps that span a window boundary are left out, so the sort runs in
    parallel instead of on one partition)."""
    w = window_index(t0, window_s, windows)
    spec = Window.partitionBy("window").orderBy("ts", "request_id")
    return (
        reqs.select(w.alias("window"), "ts", "request_id")
        .select("window", (F.col("ts") - F.lag("ts").over(spec)).alias("gap"))
        .where(F.col("gap").isNotNull())
    )


def latency_deciles(reqs: DataFrame, bounds: list[float]) -> DataFrame:
    """Rein Fig 4: requests binned by latency decile (`bounds` = the 9 inner decile boundaries, ascending);
    decile (1..10), requests, mean_size, mean_latency_us. Requests without latency left out."""
    bucket = F.lit(1)
    for b in bounds:
        bucket = bucket + F.when(F.col("latency_us") > F.lit(b), 1).otherwise(0)
    return (
        reqs.where(F.col("latency_us").isNotNull())
        .groupBy(bucket.alias("decile"))
        .agg(
            F.count(F.lit(1)).alias("requests"),
            F.avg("size").alias("mean_size"),
            F.avg("latency_us").alias("mean_latency_us"),
        )
        .orderBy("decile")
    )


def key_servers(keys: DataFrame, servers: int) -> DataFrame:
    """key → primary server on the hash ring of `analysis.topology` (a vectorized UDF over the distinct
    keys)."""
    from pyspark.sql.pandas.functions import pandas_udf

    @pandas_udf(T.IntegerType())  # type: ignore[call-overload,untyped-decorator,misc]
    def _primary(k: pd.Series) -> pd.Series:  # type: ignore[type-arg]
        from analysis.topology import primary_server

        return k.map(lambda s: primary_server(s, servers)).astype("int32")

    return keys.select("key", "count", _primary(F.col("key")).alias("server"))


#: `request_sample`'s resolution: a request is kept when its hash modulo this is below fraction × this.
SAMPLE_BUCKETS = 1 << 24


def request_sample(fraction: float) -> Column:
    """A filter that keeps about `fraction` of the requests, each whole (all its rows or none): the 64-bit
    xxHash of `request_id` modulo `SAMPLE_BUCKETS` below `fraction` × `SAMPLE_BUCKETS`. Deterministic, and
    independent of the request's keys, size and time."""
    cut = max(1, min(SAMPLE_BUCKETS, round(fraction * SAMPLE_BUCKETS)))
    return F.pmod(F.xxhash64("request_id"), F.lit(SAMPLE_BUCKETS)) < F.lit(cut)


def fanout_per_request(df: DataFrame, ks: DataFrame) -> DataFrame:
    """Per request: opsets (distinct primary servers touched) and bottleneck (keys in its largest opset)."""
    per_opset = (
        df.select("request_id", "key")
        .join(ks.select("key", "server"), "key")
        .groupBy("request_id", "server")
        .agg(F.count(F.lit(1)).alias("keys"))
    )
    return per_opset.groupBy("request_id").agg(
        F.count(F.lit(1)).alias("opsets"), F.max("keys").alias("bottleneck")
    )


def server_load(spark: SparkSession, ks: DataFrame, servers: int, replication: int) -> DataFrame:
    """Accesses served per server when a key's reads are spread evenly over its `replication` replicas
    (the primary and the next servers clockwise): server, load. Every server appears, idle ones with 0."""
    rep = ks.select(
        F.explode(F.sequence(F.lit(0), F.lit(replication - 1))).alias("j"), "server", "count"
    ).select(((F.col("server") + F.col("j")) % F.lit(servers)).alias("server"),
             (F.col("count") / F.lit(replication)).alias("load"))
    loads = rep.groupBy("server").agg(F.sum("load").alias("load"))
    grid = spark.range(servers).select(F.col("id").cast("int").alias("server"))
    return (
        grid.join(loads, "server", "left")
        .select("server", F.coalesce(F.col("load"), F.lit(0.0)).alias("load"))
        .orderBy("server")
    )
