"""Writing a dataset: zstd Parquet parts with large row groups, in a staging directory published by rename.

`staging_dir` makes a fresh directory under settings.tmp_dir (same filesystem as the datasets) and removes it if
anything fails, so a failed ingest leaves nothing behind; the store publishes a finished one with one rename.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from base.settings import Settings

__all__ = ["BackgroundWriter", "DatasetWriter", "staging_dir"]

ROW_GROUP_ROWS = 1 << 20
FILE_ROWS = 8 << 20


@contextmanager
def staging_dir(settings: Settings, prefix: str = "ingest") -> Iterator[Path]:
    """A new empty directory under settings.tmp_dir; removed on exit unless it was moved away (published)."""
    settings.tmp_dir.mkdir(parents=True, exist_ok=True)
    path = settings.tmp_dir / f"{prefix}-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    try:
        yield path
    finally:
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)


class DatasetWriter:
    """Writes batches as `part-00000.parquet`, ... (zstd, `row_group_rows` per row group, `file_rows` per part).

    Batches are cast to `schema` (the canonical schema restricted to the dataset's columns) and buffered until
    a full row group is available, so small input chunks still give large row groups.
    """

    def __init__(
        self,
        directory: Path,
        schema: pa.Schema,
        *,
        row_group_rows: int = ROW_GROUP_ROWS,
        file_rows: int = FILE_ROWS,
        compression_level: int = 3,
    ) -> None:
        self.directory = directory
        self.schema = schema
        self.row_group_rows = row_group_rows
        self.file_rows = max(file_rows, row_group_rows)
        self.compression_level = compression_level
        self.files: list[Path] = []
        self.rows = 0
        self._buffer: list[pa.RecordBatch] = []
        self._buffered = 0
        self._writer: pq.ParquetWriter | None = None
        self._file_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        batch = pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in self.schema], schema=self.schema)
        self._buffer.append(batch)
        self._buffered += batch.num_rows
        while self._buffered >= self.row_group_rows:
            self._flush(self.row_group_rows)

    def _flush(self, rows: int) -> None:
        table = pa.Table.from_batches(self._buffer, schema=self.schema)
        head, rest = table.slice(0, rows), table.slice(rows)
        if self._writer is None or self._file_rows >= self.file_rows:
            self._open_next()
        assert self._writer is not None
        self._writer.write_table(head, row_group_size=rows)
        self._file_rows += head.num_rows
        self.rows += head.num_rows
        self._buffer = rest.to_batches()
        self._buffered = rest.num_rows

    def _open_next(self) -> None:
        if self._writer is not None:
            self._writer.close()
        path = self.directory / f"part-{len(self.files):05d}.parquet"
        self._writer = pq.ParquetWriter(path, self.schema, compression="zstd", compression_level=self.compression_level)
        self.files.append(path)
        self._file_rows = 0

    def close(self) -> list[Path]:
        """Flush what is buffered and close; returns the part files written (in order)."""
        if self._buffered:
            self._flush(self._buffered)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return list(self.files)

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class BackgroundWriter:
    """Runs a DatasetWriter on a thread so Parquet encoding overlaps parsing (Arrow releases the GIL).

    The queue holds at most `depth` batches, so memory stays bounded; a writer error is raised in the caller
    on its next `write` or on `close`.
    """

    def __init__(self, writer: DatasetWriter, *, depth: int = 2) -> None:
        import queue
        import threading

        self.writer = writer
        self._queue: queue.Queue[pa.RecordBatch | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="dataset-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            if self._error is None:
                try:
                    self.writer.write(batch)
                except BaseException as exc:  # handed to the caller
                    self._error = exc

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def write(self, batch: pa.RecordBatch) -> None:
        self._check()
        self._queue.put(batch)

    def close(self) -> list[Path]:
        self._queue.put(None)
        self._thread.join()
        self._check()
        return self.writer.close()

    def abort(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self.writer.abort()
