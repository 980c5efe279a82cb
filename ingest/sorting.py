"""`--unsorted sort`: an external sort by (ts, request_id, source line) with DuckDB, in bounded memory.

Chunks are staged to a Parquet file with their source line, sorted by DuckDB (which spills to disk beyond its
memory limit), and streamed back as chunks; ties keep file order, so the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from base.settings import Settings
from ingest.formats.base import Chunk
from ingest.writer import staging_dir

__all__ = ["sorted_chunks"]

MEMORY_LIMIT = "512MB"


def sorted_chunks(
    chunks: Iterable[Chunk],
    *,
    settings: Settings,
    by_request: bool,
    chunk_rows: int = 1 << 20,
    tiebreak: tuple[str, ...] = (),
) -> Iterator[Chunk]:
    """The chunks sorted by (ts[, request_id], *tiebreak, source line): `tiebreak` names columns that order rows
    of the same ts and request before their line (the `node` of several nodes' logs, whose lines repeat)."""
    import duckdb

    with staging_dir(settings, "sort") as work:
        stage = work / "stage.parquet"
        writer: pq.ParquetWriter | None = None
        try:
            for c in chunks:
                b = c.batch.append_column("_line", pa.array(c.lines, type=pa.int64()))
                if writer is None:
                    writer = pq.ParquetWriter(stage, b.schema, compression="zstd", compression_level=1)
                writer.write_batch(b)
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            return
        con = duckdb.connect()
        try:
            con.execute(f"SET memory_limit='{MEMORY_LIMIT}'")
            con.execute(f"SET temp_directory='{work / 'spill'}'")
            con.execute("SET preserve_insertion_order=true")
            order = ", ".join(["ts", *(["request_id"] if by_request else []), *tiebreak, "_line"])
            reader: Any = con.sql(f"SELECT * FROM read_parquet('{stage}') ORDER BY {order}").to_arrow_reader(chunk_rows)
            for batch in reader:
                if batch.num_rows == 0:
                    continue
                lines = np.asarray(batch.column("_line").to_numpy(zero_copy_only=False), dtype=np.int64)
                rest = batch.drop_columns(["_line"])
                yield Chunk(rest, lines)
        finally:
            con.close()
