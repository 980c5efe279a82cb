"""`parquet`: the canonical long format in Parquet (columns renamed with `--map column=field`).

Errors name the 1-based row number in place of a line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pyarrow.parquet as pq

from ingest.formats.base import Chunk, TraceReader, convert_canonical, map_header, require

__all__ = ["ParquetReader"]

REQUIRED: tuple[str, ...] = ("ts", "key")
_ROWS_PER_BATCH = 1 << 20


class ParquetReader(TraceReader):
    """Canonical rows from a Parquet file; typed columns are checked, text columns parsed like CSV."""

    name: ClassVar[str] = "parquet"

    _fields: dict[str, str] | None = None

    def _file(self) -> pq.ParquetFile:
        if self.source.compression != "none":
            raise self.fatal(None, None, f"a {self.source.compression}-compressed Parquet file is not supported")
        try:
            return pq.ParquetFile(self.source.path)
        except Exception as exc:  # pyarrow raises several types for a corrupt footer
            raise self.fatal(None, None, f"not a readable Parquet file: {exc}") from None

    def columns(self) -> list[str]:
        if self._fields is None:
            names = list(self._file().schema_arrow.names)
            self._fields = map_header(names, self.options.mapping, self.sink)
            require(set(self._fields.values()), REQUIRED, names, self.sink)
        return list(self._fields.values())

    def chunks(self) -> Iterator[Chunk]:
        self.columns()
        assert self._fields is not None
        pf = self._file()
        row = 0
        total = max(1, pf.metadata.num_rows)
        for batch in pf.iter_batches(batch_size=_ROWS_PER_BATCH, columns=list(self._fields)):
            n = batch.num_rows
            lines = np.arange(row + 1, row + n + 1, dtype=np.int64)
            row += n
            self.source.report_progress(self.source.size * row // total)
            raw = {f: batch.column(c) for c, f in self._fields.items()}
            chunk = convert_canonical(raw, lines, self.sink)
            if chunk is not None:
                yield chunk
