"""Generated traces are valid input for `tailtune ingest` (the quickstart's generate → ingest path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from base.settings import Settings
from ingest.generate import write_trace


@pytest.mark.parametrize("suffix", ["csv.gz", "parquet"])
def test_generated_trace_ingests_with_the_same_counts(settings: Settings, tmp_path: Path, suffix: str) -> None:
    pipeline = pytest.importorskip("ingest.pipeline")
    out = tmp_path / f"fb.{suffix}"
    stats = write_trace(out, "facebook", 500, 3)
    info = pipeline.ingest_file(out, settings=settings)
    manifest = info.manifest
    assert (manifest["rows"], manifest["requests"]) == (stats.rows, stats.requests)
    assert manifest["distinct_keys"] == stats.distinct_keys
