"""--group-window-s (single-key → multigets) and --unsorted sort."""

from __future__ import annotations

from typing import Any

import pytest

from base.errors import BadInputError
from ingest.pipeline import ingest_file
from ingest.store import DatasetInfo


def rows(info: DatasetInfo, *cols: str) -> list[tuple[Any, ...]]:
    t = info.read_table()
    return list(zip(*(t.column(c).to_pylist() for c in cols), strict=True))


TW = "".join(
    f"{ts},k{i},2,10,{client},get,0\n"
    for i, (ts, client) in enumerate([(0, "A"), (0, "B"), (1, "A"), (2, "A"), (3, "A"), (3, "B"), (9, "B")])
)


def test_window_groups_per_client_from_the_first_row(write, settings):
    info = ingest_file(write("tw.csv", TW), group_window_s=2.0, settings=settings)
    # A: rows at 0,1,2 (within 2 s of 0) → one request; 3 opens a new one. B: 0,3 are 3 s apart; 9 alone.
    assert rows(info, "request_id", "ts", "key", "client_id") == [
        (0, 0.0, "k0", "A"),
        (0, 0.0, "k2", "A"),
        (0, 0.0, "k3", "A"),
        (1, 0.0, "k1", "B"),
        (2, 3.0, "k4", "A"),
        (3, 3.0, "k5", "B"),
        (4, 9.0, "k6", "B"),
    ]
    m = info.manifest
    assert (m["requests"], m["multiget"]["max"], m["ingest_options"]["group_window_s"]) == (5, 3, 2.0)


def test_window_grouping_across_chunks_matches_one_chunk(write, settings):
    import numpy as np
    import pyarrow as pa

    from ingest.formats.base import Chunk
    from ingest.grouping import WindowGrouper
    from ingest.validate import ErrorSink

    ts = [0.0, 0.5, 1.0, 1.2, 2.5, 2.6, 4.0, 4.1]
    cl = ["a", "b", "a", "b", "a", "a", "b", "a"]
    batch = pa.record_batch({"ts": ts, "key": [f"k{i}" for i in range(8)], "client_id": cl})

    def run(splits: list[tuple[int, int]]) -> tuple[list[Any], list[Any], list[Any]]:
        g = WindowGrouper(1.0, ErrorSink("f"))
        out = []
        for lo, hi in splits:
            out += list(g.assign(Chunk(batch.slice(lo, hi - lo), np.arange(lo, hi) + 1)))
        out += list(g.finish())
        t = pa.Table.from_batches([c.batch for c in out])
        return t.column("request_id").to_pylist(), t.column("key").to_pylist(), t.column("ts").to_pylist()

    whole = run([(0, 8)])
    assert whole == run([(0, 3), (3, 5), (5, 8)]) == run([(i, i + 1) for i in range(8)])
    assert whole[0] == [0, 0, 1, 1, 2, 2, 3, 4]
    assert whole[1] == ["k0", "k2", "k1", "k3", "k4", "k5", "k6", "k7"]
    assert whole[2] == [0.0, 0.0, 0.5, 0.5, 2.5, 2.5, 4.0, 4.1]


def test_grouping_needs_time_order(write, settings):
    p = write("tw.csv", "5,a,1,1,A,get,0\n4,b,1,1,A,get,0\n")
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, group_window_s=1.0, settings=settings)
    assert str(exc.value).startswith(f"{p}:2: field 'ts': not sorted: ts 4.0 comes after ts 5.0 (line 1)")


def test_unsorted_sort_orders_by_ts_request_and_file_order(write, settings):
    p = write("u.csv", "request_id,ts,key\n2,3.0,x\n1,1.0,b\n1,1.0,a\n0,1.0,z\n")
    info = ingest_file(p, unsorted="sort", settings=settings)
    assert rows(info, "request_id", "ts", "key") == [(0, 1.0, "z"), (1, 1.0, "b"), (1, 1.0, "a"), (2, 3.0, "x")]
    assert info.manifest["sorted_on_ingest"] is True
    assert info.manifest["ingest_options"]["unsorted"] == "sort"


def test_sort_then_group(write, settings):
    p = write("tw.csv", "5,a,1,1,A,get,0\n4,b,1,1,A,get,0\n9,c,1,1,A,get,0\n")
    info = ingest_file(p, unsorted="sort", group_window_s=1.0, settings=settings)
    assert rows(info, "request_id", "ts", "key") == [(0, 4.0, "b"), (0, 4.0, "a"), (1, 9.0, "c")]


def test_sorted_duplicates_keep_their_source_line(write, settings):
    p = write("u.csv", "request_id,ts,key\n1,2.0,a\n0,1.0,q\n1,2.0,a\n")
    with pytest.raises(BadInputError) as exc:
        ingest_file(p, unsorted="sort", settings=settings)
    assert str(exc.value) == f"""{p}:4: field 'key': duplicate (request_id, key) = (1, "a")"""
    assert not (settings.datasets_dir).exists() or not any(settings.datasets_dir.iterdir())
    assert not any(settings.tmp_dir.iterdir())
