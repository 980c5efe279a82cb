"""What `tailtune simulate` of a Parquet trace file loads: not `pyarrow.dataset` (`pq.read_table` imports it, and
pandas with it), whose import a user would wait for before every replay although one file needs none of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from ingest import generate

ROOT = Path(__file__).resolve().parents[2]

_RUN = """
import runpy, sys, json
sys.argv = ["tailtune", "simulate", "--trace", sys.argv[1], "--policy", "fifo", "--servers", "16", "--json"]
try:
    runpy.run_module("tailtune", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "loaded": sorted(m for m in ("pyarrow.dataset",) if m in sys.modules)}),
      file=sys.stderr)
"""


def test_simulate_of_a_parquet_trace_does_not_import_pyarrow_dataset(tmp_path: Path) -> None:
    trace = tmp_path / "fb.parquet"
    pq.write_table(generate.generate_table("facebook", 300, 3), trace)  # sizes differ: the size-aware path
    run = subprocess.run(
        [sys.executable, "-c", _RUN, str(trace)], cwd=ROOT, env=dict(os.environ), capture_output=True, text=True,
        timeout=600, check=False,
    )
    verdict = json.loads(run.stderr.strip().splitlines()[-1])
    assert verdict["code"] in (0, None), run.stderr
    out = json.loads(run.stdout)
    assert out["requests"] == 300 and out["demand"]["model"] == "size"
    assert verdict["loaded"] == []
