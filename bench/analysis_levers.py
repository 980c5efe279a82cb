"""What two levers (vectorized partial aggregation, integer key ids) would buy the characterization's two heavy
aggregations, each measured alone (noop sink) and interleaved in one Spark local[2] session.

    .venv/bin/python bench/analysis_levers.py [--rows 10000000] [--repeat 3] [--check] [--whole 0]

Per key (count, largest value size, accesses per each of 10 time windows — `transforms.key_counts_by_window`)
and per request (first ts, size, bytes):

* the pipeline's plan: Spark's hash aggregation (map-side partial + final);
* lever 1, vectorized partial aggregation: `mapInArrow` + `pyarrow.Table.group_by` over each partition's
  rows, Spark only for the final merge; plus the JVM→Python Arrow transfer alone (no aggregation);
* lever 1' (same idea without the transfer): the Python workers read their Parquet row groups themselves
  (pyarrow), aggregate (dictionary-encode + numpy bincount), and Spark merges;
* lever 2, integer key ids: Spark's aggregation grouped by an int64 `key_id` (dense, by first appearance),
  and lever 1' + 2 (numpy bincount over the dense ids in the Python workers);
* DuckDB's per-key aggregation by `key` and by `key_id` (what the same plan costs the other engine).

`--whole N` then runs the whole bench (`analysis_bench.run_spark` / `run_duckdb`, same answers checked) N times
on the bench files and on the key-id copy with `key` := `key_id` in both engines, alternating: an upper bound on
lever 2's gain for the whole characterization (no key strings joined back for the top keys and hot sets).

CPU: `tree-cpu` = user + system time of every process below this one (the JVM and the Python workers, from
/proc) — the figure that counts, since Spark's `executorCpuTime` (also printed, per stage) leaves the Python
workers out. `--check` first asserts every variant's table equals the pipeline's exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.analysis_bench import generate

W = 10
MIN = np.iinfo(np.int64).min
TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of every descendant process, by pid."""
    kids: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            s = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        f = s[s.rindex(")") + 2 :].split()
        kids.setdefault(int(f[1]), []).append(int(d))
        cpu[int(d)] = (int(f[11]) + int(f[12])) / TICK
    out: dict[int, float] = {}
    todo = list(kids.get(os.getpid(), []))
    while todo:
        p = todo.pop()
        out[p] = cpu.get(p, 0.0)
        todo.extend(kids.get(p, []))
    return out


def with_key_ids(paths: list[Path], out: Path) -> list[Path]:
    """The same files plus `key_id` (int64, dense 0..n-1 by first appearance over all files)."""
    dst = [out / p.name for p in paths]
    if all(p.exists() for p in dst):
        return dst
    out.mkdir(parents=True, exist_ok=True)
    tables = [pq.read_table(p) for p in paths]
    ids = pc.cast(
        pc.dictionary_encode(pa.concat_arrays([t["key"].combine_chunks() for t in tables])).indices, pa.int64()
    )
    start = 0
    for t, p in zip(tables, dst, strict=True):
        pq.write_table(t.append_column("key_id", ids.slice(start, t.num_rows)), p, row_group_size=1 << 20)
        start += t.num_rows
    return dst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--data", type=Path, default=Path(".tailtune/bench/analysis"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1_000_000, help="spark.sql.execution.arrow.maxRecordsPerBatch")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--whole", type=int, default=0, help="whole-pipeline runs, string keys vs key_id")
    a = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from analysis import transforms as tr
    from jobs.characterize import spark_session

    raw_paths = generate(a.data / f"rows-{a.rows}", a.rows)
    kid_paths = with_key_ids(raw_paths, a.data / f"rows-{a.rows}-key-id")
    raw, kid = [str(p) for p in raw_paths], [str(p) for p in kid_paths]
    spark = spark_session("local[2]", "analysis-levers")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(a.batch))
    df = tr.normalize(spark.read.parquet(*raw))
    kdf = spark.read.parquet(*kid)
    first = df.agg(F.min("ts"), F.max("ts")).first()
    assert first is not None
    t0, ws = float(first[0]), (float(first[1]) - float(first[0])) / W

    def fragments(paths: list[str]) -> DataFrame:
        rgs = [(p, i) for p in paths for i in range(pq.ParquetFile(p).metadata.num_row_groups)]
        return spark.createDataFrame(rgs, "path string, rg int").repartition(2)

    fr, frk = fragments(raw), fragments(kid)

    def read(it: Iterator[pa.RecordBatch], cols: list[str]) -> pa.Table | None:
        parts = [
            pq.ParquetFile(p).read_row_group(rg, columns=cols)
            for b in it
            for p, rg in zip(b.column("path").to_pylist(), b.column("rg").to_pylist(), strict=True)
        ]
        return pa.concat_tables(parts) if parts else None

    pk = T.StructType(
        [
            T.StructField("key", T.StringType()),
            T.StructField("count", T.LongType()),
            T.StructField("value_size", T.LongType()),
        ]
        + [T.StructField(f"w{i}", T.LongType()) for i in range(W)]
    )
    pki = T.StructType([T.StructField("key_id", T.LongType()), *pk.fields[1:]])
    rp = T.StructType(
        [
            T.StructField("request_id", T.LongType()),
            T.StructField("ts", T.DoubleType()),
            T.StructField("size", T.LongType()),
            T.StructField("bytes", T.LongType()),
        ]
    )

    def key_group_by(t: pa.Table) -> pa.Table:
        win = pc.min_element_wise(pc.cast(pc.floor(pc.divide(pc.subtract(t["ts"], t0), ws)), pa.int32()), W - 1)
        cols = {"key": t["key"], "value_size": t["value_size"]}
        cols |= {f"w{i}": pc.fill_null(pc.cast(pc.equal(win, i), pa.int64()), 0) for i in range(W)}
        g = (
            pa.table(cols)
            .group_by("key", use_threads=False)
            .aggregate(
                [("key", "count", pc.CountOptions("all")), ("value_size", "max")] + [(f"w{i}", "sum") for i in range(W)]
            )
        )
        return g.select(["key", "key_count", "value_size_max"] + [f"w{i}_sum" for i in range(W)]).rename_columns(
            pk.names
        )

    def key_dense(idx: Any, n: int, t: pa.Table, names: Any | None) -> pa.RecordBatch:
        cnt = np.bincount(idx, minlength=n)
        mx = np.full(n, MIN, dtype=np.int64)
        np.maximum.at(mx, idx, t["value_size"].to_numpy())
        w = np.minimum(np.floor((t["ts"].to_numpy() - t0) / ws), W - 1)
        ok = ~np.isnan(w)
        per = np.bincount(idx[ok] * W + w[ok].astype(np.int64), minlength=n * W).reshape(n, W)
        keep: Any = slice(None) if names is not None else np.flatnonzero(cnt)
        cols = [
            names if names is not None else pa.array(keep),
            pa.array(cnt[keep]),
            pa.array(mx[keep], mask=mx[keep] == MIN),
        ] + [pa.array(per[keep, i]) for i in range(W)]
        return pa.RecordBatch.from_arrays(cols, names=(pk if names is not None else pki).names)

    def l1_key(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t = pa.Table.from_batches(list(it))
        if t.num_rows:
            yield from key_group_by(t).to_batches()

    def l1r_key(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t = read(it, ["key", "ts", "value_size"])
        if t is not None:
            d = pc.dictionary_encode(t["key"].combine_chunks(), null_encoding="encode")
            yield key_dense(d.indices.to_numpy().astype(np.int64), len(d.dictionary), t, d.dictionary)

    def l1r_l2_key(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t = read(it, ["key_id", "ts", "value_size"])
        if t is not None:
            ids = t["key_id"].to_numpy()
            yield key_dense(ids, int(ids.max()) + 1, t, None)

    def req_group_by(t: pa.Table) -> pa.Table:
        g = t.group_by("request_id", use_threads=False).aggregate(
            [("ts", "min"), ("request_id", "count", pc.CountOptions("all")), ("value_size", "sum")]
        )
        return g.select(["request_id", "ts_min", "request_id_count", "value_size_sum"]).rename_columns(rp.names)

    def l1_req(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t = pa.Table.from_batches(list(it))
        if t.num_rows:
            yield from req_group_by(t).to_batches()

    def l1r_req(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        t = read(it, ["request_id", "ts", "value_size"])
        if t is not None:
            yield from req_group_by(t).to_batches()

    def count_rows(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in it)]})

    def merge_key(p: DataFrame, col: str) -> DataFrame:
        return (
            p.groupBy(col)
            .agg(
                F.sum("count").alias("count"),
                F.max("value_size").alias("value_size"),
                *[F.sum(f"w{i}").alias(f"w{i}") for i in range(W)],
            )
            .select(col, "count", "value_size", F.array(*[f"w{i}" for i in range(W)]).alias("per_window"))
        )

    def spark_key(d: DataFrame, col: str) -> DataFrame:
        if col == "key":
            return tr.key_counts_by_window(d, t0, ws, W)
        w = tr.window_index(t0, ws, W).alias("window")
        per = [F.count(F.when(F.col("window") == F.lit(i), F.lit(1))).alias(f"w{i}") for i in range(W)]
        return (
            d.select(col, "value_size", w)
            .groupBy(col)
            .agg(F.count(F.lit(1)).alias("count"), F.max("value_size").alias("value_size"), *per)
            .select(col, "count", "value_size", F.array(*[f"w{i}" for i in range(W)]).alias("per_window"))
        )

    def merge_req(p: DataFrame) -> DataFrame:
        return p.groupBy("request_id").agg(
            F.min("ts").alias("ts"), F.sum("size").alias("size"), F.sum("bytes").alias("bytes")
        )

    key_cols = df.select("key", "ts", "value_size")
    req_cols = df.select("request_id", "ts", "value_size")
    cases: list[tuple[str, Callable[[], DataFrame]]] = [
        ("key: Spark by key (today)", lambda: spark_key(df, "key")),
        ("key: L1 mapInArrow + group_by", lambda: merge_key(key_cols.mapInArrow(l1_key, pk), "key")),
        ("key: L1 transfer only (no agg)", lambda: key_cols.mapInArrow(count_rows, "n long")),
        ("key: L1' pyarrow read + bincount", lambda: merge_key(fr.mapInArrow(l1r_key, pk), "key")),
        ("key: L2 Spark by key_id", lambda: spark_key(kdf, "key_id")),
        ("key: L1'+L2 read key_id + bincount", lambda: merge_key(frk.mapInArrow(l1r_l2_key, pki), "key_id")),
        ("req: Spark (today)", lambda: tr.requests(df).drop("latency_us")),
        ("req: L1 mapInArrow + group_by", lambda: merge_req(req_cols.mapInArrow(l1_req, rp))),
        ("req: L1' pyarrow read + group_by", lambda: merge_req(fr.mapInArrow(l1r_req, rp))),
    ]
    if a.check:
        import pandas as pd

        def pdf(d: DataFrame, col: str) -> pd.DataFrame:
            x = d.toPandas().sort_values(col, ignore_index=True)
            if "per_window" in x:
                x["per_window"] = x["per_window"].map(list)
            return x

        for ref, others, col in ((0, (1, 3), "key"), (4, (5,), "key_id"), (6, (7, 8), "request_id")):
            expect = pdf(cases[ref][1](), col)
            for i in others:
                pd.testing.assert_frame_equal(expect, pdf(cases[i][1](), col), check_exact=True)
                print("identical to", cases[ref][0], ":", cases[i][0], flush=True)

    sc = spark.sparkContext
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"

    def stages() -> dict[int, dict[str, Any]]:
        with urllib.request.urlopen(api) as r:
            return {int(s["stageId"]): s for s in json.load(r)}

    def run(name: str, make: Callable[[], DataFrame]) -> None:
        before, cpu0, t = set(stages()), tree_cpu(), time.perf_counter()
        make().write.format("noop").mode("overwrite").save()
        wall, cpu1 = time.perf_counter() - t, tree_cpu()
        time.sleep(0.3)  # let the status store catch up
        new = [s for i, s in sorted(stages().items()) if i not in before]
        ex = " + ".join(f"{s['executorCpuTime'] / 1e9:.2f}" for s in new)
        tree = sum(v - cpu0.get(p, 0.0) for p, v in cpu1.items())
        print(
            f"{name:38s} wall {wall:5.2f}  tree-cpu {tree:5.2f}  exec-cpu/stage {ex}  load {os.getloadavg()[0]:.2f}",
            flush=True,
        )

    for _, make in cases if a.repeat else []:  # warm-up (JIT, Python workers)
        make().write.format("noop").mode("overwrite").save()
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 2")
    win = f"least(floor((ts - {t0}) / {ws})::INT, {W - 1})"
    per = ", ".join(f"count(*) FILTER (WHERE win = {i}) AS w{i}" for i in range(W))
    src = "read_parquet([" + ",".join(f"'{p}'" for p in kid) + "])"
    for r in range(a.repeat):
        print(f"--- repeat {r + 1} {time.strftime('%H:%M:%S')}", flush=True)
        for name, make in cases:
            run(name, make)
        for col in ("key", "key_id"):
            t, c = time.perf_counter(), time.process_time()
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE k AS SELECT {col}, count(*) AS count, max(value_size) AS "
                f"value_size, {per} FROM (SELECT {col}, value_size, {win} AS win FROM {src}) GROUP BY {col}"
            )
            print(
                f"{'key: DuckDB by ' + col:38s} wall {time.perf_counter() - t:5.2f}  "
                f"cpu {time.process_time() - c:5.2f}  load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    if a.whole:
        whole(raw_paths, kid_paths, a.whole)


def whole(raw: list[Path], kid: list[Path], runs: int) -> None:
    """The bench's two engines on string keys vs int64 key ids (as `key`), alternating in one process."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    import bench.analysis_bench as ab
    from analysis import transforms as tr
    from jobs.characterize import spark_session

    spark_session("local[2]", "analysis-bench").conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    normalize = tr.normalize

    def int_keys(df: DataFrame) -> DataFrame:  # `key` := key_id, kept an int64 (normalize casts to string)
        return normalize(df.drop("key").withColumnRenamed("key_id", "key")).withColumn("key", F.col("key").cast("long"))

    kid_src = (
        "(SELECT request_id, ts, key_id AS key, value_size FROM read_parquet(["
        + ",".join(f"'{p}'" for p in kid)
        + "]))"
    )
    for r in range(runs + 1):  # the first round warms up the JVM
        for name, paths, ints in (("string key", raw, False), ("int key_id", kid, True)):
            c = time.process_time()
            duck, dt = ab.run_duckdb(paths, kid_src if ints else None)
            dc = time.process_time() - c
            tr.normalize = int_keys if ints else normalize  # type: ignore[assignment]
            c0 = tree_cpu()
            try:
                sp, st = ab.run_spark(paths)
            finally:
                tr.normalize = normalize  # type: ignore[assignment]
            sc = sum(v - c0.get(p, 0.0) for p, v in tree_cpu().items())
            same = all(ab.same(sp, duck).values())
            print(
                f"{'(warm-up) ' if r == 0 else ''}{name:11s} wall: duckdb {dt:5.2f} s spark {st:5.2f} s "
                f"{st / dt:4.2f}x   cpu: duckdb {dc:5.2f} s spark {sc:5.2f} s {sc / dc:4.2f}x   same={same}   "
                f"load {os.getloadavg()[0]:.2f} {time.strftime('%H:%M:%S')}",
                flush=True,
            )


if __name__ == "__main__":
    main()
