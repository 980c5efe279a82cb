"""Characterization speed: Spark local[2] (analysis.pipeline) vs DuckDB doing the same work on the same
Parquet files.

    .venv/bin/python bench/analysis_bench.py [--rows 10000000] [--data DIR] [--repeat 2]

"Same work" = every table the summary needs for sizes, popularity and value sizes (plus arrivals):
requests by id, multiget-size histogram, (window, key) counts, per-key counts, count-of-counts, top keys,
per-window hot sets, value-size histogram, arrival rate, inter-arrival stats. Both engines then share the same
driver-side summary code (timed separately). Answers are compared table by table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WINDOWS, RATE_WINDOWS, HOT_N, TOP_N = 10, 100, 100, 20


def generate(data: Path, rows: int, files: int = 4, seed: int = 1) -> list[Path]:
    """Zipf(0.9) keys over rows/10 keys, lognormal(1.5, 0.8) multiget sizes, Pareto value sizes."""
    paths = [data / f"part-{i}.parquet" for i in range(files)]
    if all(p.exists() for p in paths):
        return paths
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, np.rint(rng.lognormal(1.5, 0.8, rows))).astype(np.int64)
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), rows)) + 1]
    rid = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)[:rows]
    ts = np.repeat(np.sort(rng.uniform(0, 1800.0, sizes.size)), sizes)[:rows]
    n_keys = rows // 10
    p = np.arange(1, n_keys + 1, dtype=np.float64) ** -0.9
    ranks = rng.choice(n_keys, size=rows, p=p / p.sum())
    vsize = np.rint(200 * (1 + rng.pareto(1.2, n_keys))).astype(np.int64)[ranks]
    keys = pc.binary_join_element_wise("key:", pc.cast(pa.array(ranks), pa.string()), "")
    table = pa.table({"request_id": rid, "ts": ts, "key": keys, "value_size": vsize})
    step = -(-rows // files)
    for i, path in enumerate(paths):
        pq.write_table(table.slice(i * step, step), path, row_group_size=1 << 20)
    return paths


def run_spark(paths: list[Path]) -> tuple[dict[str, pd.DataFrame], float]:
    from analysis.pipeline import Options, characterize
    from jobs.characterize import spark_session

    spark = spark_session("local[2]", "analysis-bench")
    t = time.perf_counter()
    c = characterize(spark, spark.read.parquet(*map(str, paths)), Options(fanout=False, slack_replay=False))
    dt = time.perf_counter() - t
    return {"size_hist": c.size_hist, "coc": c.count_of_counts, "top": c.top_keys, "vsh": c.value_size_hist,
            "hot": c.hot_sets, "rate": c.rate}, dt


def run_duckdb(paths: list[Path]) -> tuple[dict[str, pd.DataFrame], float]:
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 2")
    src = "read_parquet([" + ",".join(f"'{p}'" for p in paths) + "])"
    t = time.perf_counter()
    con.execute(f"CREATE TEMP TABLE reqs AS SELECT request_id, min(ts) AS ts, count(*) AS size, "
                f"sum(value_size) AS bytes FROM {src} GROUP BY request_id")
    t0, t1 = con.execute("SELECT min(ts), max(ts) FROM reqs").fetchone()  # type: ignore[misc]
    w, rw = (t1 - t0) / WINDOWS, (t1 - t0) / RATE_WINDOWS
    con.execute(f"CREATE TEMP TABLE wkc AS SELECT "
                f"least(floor((ts - {t0}) / {w})::INT, {WINDOWS - 1}) AS win, key, count(*) AS count, "
                f"max(value_size) AS value_size, sum(value_size) AS bytes FROM {src} GROUP BY ALL")
    con.execute("CREATE TEMP TABLE keys AS SELECT key, sum(count) AS count, max(value_size) AS value_size, "
                "sum(bytes) AS bytes FROM wkc GROUP BY key")
    q = {
        "size_hist": "SELECT size, count(*) AS requests FROM reqs GROUP BY size ORDER BY size",
        "coc": "SELECT count, count(*) AS keys FROM keys GROUP BY count ORDER BY count DESC",
        "top": f"SELECT key, count, count / sum(count) OVER () AS share FROM keys "
               f"ORDER BY count DESC, key LIMIT {TOP_N}",
        "vsh": "SELECT value_size, count(*) AS keys, sum(count) AS accesses FROM keys "
               "WHERE value_size IS NOT NULL GROUP BY value_size ORDER BY value_size",
        "hot": f"SELECT win AS \"window\", row_number() OVER (PARTITION BY win ORDER BY count DESC, key) "
               f"AS rank, key, count FROM wkc QUALIFY rank <= {HOT_N} ORDER BY win, rank",
        "rate": f"SELECT r.w AS \"window\", r.w * {rw} AS start, coalesce(c.n, 0) AS requests, "
                f"coalesce(c.n, 0) / {rw} AS rate FROM range({RATE_WINDOWS}) r(w) LEFT JOIN "
                f"(SELECT least(floor((ts - {t0}) / {rw})::INT, {RATE_WINDOWS - 1}) AS w, count(*) AS n "
                f"FROM reqs GROUP BY 1) c USING (w) ORDER BY r.w",
    }
    out = {name: con.execute(sql).df() for name, sql in q.items()}
    con.execute(f"SELECT count(gap), avg(gap), stddev_pop(gap), quantile_cont(gap, [0.5, 0.99]) FROM ("
                f"SELECT ts - lag(ts) OVER (PARTITION BY least(floor((ts - {t0}) / {rw})::INT, "
                f"{RATE_WINDOWS - 1}) ORDER BY ts, request_id) AS gap FROM reqs)").fetchall()
    dt = time.perf_counter() - t
    con.close()
    return out, dt


def same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> dict[str, bool]:
    res: dict[str, bool] = {}
    for k in a:
        x, y = a[k].reset_index(drop=True), b[k].reset_index(drop=True)
        res[k] = x.shape == y.shape and all(
            np.allclose(x[c].to_numpy(float), y[c].to_numpy(float)) if x[c].dtype.kind in "fiu"
            else (x[c].astype(str).to_numpy() == y[c].astype(str).to_numpy()).all()
            for c in x.columns)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--data", type=Path, default=Path(".tailtune/bench/analysis"))
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    t = time.perf_counter()
    paths = generate(a.data / f"rows-{a.rows}", a.rows)
    size_mb = sum(p.stat().st_size for p in paths) / 1e6
    print(f"data: {a.rows:,} rows, {len(paths)} files, {size_mb:.0f} MB ({time.perf_counter() - t:.1f} s)")
    duck_t: list[float] = []
    spark_t: list[float] = []
    duck: dict[str, Any] = {}
    sp: dict[str, Any] = {}
    for _ in range(a.repeat):
        duck, dt = run_duckdb(paths)
        duck_t.append(dt)
        sp, st = run_spark(paths)
        spark_t.append(st)
        print(f"duckdb {dt:.2f} s   spark local[2] {st:.2f} s   ratio {st / dt:.2f}x")
    print("same answers:", same(sp, duck))
    best_d, best_s = min(duck_t), min(spark_t)
    print(f"best: duckdb {best_d:.2f} s, spark {best_s:.2f} s, ratio {best_s / best_d:.2f}x")


if __name__ == "__main__":
    main()
