"""A trace table as the simulator sees it: rows grouped into requests (ordered by their first timestamp, then
request id), each request's keys in row order, per-op value sizes, and each request's arrival time.

This is the part of a workload that is the same for every replay seed: computed once per trace and shared by
every seed and every candidate (what a seed draws — arrivals, service demands — is materialized by kvsim).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tailtune.base.errors import BadInputError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["RequestLayout", "key_tokens", "request_layout", "sizes_vary", "value_sizes"]

_REQUIRED = ("request_id", "key")


@dataclass(frozen=True)
class RequestLayout:
    """`offsets` (requests + 1) delimit each request's ops; `row_order` maps op → table row; `keys` per op;
    `timestamps` per request (first row's `ts`), or None when the trace has no `ts` column."""

    offsets: npt.NDArray[np.int64]
    row_order: npt.NDArray[np.int64]
    keys: npt.NDArray[Any]
    timestamps: npt.NDArray[np.float64] | None

    @property
    def requests(self) -> int:
        return int(self.offsets.size - 1)


def request_layout(table: pa.Table, *, source: str = "trace", with_keys: bool = True) -> RequestLayout:
    """Groups the table's rows into requests; a missing column or a null key is a BadInputError naming it.
    `with_keys=False` leaves `keys` empty (no Python object per key: the Cassandra replay reads `key_tokens`)."""
    for col in _REQUIRED:
        if col not in table.column_names:
            raise BadInputError.single(source, "required column is missing", line=1, field=col)
    if table.num_rows == 0:
        raise BadInputError.single(source, "the trace has no rows")
    rid = table.column("request_id").to_numpy(zero_copy_only=False)
    keys_col = table.column("key")
    if keys_col.null_count:
        first = int(np.flatnonzero(keys_col.is_null().to_numpy(zero_copy_only=False))[0])
        raise BadInputError.single(source, "key is null", line=first + 2, field="key")
    ts = (
        table.column("ts").to_numpy(zero_copy_only=False).astype(np.float64) if "ts" in table.column_names else None
    )
    uniq, inv = np.unique(rid, return_inverse=True)
    inv = inv.reshape(-1)
    first_ts: npt.NDArray[np.float64]
    if ts is not None:
        first_ts = np.full(len(uniq), np.inf)
        np.minimum.at(first_ts, inv, ts)
    else:
        first_ts = np.zeros(len(uniq))
    req_order = np.lexsort((np.arange(len(uniq)), first_ts))
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[req_order] = np.arange(len(uniq))
    row_order = np.argsort(rank[inv], kind="stable")
    counts = np.bincount(rank[inv], minlength=len(uniq))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = np.asarray(keys_col.to_numpy(zero_copy_only=False))[row_order] if with_keys else np.empty(0, dtype=object)
    return RequestLayout(offsets, row_order.astype(np.int64), keys, first_ts[req_order] if ts is not None else None)


def key_tokens(table: pa.Table) -> npt.NDArray[np.int64]:
    """Each table row's key as its Murmur3 ring token (`kvsim.tokens_for_keys` of the `key` column): integer keys
    hash their 8 bytes; text keys are hashed from the Arrow column's UTF-8 buffers directly, with no Python string
    per key (a 10 M-op trace would otherwise hold ~600 MB of them, and more in a fixed-width copy)."""
    import kvsim
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column("key")
    if pa.types.is_integer(col.type):
        return kvsim.tokens_for_keys(col.to_numpy(zero_copy_only=False))
    arr = pc.cast(col, pa.large_string()).combine_chunks()
    offsets_buf, data_buf = arr.buffers()[1], arr.buffers()[2]
    assert offsets_buf is not None
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, dtype=np.uint8)
    return kvsim.tokens_for_utf8(offsets, data)


def value_sizes(table: pa.Table, source: str) -> npt.NDArray[np.float64] | None:
    """The `value_size` column per table row (NaN = unknown), or None without the column."""
    if "value_size" not in table.column_names:
        return None
    col = table.column("value_size")
    import pyarrow as pa

    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_null(col.type)):
        raise BadInputError.single(source, f"must be a number, column type is {col.type}", line=1, field="value_size")
    arr: npt.NDArray[np.float64] = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
    neg = np.flatnonzero(arr < 0)
    if neg.size:
        raise BadInputError.single(source, f"negative size {arr[neg[0]]:.0f}", line=int(neg[0]) + 2, field="value_size")
    return arr


def sizes_vary(table: pa.Table) -> bool:
    """The trace has more than one distinct known value size (the rule for size-aware service demands)."""
    if "value_size" not in table.column_names:
        return False
    import pyarrow.compute as pc

    return int(pc.count_distinct(table.column("value_size")).as_py()) > 1
