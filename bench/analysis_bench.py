"""Characterization speed: Spark local[2] (analysis.pipeline) vs DuckDB doing the same work on the same
Parquet files.

    .venv/bin/python bench/analysis_bench.py [--rows 10000000] [--data DIR] [--repeat 2]

"Same work" = every table the summary needs for sizes, popularity and value sizes (plus arrivals), by the
same plan on both engines: one aggregation by request (first ts, size, bytes), one by key (count, largest
value size, accesses per hot-set window), then from those: multiget-size histogram, count-of-counts, top
keys, value-size histogram, per-window hot sets ranked over the 2 000 most accessed keys (with the same
exactness check and full (window, key) fallback), arrival rate, inter-arrival count/mean/std/p50/p99
(nearest rank: DuckDB's quantile_disc). Where each engine finishes the small request-level tables is its own
business (Spark's pipeline collects arrival times and sizes and finishes them with numpy; DuckDB in SQL).
Answers are compared table by table (gap statistics included).
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

WINDOWS, RATE_WINDOWS, HOT_N, TOP_N, HOT_CANDIDATES = 10, 100, 100, 20, 2000


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
    gaps = pd.DataFrame({k: [c.gaps[k]] for k in ("n", "mean", "p50", "p99")})
    return {"size_hist": c.size_hist, "coc": c.count_of_counts, "top": c.top_keys, "vsh": c.value_size_hist,
            "hot": c.hot_sets, "rate": c.rate, "gaps": gaps}, dt


def run_duckdb(paths: list[Path], src: str | None = None) -> tuple[dict[str, pd.DataFrame], float]:
    """The plan of `analysis.pipeline.characterize`, in DuckDB SQL: one aggregation by request, one by key
    with the per-window counts as FILTER counts, the per-window hot sets ranked over the 2 000 most
    accessed keys with the same exactness check (and the same full (window, key) fallback). `src` replaces
    the rows' source (default: `read_parquet` of `paths`)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 2")
    src = src or "read_parquet([" + ",".join(f"'{p}'" for p in paths) + "])"
    t = time.perf_counter()
    con.execute(f"CREATE TEMP TABLE reqs AS SELECT request_id, min(ts) AS ts, count(*) AS size, "
                f"sum(value_size) AS bytes FROM {src} GROUP BY request_id")
    t0, t1 = con.execute("SELECT min(ts), max(ts) FROM reqs").fetchone()  # type: ignore[misc]
    w, rw = (t1 - t0) / WINDOWS, (t1 - t0) / RATE_WINDOWS
    win = f"least(floor((ts - {t0}) / {w})::INT, {WINDOWS - 1})"
    per = ", ".join(f"count(*) FILTER (WHERE win = {i}) AS w{i}" for i in range(WINDOWS))
    con.execute(f"CREATE TEMP TABLE keys AS SELECT key, count(*) AS count, max(value_size) AS value_size, {per} "
                f"FROM (SELECT key, value_size, {win} AS win FROM {src}) GROUP BY key")
    con.execute(f"CREATE TEMP TABLE cand AS SELECT * FROM keys ORDER BY count DESC, key LIMIT {HOT_CANDIDATES}")
    wcols = ", ".join(f"w{i}" for i in range(WINDOWS))
    q = {
        "size_hist": "SELECT size, count(*) AS requests FROM reqs GROUP BY size ORDER BY size",
        "coc": "SELECT count, count(*) AS keys FROM keys GROUP BY count ORDER BY count DESC",
        "top": f"SELECT key, count, count / (SELECT sum(count) FROM keys) AS share FROM cand "
               f"ORDER BY count DESC, key LIMIT {TOP_N}",
        "vsh": "SELECT value_size, count(*) AS keys, sum(count) AS accesses FROM keys "
               "WHERE value_size IS NOT NULL GROUP BY value_size ORDER BY value_size",
        "hot": f"SELECT win AS \"window\", row_number() OVER (PARTITION BY win ORDER BY count DESC, key) AS rank, "
               f"key, count FROM (SELECT key, substr(w, 2)::INT AS win, c AS count FROM "
               f"(UNPIVOT cand ON {wcols} INTO NAME w VALUE c) WHERE c > 0) QUALIFY rank <= {HOT_N} "
               f"ORDER BY win, rank",
        "rate": f"SELECT r.w AS \"window\", r.w * {rw} AS start, coalesce(c.n, 0) AS requests, "
                f"coalesce(c.n, 0) / {rw} AS rate FROM range({RATE_WINDOWS}) r(w) LEFT JOIN "
                f"(SELECT least(floor((ts - {t0}) / {rw})::INT, {RATE_WINDOWS - 1}) AS w, count(*) AS n "
                f"FROM reqs GROUP BY 1) c USING (w) ORDER BY r.w",
    }
    out = {name: con.execute(sql).df() for name, sql in q.items()}
    # the pipeline's exactness check: every non-candidate key has fewer accesses in total than the
    # HOT_N-th count of every window; otherwise rank all (window, key) pairs
    floor = con.execute("SELECT min(count) FROM cand").fetchone()[0]  # type: ignore[index]
    nth = out["hot"].groupby("window")["count"].min()
    full = out["hot"].groupby("window")["rank"].max()
    distinct = int(out["coc"]["keys"].sum())
    if distinct > HOT_CANDIDATES and not (len(nth) == WINDOWS and ((nth > floor) & (full == HOT_N)).all()):
        out["hot"] = con.execute(
            f"SELECT win AS \"window\", row_number() OVER (PARTITION BY win ORDER BY count DESC, key) AS rank, "
            f"key, count FROM (SELECT {win} AS win, key, count(*) AS count FROM {src} GROUP BY ALL) "
            f"QUALIFY rank <= {HOT_N} ORDER BY win, rank").df()
    gaps = con.execute(
        f"SELECT count(gap), avg(gap), stddev_pop(gap), quantile_disc(gap, [0.5, 0.99]) FROM ("
        f"SELECT ts - lag(ts) OVER (PARTITION BY least(floor((ts - {t0}) / {rw})::INT, "
        f"{RATE_WINDOWS - 1}) ORDER BY ts, request_id) AS gap FROM reqs)").fetchone()
    dt = time.perf_counter() - t
    assert gaps is not None
    out["gaps"] = pd.DataFrame({"n": [gaps[0]], "mean": [gaps[1]], "p50": [gaps[3][0]], "p99": [gaps[3][1]]})
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
