"""Past the in-memory distinct sets (`ingest.validate.SET_LIMIT` entries), a dataset's distinct keys and requests
are counted by DuckDB over the written parts, one column at a time as a spilling GROUP BY. The limit is lowered
here so that a small trace takes that path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ingest.formats.parquet
import ingest.validate
from base.errors import BadInputError
from base.settings import Settings
from ingest.pipeline import ingest_file


def _csv(write: Any, rows: list[tuple[int, float, str]]) -> Path:
    path: Path = write("t.csv", "request_id,ts,key\n" + "".join(f"{r},{t},{k}\n" for r, t, k in rows))
    return path


def test_counts_past_the_sets_are_exact(write: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest.validate, "SET_LIMIT", 3)
    rows = [(r, float(r), f"k{(r + k) % 11}") for r in range(50) for k in range(1, 4)]
    info = ingest_file(_csv(write, rows), settings=settings)
    m = info.manifest
    assert (m["rows"], m["requests"]) == (150, 50)
    assert m["distinct_keys"] == len({k for _, _, k in rows})


def test_a_request_id_seen_again_past_the_sets_is_refused(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-memory check sees an id again within its sets; past them, the DuckDB count does (batches of 4 rows,
    so that the id comes back in a later batch than its first rows)."""
    monkeypatch.setattr(ingest.validate, "SET_LIMIT", 3)
    monkeypatch.setattr(ingest.formats.parquet, "_ROWS_PER_BATCH", 4)
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"request_id": [*range(10), 3], "ts": [*map(float, range(11))],
                             "key": ["a"] * 10 + ["b"]}), path)
    with pytest.raises(BadInputError, match="appear in more than one place"):
        ingest_file(path, settings=settings)
