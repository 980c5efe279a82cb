"""Reading a Parquet trace holds about one batch at a time, not the file: Arrow's peak allocation stays far below
the file's size while its row groups stream through. (pyarrow's pre-buffering reader keeps every column chunk it
has read until the file is closed: a 5 GB trace cost 5 GB of memory to ingest.) Each pass runs in a fresh
process, whose Arrow pool peak (`max_memory`) is the pass's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]

_INGEST = """
import sys
from pathlib import Path
import pyarrow as pa
from ingest.formats import reader_class
from ingest.formats.base import ReaderOptions
from ingest.formats.source import Source
from ingest.validate import ErrorPolicy, ErrorSink
import ingest.formats.parquet as parquet_format
parquet_format._ROWS_PER_BATCH = 20_000  # batches far smaller than the file (the reader's default: 2**20 rows)
path = sys.argv[1]
sink = ErrorSink(path, max_errors=10, policy=ErrorPolicy.FAIL)
reader = reader_class("parquet")(Source.of(Path(path)), ReaderOptions(), sink)
reader.columns()
rows = sum(chunk.batch.num_rows for chunk in reader.chunks())
print(rows, pa.default_memory_pool().max_memory())
"""

_SAMPLE = """
import sys
from pathlib import Path
import pyarrow as pa
from tuner.sampling import Window, sample_parquet
sample, _ = sample_parquet([Path(sys.argv[1])], [Window(0, 0.0, 1.0)], batch_rows=20_000)
print(sample.num_rows, pa.default_memory_pool().max_memory())
"""


def _trace(path: Path, rows: int, group_rows: int) -> int:
    """An incompressible trace (random keys and sizes) of many row groups; returns the file's size."""
    rng = np.random.default_rng(7)
    table = pa.table({
        "request_id": np.arange(rows, dtype=np.int64),
        "ts": np.arange(rows, dtype=np.float64) * 1e-3,
        "key": pa.array([f"k{v:016x}" for v in rng.integers(0, 2**63, rows)]),
        "value_size": rng.integers(1, 1 << 20, rows),
    })
    pq.write_table(table, path, row_group_size=group_rows, compression="zstd")
    return path.stat().st_size


def _run(script: str, path: Path) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", script, str(path)], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    rows, peak = out.stdout.split()
    return int(rows), int(peak)


def test_ingest_reader_streams_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.parquet"
    size = _trace(path, 1_500_000, 20_000)
    rows, peak = _run(_INGEST, path)
    assert rows == 1_500_000
    assert peak < size // 4, f"Arrow held {peak:,} bytes at once reading a {size:,}-byte file"


def test_sampling_pass_streams_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.parquet"
    size = _trace(path, 1_500_000, 20_000)
    rows, peak = _run(_SAMPLE, path)
    assert rows == 1000  # ts 0 .. 0.999 s
    assert peak < size // 4, f"Arrow held {peak:,} bytes at once sampling a {size:,}-byte file"
