"""Request layout: a table already in layout order is laid out without sorting, and every table — grouped,
shuffled, interleaved, with ties, NaN or no timestamps, in any chunking — gets the layout of the sort."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from simulation import cassandra
from simulation.cassandra import CassandraDeployment
from simulation.layout import _sorted, request_layout


def _table(rid: list[int] | np.ndarray, ts: Any = None, chunks: int = 1) -> pa.Table:
    rid = np.asarray(rid, dtype=np.int64)
    cols: dict[str, Any] = {"request_id": rid, "key": [f"k{i % 7}" for i in range(rid.size)],
                            "value_size": np.arange(rid.size, dtype=np.int64) % 3 * 100 + 10}
    if ts is not None:
        cols["ts"] = np.asarray(ts, dtype=np.float64)
    t = pa.table(cols)
    if chunks > 1:  # cut at arbitrary rows, not at request boundaries
        cuts = np.linspace(0, rid.size, chunks + 1).astype(int)
        t = pa.Table.from_batches([b for a, b2 in itertools.pairwise(cuts)
                                   for b in t.slice(a, b2 - a).to_batches()])
    return t


def _same_as_sorted(t: pa.Table) -> Any:
    lay = request_layout(t, with_keys=True)
    offsets, order, earliest = _sorted(t)
    assert np.array_equal(lay.offsets, offsets)
    assert np.array_equal(lay.take(np.arange(t.num_rows)), order)
    assert np.array_equal(lay.keys, np.asarray(t.column("key").to_numpy(zero_copy_only=False))[order])
    if earliest is None:
        assert lay.timestamps is None
    else:
        assert lay.timestamps is not None
        assert np.array_equal(lay.timestamps, earliest, equal_nan=True)
    return lay


@pytest.mark.parametrize("chunks", [1, 3, 7])
def test_grouped_table_needs_no_row_order(chunks: int) -> None:
    sizes = np.arange(20) % 4 + 1
    rid = np.repeat(np.arange(20), sizes)
    ts = np.repeat(np.arange(20) * 0.5, sizes) + np.concatenate([np.arange(k) * 0.1 for k in sizes])
    lay = _same_as_sorted(_table(rid, ts, chunks))
    assert lay.row_order is None
    assert lay.requests == 20


def test_grouped_ties_in_ts_are_ordered_by_request_id() -> None:
    # equal first ts: grouped when the ids increase, sorted (ids ascending) when they do not
    assert _same_as_sorted(_table([3, 3, 5, 9, 9], [1.0, 1.0, 1.0, 1.0, 2.0])).row_order is None
    lay = _same_as_sorted(_table([9, 9, 5, 3, 3], [1.0, 1.0, 1.0, 1.0, 2.0]))
    assert lay.row_order is not None
    assert lay.offsets.tolist() == [0, 2, 3, 5]


def test_request_order_follows_the_earliest_ts_not_the_first_row() -> None:
    # request 1's earliest row comes second: it still starts before request 2
    lay = _same_as_sorted(_table([1, 1, 2], [5.0, 1.0, 3.0]))
    assert lay.row_order is None
    assert lay.timestamps is not None and lay.timestamps.tolist() == [1.0, 3.0]
    lay = _same_as_sorted(_table([1, 1, 2], [5.0, 4.0, 3.0]))  # now request 2 starts first
    assert lay.row_order is not None and lay.row_order.tolist() == [2, 0, 1]


@pytest.mark.parametrize("chunks", [1, 4])
def test_interleaved_requests_are_sorted(chunks: int) -> None:
    # contiguous runs, increasing (ts, id) per run, but request 5 has two runs
    lay = _same_as_sorted(_table([5, 5, 6, 5, 7], [0.0, 0.1, 0.2, 0.3, 0.4], chunks))
    assert lay.row_order is not None
    assert lay.offsets.tolist() == [0, 3, 4, 5]
    assert lay.row_order.tolist() == [0, 1, 3, 2, 4]
    # ids not increasing, rows contiguous: unique runs still grouped when the ts order holds
    assert _same_as_sorted(_table([8, 8, 2, 4], [0.0, 0.0, 1.0, 2.0], chunks)).row_order is None
    assert _same_as_sorted(_table([8, 8, 2, 8], [0.0, 0.0, 1.0, 2.0], chunks)).row_order is not None


def test_uint64_ids_beyond_int64_take_the_sort() -> None:
    big = np.array([2**63 + 5, 2**63 + 5, 7], dtype=np.uint64)
    lay = _same_as_sorted(pa.table({"request_id": big, "key": ["a", "b", "c"]}))  # by id: 7 comes first
    assert lay.row_order is not None and lay.row_order.tolist() == [2, 0, 1]


def test_without_ts_requests_go_by_id_and_nan_ts_fall_back() -> None:
    assert _same_as_sorted(_table([1, 1, 2, 4])).row_order is None
    assert _same_as_sorted(_table([2, 2, 1, 4])).row_order is not None
    assert _same_as_sorted(_table([1, 2, 3], [0.0, np.nan, 1.0])).row_order is not None
    # a NaN in a request cut by a chunk boundary is not lost by merging its two runs
    lay = _same_as_sorted(_table([1, 1, 1, 1, 2, 2], [0.0, 0.0, 0.0, np.nan, 5.0, 6.0], chunks=2))
    assert lay.timestamps is not None and np.isnan(lay.timestamps[-1])  # the sort puts it last


@pytest.mark.parametrize("seed", range(25))
def test_random_tables_match_the_sort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_req = int(rng.integers(1, 40))
    sizes = rng.integers(1, 6, n_req)
    rid = np.repeat(rng.permutation(1000)[:n_req] if seed % 2 else np.arange(n_req), sizes)
    ts = np.repeat(np.sort(rng.integers(0, 10, n_req)).astype(float), sizes) + rng.integers(0, 2, rid.size) * 0.5
    mode = seed % 5
    if mode == 1:  # shuffled rows
        perm = rng.permutation(rid.size)
        rid, ts = rid[perm], ts[perm]
    elif mode == 2:  # two neighbouring rows swapped (often interleaves two requests)
        i = int(rng.integers(0, max(1, rid.size - 1)))
        rid[[i, i + 1 if i + 1 < rid.size else i]] = rid[[i + 1 if i + 1 < rid.size else i, i]]
    _same_as_sorted(_table(rid, ts if mode != 3 else None, chunks=int(rng.integers(1, 5))))


def test_prepared_trace_of_a_shuffled_table_equals_the_sorted_one() -> None:
    from simulation.source import load_table

    table = load_table(profile="bimodal", requests=400, seed=3)
    shuffled = table.take(pa.array(np.random.default_rng(0).permutation(table.num_rows)))
    dep = CassandraDeployment(servers=16)
    a, b = cassandra.prepare(table, dep), cassandra.prepare(shuffled, dep)
    assert request_layout(table).row_order is None  # generated traces are grouped
    assert request_layout(shuffled).row_order is not None
    for name in ("offsets", "timestamps", "tokens", "sizes", "mean_demand_s"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert np.array_equal(x, y), name
    assert a.demand == b.demand and a.default_thr_l == b.default_thr_l
    assert a.sizes is not None  # bimodal sizes differ: the size path ran on both


def test_prepare_lets_go_of_a_table_the_caller_does_not_keep(monkeypatch: pytest.MonkeyPatch) -> None:
    """By the time `prepare` returns the freed pages to the OS, the table's Arrow buffers are freed: it keeps no
    reference to the table or its columns (the coordinator's RSS would otherwise hold the whole table)."""
    rid = np.repeat(np.arange(20_000), 4)
    table = pa.table({"request_id": rid, "ts": rid * 0.001, "key": pa.array([f"k{i}" for i in range(rid.size)]),
                      "value_size": pa.array([100] * rid.size), "op": pa.array(["get"] * rid.size)})
    held = pa.total_allocated_bytes()
    assert held > 1_000_000  # the key, value_size and op columns live in Arrow's pool
    seen: list[int] = []
    monkeypatch.setattr(cassandra, "release_freed_memory", lambda: seen.append(pa.total_allocated_bytes()))
    tables = [table]
    del table
    trace = cassandra.prepare(tables.pop(), CassandraDeployment(servers=16), source="t")
    assert seen and seen[0] < held // 10
    assert trace.requests == 20_000
