"""Trace-generator speed and memory: rows/s and peak RSS per profile and output format.

Each measurement runs in a fresh subprocess (so peak RSS is that run's own) and generates about `--rows` rows
(requests = rows / the profile's model mean size). Output `none` times generation alone (batches consumed
and dropped); the others time `write_trace` end to end, including the exact distinct-key count.

    .venv/bin/python -m bench.generate_bench --rows 10000000
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROFILES = ("soundcloud", "facebook", "constant50", "bimodal", "mice-elephant")
FORMATS = ("none", "parquet", "csv", "csv.zst")


def _one(profile: str, fmt: str, rows: int, seed: int) -> dict[str, Any]:
    from ingest.generate import generate_batches, make_profile, write_trace

    requests = max(1, round(rows / make_profile(profile).expected()["mean_size"]))
    started = time.perf_counter()
    if fmt == "none":
        done = sum(b.num_rows for b in generate_batches(profile, requests, seed))
        size = 0
    else:
        with tempfile.TemporaryDirectory() as tmp:
            stats = write_trace(Path(tmp) / f"trace.{fmt}", profile, requests, seed)
            done, size = stats.rows, stats.bytes
    elapsed = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "profile": profile,
        "format": fmt,
        "requests": requests,
        "rows": done,
        "seconds": round(elapsed, 2),
        "rows_per_s": round(done / elapsed),
        "peak_rss_mib": round(peak_kib / 1024),
        "bytes": size,
    }


def main(argv: list[str] | None = None) -> None:
    fmt_class = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt_class)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=PROFILES)
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--one", nargs=2, metavar=("PROFILE", "FORMAT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.one[0], args.one[1], args.rows, args.seed)))
        return
    cpu = platform.processor() or platform.machine()
    print(f"# {platform.node()} {cpu}, python {platform.python_version()}, rows/run {args.rows:,}")
    print("| profile | output | requests | rows | seconds | rows/s | peak RSS MiB | file MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for profile in args.profiles:
        for fmt in args.formats:
            cmd = [sys.executable, "-m", "bench.generate_bench", "--rows", str(args.rows)]
            cmd += ["--seed", str(args.seed)]
            done = subprocess.run([*cmd, "--one", profile, fmt], check=True, capture_output=True, text=True)
            r = json.loads(done.stdout)
            print(
                f"| {r['profile']} | {r['format']} | {r['requests']:,} | {r['rows']:,} | {r['seconds']} "
                f"| {r['rows_per_s']:,} | {r['peak_rss_mib']} | {r['bytes'] / 1e6:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
