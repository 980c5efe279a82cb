"""Runs the transforms once over a dataset and collects the small tables `summary.build_summary` needs.

Plan (two scans + shuffles of the raw rows, both aggregations with map-side partial aggregation):
1. `requests` (by request_id) — cached; sizes, arrivals, latency and the time span come from it. Up to
   `Options.driver_requests` requests, their (ts, size) are collected once and the size histogram, arrival
   rate and inter-arrival statistics finished on the driver (`analysis.arrivals`), not by more Spark jobs.
2. `key_counts_by_window` (by key) — cached; popularity, top keys and value sizes come from it, and each
   key's access count per time window rides along in the same aggregation (`per_window`).
3. Hot sets per time window: the `hot_candidates × hot_n` most accessed keys are collected with their
   per-window counts and ranked on the driver (no third scan). The result is exact whenever every
   non-candidate key has fewer accesses *in total* than the hot_n-th count of every window (checked); if
   the check fails, all (window, key) pairs are counted by another pass instead.
Fan-out joins the raw (request_id, key) pairs with the per-key server table (another scan and two shuffles), only
when asked; above `Options.fanout_requests` requests it counts a uniform sample of the requests (kept or left out
whole, by a hash of the request id), which the summary states.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import functions as F

from analysis import arrivals, replay
from analysis import slack as slack_mod
from analysis import transforms as tr
from analysis.summary import Collected

if TYPE_CHECKING:
    import pandas as pd

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["STEPS", "Options", "characterize"]


@dataclass(frozen=True, slots=True)
class Options:
    servers: int = 16  # Rein's testbed size
    replication: int = 3  # Cassandra's usual RF
    windows: int = 10  # time windows for hot-set drift
    hot_n: int = 100  # hot-set size per window
    hot_candidates: int = 20  # keys counted per window = hot_candidates × hot_n most accessed overall
    rate_windows: int = 100  # windows for the arrival rate
    top_n: int = 20  # top keys listed in the summary
    fanout: bool = True
    slack_replay: bool = True  # replay a prefix with kvsim `fifo` for the slack bounds (when kvsim can)
    slack_requests: int = 5000  # requests of that prefix
    # up to this many requests, their arrival times and sizes are collected (16 bytes each) and the size
    # histogram, arrival rate and inter-arrival statistics finished on the driver (exact gap percentiles);
    # above it, Spark computes them (gap percentiles by percentile_approx)
    driver_requests: int = 20_000_000
    # the fan-out histogram counts every request up to this many; above it, a deterministic sample of about this
    # many requests (settings.analysis_fanout_requests; docs/analysis.md § Fan-out)
    fanout_requests: int = 10_000_000


def _row(df: DataFrame) -> dict[str, Any]:
    first = df.first()
    return first.asDict() if first is not None else {}


#: The steps of `characterize`, in order (what `on_step` is told as each one starts).
STEPS = (
    "requests and their span",
    "key counts per window",
    "multiget sizes and arrivals",
    "key popularity and value sizes",
    "hot sets",
    "latencies and fan-out",
    "slack",
)


def characterize(
    spark: SparkSession, raw: DataFrame, opts: Options = Options(), *, ops: DataFrame | None = None,
    slack_reason: str | None = None, source: str | None = None, on_step: Callable[[str], None] | None = None,
) -> Collected:
    """All tables of one dataset. `ops` = per-op replay records (see analysis.slack) if a replay exists.
    `on_step` is called with each name of `STEPS` as that step starts (a progress display)."""
    step = on_step or (lambda _name: None)
    step(STEPS[0])
    df = tr.normalize(raw)
    reqs = tr.requests(df).cache()
    head = _row(reqs.agg(
        F.count(F.lit(1)).alias("requests"), F.sum("size").alias("rows"), F.min("ts").alias("t0"),
        F.max("ts").alias("t1"), F.count("latency_us").alias("with_latency"),
    ))
    n_requests = int(head.get("requests") or 0)
    if n_requests == 0:
        reqs.unpersist()
        raise ValueError("the dataset has no rows")
    t0, t1 = float(head["t0"]), float(head["t1"])
    span = t1 - t0
    window_s = span / opts.windows if span > 0 else 1.0
    rate_window_s = span / opts.rate_windows if span > 0 else 1.0
    rate_windows = opts.rate_windows if span > 0 else 1

    step(STEPS[1])
    keys = tr.key_counts_by_window(df, t0, window_s, opts.windows).cache()
    cached: list[DataFrame] = [reqs, keys]
    try:
        step(STEPS[2])
        if n_requests <= opts.driver_requests:
            # 16 bytes per request to the driver instead of three more jobs (one a window sort) over `reqs`
            per_req = reqs.select("ts", "size").toArrow()
            ts = per_req.column("ts").to_numpy(zero_copy_only=False)
            ts = ts[~np.isnan(ts)]  # a request whose rows all lack ts has no window (as in Spark)
            size_hist = arrivals.size_histogram(per_req.column("size").to_numpy())
            rate = arrivals.arrival_rate(ts, t0, rate_window_s, rate_windows)
            gaps = arrivals.gap_stats(ts, t0, rate_window_s, rate_windows)
        else:
            size_hist = tr.size_histogram(reqs).toPandas()
            rate = tr.arrival_rate(spark, reqs, t0, rate_window_s, rate_windows).toPandas()
            gaps = _spark_gaps(reqs, t0, rate_window_s, rate_windows)
        # small histograms: sorted here rather than by a global sort in Spark (same rows, same order)
        step(STEPS[3])
        coc = tr.count_of_counts(keys, ordered=False).toPandas().sort_values(
            "count", ascending=False, ignore_index=True)
        accesses = int((coc["count"] * coc["keys"]).sum())
        cand = tr.top_keys(keys, max(opts.top_n, opts.hot_candidates * opts.hot_n), "per_window").toPandas()
        top = cand.head(opts.top_n)[["key", "count"]].assign(share=lambda d: d["count"] / accesses)
        vsh = tr.value_size_histogram(keys, ordered=False).toPandas().sort_values("value_size", ignore_index=True)
        step(STEPS[4])
        hot = _hot_sets(spark, df, cand, int(coc["keys"].sum()), t0, window_s, opts)
        c = Collected(
            rows=int(head["rows"]), requests=n_requests, t_start=t0, t_end=t1, size_hist=size_hist,
            count_of_counts=coc, top_keys=top, value_size_hist=vsh, hot_sets=hot, windows=opts.windows,
            window_s=window_s, hot_n=opts.hot_n, rate=rate, rate_window_s=rate_window_s, gaps=gaps,
            servers=opts.servers, replication=opts.replication, source=source,
        )
        step(STEPS[5])
        if int(head.get("with_latency") or 0) > 0:
            _latency(reqs, c)
            obs = _row(slack_mod.observed_slack(df))
            c.slack_observed = {"ops": obs.get("ops"), "upper_ms": obs.get("upper_ms")}
        if opts.fanout:
            ks = tr.key_servers(keys, opts.servers).cache()
            cached.append(ks)
            counted = df
            if n_requests > opts.fanout_requests:
                counted = df.where(tr.request_sample(opts.fanout_requests / n_requests))
            fan = tr.fanout_per_request(counted, ks)
            c.fanout_hist = (fan.groupBy("opsets", "bottleneck").agg(F.count(F.lit(1)).alias("requests"))
                             .orderBy("opsets", "bottleneck").toPandas())
            c.server_load = tr.server_load(spark, ks, opts.servers, opts.replication).toPandas()
        else:
            c.extra_reasons["fanout"] = "fan-out disabled for this run"
        step(STEPS[6])
        if ops is None and opts.slack_replay:
            reason = replay.available()
            if reason is None:
                ops = replay.replay_ops(spark, df, reqs, servers=opts.servers, replication=opts.replication,
                                        max_requests=opts.slack_requests)
            else:
                slack_reason = reason
        if ops is not None:
            c.slack = slack_mod.slack_bounds(ops).toPandas()
        else:
            c.slack_reason = slack_reason or "slack replay disabled for this run"
        return c
    finally:
        for d in cached:
            d.unpersist()


def _spark_gaps(reqs: DataFrame, t0: float, window_s: float, windows: int) -> dict[str, float | None]:
    """Inter-arrival statistics in Spark (traces too large for `arrivals.gap_stats` on the driver):
    p50/p99 by `percentile_approx` (accuracy 10 000)."""
    row = _row(tr.inter_arrivals(reqs, t0, window_s, windows).agg(
        F.count(F.lit(1)).alias("n"), F.avg("gap").alias("mean"), F.stddev_pop("gap").alias("std"),
        F.percentile_approx("gap", [0.5, 0.99], 10000).alias("q"),
    ))
    q = row.get("q") or [None, None]
    return {"n": row.get("n"), "mean": row.get("mean"), "std": row.get("std"), "p50": q[0], "p99": q[1]}


def _hot_sets(
    spark: SparkSession, df: DataFrame, cand: pd.DataFrame, distinct: int, t0: float, window_s: float,
    opts: Options,
) -> pd.DataFrame:
    """Exact per-window top-`hot_n` keys, counting candidate keys only when that provably suffices.

    `cand` = the most accessed keys (key, count), ranked; when it carries `per_window` (the keys' counts per
    window, from `transforms.key_counts_by_window`), the candidates' hot sets are ranked here on the driver
    instead of counted by another pass over `df`."""
    all_keys = len(cand) >= distinct
    if "per_window" in cand.columns:
        hot = _hot_from_counts(cand, opts.windows, opts.hot_n)
    else:
        only = None if all_keys else spark.createDataFrame(cand[["key"]])
        hot = tr.hot_set_by_window(tr.window_key_counts(df, t0, window_s, opts.windows, only),
                                   opts.hot_n).toPandas()
    if all_keys:
        return hot
    floor = int(cand["count"].min())  # any non-candidate key has at most this many accesses in total
    nth = hot.groupby("window")["count"].min()
    full = hot.groupby("window")["rank"].max()
    exact = len(nth) == opts.windows and bool(((nth > floor) & (full == opts.hot_n)).all())
    if exact:
        return hot
    return tr.hot_set_by_window(tr.window_key_counts(df, t0, window_s, opts.windows), opts.hot_n).toPandas()


def _hot_from_counts(cand: pd.DataFrame, windows: int, hot_n: int) -> pd.DataFrame:
    """`transforms.hot_set_by_window` of the candidates' (window, key, count) > 0 triples, on the driver:
    window (int32), rank (int32; 1 = hottest, ties by key), key, count (int64), ordered by window, rank."""
    import numpy as np
    import pandas as pd

    n = len(cand)
    counts = (np.stack([np.asarray(v, dtype=np.int64) for v in cand["per_window"]]) if n
              else np.zeros((0, windows), dtype=np.int64))
    long = pd.DataFrame({
        "window": np.tile(np.arange(windows, dtype=np.int32), n),
        "key": np.repeat(cand["key"].to_numpy(dtype=object), windows),
        "count": counts.reshape(-1),
    })
    long = long[long["count"] > 0].sort_values(["window", "count", "key"], ascending=[True, False, True],
                                               kind="stable")
    long["rank"] = (long.groupby("window").cumcount() + 1).astype(np.int32)
    hot = long[long["rank"] <= hot_n]
    return hot[["window", "rank", "key", "count"]].reset_index(drop=True)


def _latency(reqs: DataFrame, c: Collected) -> None:
    with_lat = reqs.where(F.col("latency_us").isNotNull())
    row = _row(with_lat.agg(
        F.corr(F.col("size").cast("double"), F.col("latency_us")).alias("corr"),
        F.percentile_approx("latency_us", [i / 10 for i in range(1, 10)], 10000).alias("bounds"),
    ))
    c.latency_corr = row.get("corr")
    bounds = [float(b) for b in (row.get("bounds") or [])]
    c.latency_deciles = tr.latency_deciles(reqs, bounds).toPandas()
