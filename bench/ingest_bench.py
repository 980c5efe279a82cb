"""Ingest throughput and peak memory on a large canonical CSV (default 10 M rows, written by this script).

    .venv/bin/python bench/ingest_bench.py --rows 10000000 --out /tmp/ingest-bench

The CSV (request_id,ts,key,value_size; multigets of 1-16 keys, 1 M distinct keys) is generated with numpy and
pyarrow in chunks; the ingest runs in a child process (`tailtune ingest --json` through the real CLI, in a fresh
TAILTUNE_HOME), so its peak RSS is the child's ru_maxrss.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv


def write_csv(path: Path, rows: int, seed: int = 1, chunk: int = 1_000_000) -> None:
    rng = np.random.default_rng(seed)
    written = 0
    next_id = 0
    t = 0.0
    with pacsv.CSVWriter(
        str(path),
        pa.schema([("request_id", pa.int64()), ("ts", pa.float64()), ("key", pa.string()), ("value_size", pa.int64())]),
    ) as w:
        while written < rows:
            n = min(chunk, rows - written)
            sizes = rng.integers(1, 17, size=n // 8 + 2)
            ids = np.repeat(np.arange(next_id, next_id + len(sizes)), sizes)[:n]
            # keys of one request are distinct: a per-request base plus the offset within it
            offs = np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)[:n]
            keys = (rng.integers(0, 1_000_000, size=len(sizes))[ids - next_id] * 16 + offs) % 1_000_000
            gaps = rng.exponential(1e-4, size=len(sizes))
            ts = (t + np.cumsum(gaps))[ids - next_id]
            t = float(ts[-1])
            next_id = int(ids[-1]) + 1
            batch = pa.record_batch(
                {
                    "request_id": ids,
                    "ts": np.round(ts, 6),
                    "key": pa.array(keys).cast(pa.string()),
                    "value_size": rng.integers(1, 100_000, size=n),
                }
            )
            w.write_batch(batch)
            written += n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--out", type=Path, default=Path("/tmp/ingest-bench"))
    ap.add_argument("--keep", action="store_true", help="keep the generated CSV")
    ap.add_argument("--ingest-args", default="", help="extra `tailtune ingest` options, e.g. '--unsorted sort'")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / f"canonical-{args.rows}.csv"
    if not csv_path.exists():
        t0 = time.perf_counter()
        write_csv(csv_path, args.rows)
        print(f"wrote {csv_path} ({csv_path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")
    home = args.out / f"home-{os.getpid()}"
    env = {**os.environ, "TAILTUNE_HOME": str(home)}
    tailtune = Path(sys.executable).with_name("tailtune")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(tailtune), "ingest", str(csv_path), "--json", *args.ingest_args.split()],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"ingest failed ({proc.returncode}): {proc.stderr}")
    summary = json.loads(proc.stdout)
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    size = sum(p.stat().st_size for p in (home / "datasets" / summary["id"]).glob("*.parquet"))
    result = {
        "ingest_args": args.ingest_args,
        "rows": summary["rows"],
        "requests": summary["requests"],
        "distinct_keys": summary["distinct_keys"],
        "csv_mb": round(csv_path.stat().st_size / 1e6, 1),
        "parquet_mb": round(size / 1e6, 1),
        "wall_s": round(wall, 2),
        "rows_per_s": round(summary["rows"] / wall),
        "peak_rss_mib": round(peak_mib),
    }
    print(json.dumps(result, indent=2))
    import shutil

    shutil.rmtree(home, ignore_errors=True)
    if not args.keep:
        csv_path.unlink()


if __name__ == "__main__":
    main()
