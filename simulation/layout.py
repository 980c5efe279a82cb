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

from base.errors import BadInputError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["RequestLayout", "key_codes", "key_tokens", "request_layout", "sizes_known", "sizes_vary", "value_sizes"]

_REQUIRED = ("request_id", "key")


@dataclass(frozen=True)
class RequestLayout:
    """`offsets` (requests + 1) delimit each request's ops; `row_order` maps op → table row (None: the identity,
    the table is already grouped); `keys` per op; `timestamps` per request (the earliest of its rows' `ts`), or
    None when the trace has no `ts` column."""

    offsets: npt.NDArray[np.int64]
    row_order: npt.NDArray[np.int64] | None
    keys: npt.NDArray[Any]
    timestamps: npt.NDArray[np.float64] | None

    @property
    def requests(self) -> int:
        return int(self.offsets.size - 1)

    def take(self, rows: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A per-row array of the table in layout order (`rows` itself when the table is already grouped)."""
        return rows if self.row_order is None else rows[self.row_order]


def request_layout(table: pa.Table, *, source: str = "trace", with_keys: bool = True) -> RequestLayout:
    """Groups the table's rows into requests; a missing column or a null key is a BadInputError naming it.
    `with_keys=False` leaves `keys` empty (no Python object per key: the Cassandra replay reads `key_tokens`).

    A table that is already grouped — each request's rows contiguous, the requests in (first ts, request id)
    order, as generated traces are — is recognised in one pass over its columns (`_grouped`) and laid out with
    no sort and no row order; any other table is sorted (the same layout either way)."""
    for col in _REQUIRED:
        if col not in table.column_names:
            raise BadInputError.single(source, "required column is missing", line=1, field=col)
    if table.num_rows == 0:
        raise BadInputError.single(source, "the trace has no rows")
    keys_col = table.column("key")
    if keys_col.null_count:
        first = int(np.flatnonzero(keys_col.is_null().to_numpy(zero_copy_only=False))[0])
        raise BadInputError.single(source, "key is null", line=first + 2, field="key")
    grouped = _grouped(table)
    if grouped is not None:
        offsets, earliest = grouped
        keys = np.asarray(keys_col.to_numpy(zero_copy_only=False)) if with_keys else np.empty(0, dtype=object)
        return RequestLayout(offsets, None, keys, earliest)
    offsets, row_order, earliest = _sorted(table)
    keys = np.asarray(keys_col.to_numpy(zero_copy_only=False))[row_order] if with_keys else np.empty(0, dtype=object)
    return RequestLayout(offsets, row_order, keys, earliest)


def _sorted(
    table: pa.Table,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64] | None]:
    """(offsets, row order, each request's earliest ts) of any table, by sorting."""
    rid = table.column("request_id").to_numpy(zero_copy_only=False)
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
    return offsets, row_order.astype(np.int64), first_ts[req_order] if ts is not None else None


def _grouped(table: pa.Table) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64] | None] | None:
    """(offsets, each request's earliest ts) when the table is already in layout order, else None.

    One pass, chunk by chunk, over integer request ids without nulls: the runs of equal ids are the requests
    when no id has two runs and the runs' (earliest ts, id) strictly increase (NaN ts fall back to the sort).
    Per request it holds the run's start, id and earliest ts; no per-row array beyond one chunk's."""
    import pyarrow as pa

    rid_col = table.column("request_id")
    exact = pa.types.is_signed_integer(rid_col.type) or rid_col.type in (pa.uint8(), pa.uint16(), pa.uint32())
    if not exact or rid_col.null_count:  # ids held exactly as int64 (uint64 ids take the sort)
        return None
    ts_col = table.column("ts") if "ts" in table.column_names else None
    if ts_col is not None and not (pa.types.is_integer(ts_col.type) or pa.types.is_floating(ts_col.type)):
        return None
    starts: list[npt.NDArray[np.int64]] = []
    ids: list[npt.NDArray[np.int64]] = []
    mins: list[npt.NDArray[np.float64]] = []
    base = 0
    ts_chunks = iter(ts_col.chunks) if ts_col is not None else None
    ts_pending: npt.NDArray[np.float64] = np.empty(0)
    for chunk in rid_col.chunks:
        n = len(chunk)
        if n == 0:
            continue
        rid = np.asarray(chunk.to_numpy(zero_copy_only=False), dtype=np.int64)
        run = np.flatnonzero(rid[1:] != rid[:-1]) + 1
        local = np.concatenate([np.zeros(1, dtype=np.int64), run])
        starts.append(local + base)
        ids.append(rid[local])
        if ts_chunks is not None:
            ts, ts_pending = _take_rows(ts_chunks, ts_pending, n)
            mins.append(np.minimum.reduceat(ts, local))
        base += n
    run_start = np.concatenate(starts)
    run_id = np.concatenate(ids)
    run_min = np.concatenate(mins) if ts_chunks is not None else None
    # a request cut by a chunk boundary is one run: merge each run that continues the previous one
    cont = np.flatnonzero(run_id[1:] == run_id[:-1]) + 1
    if cont.size:
        if run_min is not None:
            for i in cont[::-1]:  # boundaries are few (one per chunk at most)
                run_min[i - 1] = np.minimum(run_min[i - 1], run_min[i])  # NaN propagates, as in the sort
            run_min = np.delete(run_min, cont)
        run_start = np.delete(run_start, cont)
        run_id = np.delete(run_id, cont)
    if run_min is None:
        if not bool(np.all(run_id[1:] > run_id[:-1])):
            return None
    else:
        a, b = run_min[:-1], run_min[1:]
        if not bool(np.all((a < b) | ((a == b) & (run_id[:-1] < run_id[1:])))):
            return None
        if np.isnan(run_min[-1]):
            return None
        if not bool(np.all(run_id[1:] > run_id[:-1])) and np.unique(run_id).size != run_id.size:
            return None  # an id with two runs (its rows interleaved with another request's)
    offsets = np.concatenate([run_start, np.array([table.num_rows], dtype=np.int64)])
    return offsets, run_min


def _take_rows(
    chunks: Any, pending: npt.NDArray[np.float64], n: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The next `n` values of a chunked numeric column as float64 (its chunks need not line up with another
    column's), and what is left over of the last chunk read."""
    parts = [pending] if pending.size else []
    have = pending.size
    while have < n:
        c = np.asarray(next(chunks).to_numpy(zero_copy_only=False), dtype=np.float64)
        parts.append(c)
        have += c.size
    got = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return got[:n], got[n:]


def key_tokens(table: pa.Table) -> npt.NDArray[np.int64]:
    """Each table row's key as its Murmur3 ring token (`kvsim.tokens_for_keys` of the `key` column): integer keys
    hash their 8 bytes; text keys are hashed from the Arrow column's UTF-8 buffers directly, chunk by chunk, with
    no Python string per key and no copy of the column (a 10 M-op trace would otherwise hold ~600 MB of Python
    strings, or a combined large_string copy of the column)."""
    import kvsim
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column("key")
    if pa.types.is_integer(col.type):
        return kvsim.tokens_for_keys(col.to_numpy(zero_copy_only=False))
    out = np.empty(len(col), dtype=np.int64)
    at = 0
    for chunk in col.chunks:
        if len(chunk) == 0:
            continue
        arr = chunk if pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type) else pc.cast(
            chunk, pa.large_string())
        offsets_buf, data_buf = arr.buffers()[1], arr.buffers()[2]
        assert offsets_buf is not None
        width = np.int32 if pa.types.is_string(arr.type) else np.int64
        offsets = np.frombuffer(offsets_buf, dtype=width)[arr.offset : arr.offset + len(arr) + 1]
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, dtype=np.uint8)
        out[at : at + len(arr)] = kvsim.tokens_for_utf8(offsets.astype(np.int64), data)
        at += len(arr)
    return out


def key_codes(table: pa.Table) -> npt.NDArray[np.int32]:
    """Each table row's key as a small integer, equal for equal keys and different for different ones (the
    key's index in the Arrow dictionary encoding of the `key` column: hashed in Arrow, no Python object per key
    and no sort), for grouping ops by key (`kvsim.fill_unknown_sizes`)."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(table.column("key"))
    # Arrow encodes a chunked column against one dictionary shared by every chunk; were it ever otherwise, the
    # chunks' indices are remapped onto one (slow: it hashes every chunk's dictionary again)
    dictionaries = {
        (c.dictionary.offset, *(b.address for b in c.dictionary.buffers() if b is not None)) for c in encoded.chunks
    }
    if len(dictionaries) > 1:
        encoded = encoded.unify_dictionaries()
    out = np.empty(len(encoded), dtype=np.int32)
    at = 0
    for chunk in encoded.chunks:
        out[at : at + len(chunk)] = chunk.indices.to_numpy(zero_copy_only=False)
        at += len(chunk)
    return out


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


def sizes_known(table: pa.Table, source: str) -> bool:
    """The table has a `value_size` column and it is valid (numbers, none negative: else the BadInputError of
    `value_sizes`), checked on the Arrow column without a per-row copy."""
    if "value_size" not in table.column_names:
        return False
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column("value_size")
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        value_sizes(table, source)  # raises (a null column is all unknown: valid)
        return True
    if pc.any(pc.less(col, 0)).as_py():
        value_sizes(table, source)  # raises, naming the first negative size
    return True


def sizes_vary(table: pa.Table) -> bool:
    """The trace has more than one distinct known value size (the rule for size-aware service demands)."""
    if "value_size" not in table.column_names:
        return False
    import pyarrow.compute as pc

    return int(pc.count_distinct(table.column("value_size")).as_py()) > 1
