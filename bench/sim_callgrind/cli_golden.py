"""Golden `tailtune simulate --json` outputs for a set of cases (Cassandra core, replica selection, value sizes,
server speeds, writes, closed loop, shorthands; memcached batching and chisel), wall-time keys left out.

Usage: python bench/sim_callgrind/cli_golden.py > out.json   (with PYTHONPATH=DIR:. to use another kvsim build)
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

WALL = {"sim_wall_s", "events_per_s"}


def trace(path: Path) -> Path:
    rng = np.random.default_rng(3)
    n = 3000
    rid = np.repeat(np.arange(n // 3), 3)
    keys = rng.integers(0, 4000, n)
    cols = {
        "request_id": rid,
        "ts": rid * 1e-3,
        "key": [f"k{x}" for x in keys],
        "value_size": np.where(keys % 10 == 0, 524288, 1024).astype(np.int64),
        "op": np.where(np.arange(n) % 5 == 0, "set", "get"),
    }
    out = path / "t.parquet"
    pq.write_table(pa.table(cols), out)
    return out


CASES: list[list[str]] = [
    ["--policy", "fifo", "--no-sizes"],
    ["--policy", "rein", "--param", "k=3", "--no-sizes"],
    ["--policy", "rein-sds", "--no-sizes", "--warmup", "0.2"],
    ["--policy", "rein"],
    ["--policy", "fifo", "--replica", "ds"],
    ["--policy", "c3"],
    ["--policy", "heron", "--param", "busy_capacity=4"],
    ["--policy", "tailx"],
    ["--policy", "duplicate", "--no-sizes"],
    ["--policy", "speculative", "--replica", "c3"],
    ["--policy", "rein", "--size-aware-cost"],
    ["--policy", "fifo", "--slow-servers", "2", "--slow-factor", "3", "--writes-from-op"],
    ["--policy", "rein", "--replica", "c3", "--client-model", "closed", "--threads", "8", "--think-ms", "0.2"],
    ["--policy", "fifo", "--write-fraction", "0.3", "--slowdown-interval-ms", "20", "--slowdown-fraction", "0.25"],
    ["--policy", "batching"],
    ["--policy", "chisel"],
    ["--policy", "chisel", "--param", "split_keys=2", "--param", "merge=2"],
]


def main() -> None:
    from tailtune.cli import main as cli

    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as d:
        path = trace(Path(d))
        for case in CASES:
            buf, err = io.StringIO(), io.StringIO()
            code = 0
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
                try:
                    cli(["simulate", "--trace", str(path), "--servers", "8", "--seed", "2", *case, "--json"])
                except SystemExit as exc:
                    code = int(exc.code) if isinstance(exc.code, int) else 1
            key = " ".join(case)
            if code != 0:
                out[key] = {"exit": code, "stderr": err.getvalue().strip().splitlines()[-1:]}
                continue
            obj = json.loads(buf.getvalue())
            out[key] = {k: v for k, v in obj.items() if k not in WALL}
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
