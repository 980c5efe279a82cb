"""Same inputs → byte-identical files; batches are whole requests; output independent of the batch size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from ingest.generate import BLOCK_REQUESTS, GENERATED_SCHEMA, generate_batches, generate_table, write_trace


@pytest.mark.parametrize("suffix", ["csv", "csv.gz", "csv.zst", "parquet"])
def test_same_seed_gives_byte_identical_files(tmp_path: Path, suffix: str) -> None:
    a = write_trace(tmp_path / f"a.{suffix}", "facebook", 3000, 42)
    b = write_trace(tmp_path / f"b.{suffix}", "facebook", 3000, 42)
    write_trace(tmp_path / f"c.{suffix}", "facebook", 3000, 43)
    assert (tmp_path / f"a.{suffix}").read_bytes() == (tmp_path / f"b.{suffix}").read_bytes()
    assert (tmp_path / f"a.{suffix}").read_bytes() != (tmp_path / f"c.{suffix}").read_bytes()
    assert a.rows == b.rows and a.distinct_keys == b.distinct_keys


def test_output_does_not_depend_on_batch_size() -> None:
    # More requests than one internal block, so a block boundary falls inside the trace.
    n = BLOCK_REQUESTS + 1234
    big = generate_table("mice-elephant", n, 5, mice=1, elephants=3, batch_requests=100_000)
    small = generate_table("mice-elephant", n, 5, mice=1, elephants=3, batch_requests=7_777)
    assert big.equals(small)


def test_batches_hold_exactly_batch_requests_whole_requests() -> None:
    batches = list(generate_batches("soundcloud", 2500, 3, batch_requests=1000))
    assert [b.schema for b in batches] == [GENERATED_SCHEMA] * 3
    ids = [np.unique(b.column("request_id").to_numpy()) for b in batches]
    assert [i.tolist() for i in ids] == [
        list(range(0, 1000)),
        list(range(1000, 2000)),
        list(range(2000, 2500)),
    ]


def test_parquet_is_zstd_with_provenance(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    write_trace(out, "mice-elephant", 100, 9, rate=50.0, mix="5:1")
    meta = pq.ParquetFile(out).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    provenance = pq.read_schema(out).metadata[b"tailtune.generator"].decode()
    assert '"mix": "5:1"' in provenance and '"seed": 9' in provenance and '"rate": 50.0' in provenance


def test_csv_has_header_and_canonical_columns(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    write_trace(out, "constant50", 2, 1)
    lines = out.read_text().splitlines()
    assert lines[0] == "request_id,ts,key,value_size,op"
    assert len(lines) == 1 + 2 * 50
    request_id, ts, key, value_size, op = lines[1].split(",")
    assert (request_id, op) == ("0", "get") and key.startswith("k") and int(value_size) >= 0 and float(ts) > 0


def test_write_trace_stats_match_the_written_table(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    stats = write_trace(out, "soundcloud", 3000, 8, batch_requests=700)
    table = pq.read_table(out)
    assert table.equals(generate_table("soundcloud", 3000, 8).replace_schema_metadata(table.schema.metadata))
    sizes = np.bincount(table.column("request_id").to_numpy())
    assert (stats.rows, stats.requests) == (table.num_rows, 3000)
    assert stats.mean_size == sizes.mean() and stats.max_size == sizes.max()
    assert stats.multi_key_fraction == np.mean(sizes > 1)
    assert stats.distinct_keys == len(set(table.column("key").to_pylist()))
    assert stats.duration_s == table.column("ts").to_numpy()[-1]
