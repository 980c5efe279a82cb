"""Bad input: exit 2, line-precise messages, and TAILTUNE_HOME/datasets left exactly as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.ingest.conftest import snapshot

GOOD = "request_id,ts,key,value_size\n0,1.0,a,10\n0,1.0,b,20\n1,2.0,a,10\n"


@pytest.fixture
def seeded(cli, write, tailtune_home):
    """One good dataset already stored, so 'unchanged' is checked against a non-empty store."""
    r = cli("ingest", str(write("good.csv", GOOD)))
    assert r.exit_code == 0, r.stderr
    return snapshot(tailtune_home)


def _fails(cli: Any, tailtune_home: Path, before: list[str], path: Path, *args: str) -> str:
    r = cli("ingest", str(path), *args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert snapshot(tailtune_home) == before
    return str(r.stderr)


def test_empty_file(cli, write, tailtune_home, seeded):
    p = write("empty.csv", "")
    err = _fails(cli, tailtune_home, seeded, p)
    assert f"{p}:1: file is empty" in err
    err = _fails(cli, tailtune_home, seeded, p, "--format", "csv")
    assert f"{p}:1: file is empty" in err


def test_header_only(cli, write, tailtune_home, seeded):
    p = write("header.csv", "ts,key,value_size\n")
    assert f"{p}: no data rows" in _fails(cli, tailtune_home, seeded, p)


def test_wrong_column_count(cli, write, tailtune_home, seeded):
    p = write("cols.csv", "ts,key,value_size\n1,a,3\n2,b\n3,c,4,5\n")
    err = _fails(cli, tailtune_home, seeded, p)
    assert f"{p}:3: expected 3 columns, got 2" in err
    assert f"{p}:4: expected 3 columns, got 4" in err


def test_non_utf8(cli, write, tailtune_home, seeded):
    p = write("latin1.csv", b"ts,key,value_size\n1,a,3\n2,caf\xe9,4\n")
    err = _fails(cli, tailtune_home, seeded, p)
    assert f"{p}:3: field 'key': invalid UTF-8 (byte 0xe9 at offset 3)" in err


def test_nan_and_negative_sizes(cli, write, tailtune_home, seeded):
    p = write("sizes.csv", "ts,key,value_size\n1,a,3\n2,b,-3\n3,c,NaN\n4,d,1.5\n")
    err = _fails(cli, tailtune_home, seeded, p)
    assert f"""{p}:3: field 'value_size': expected non-negative integer, got "-3\"""" in err
    assert f"""{p}:4: field 'value_size': expected non-negative integer, got "NaN\"""" in err
    assert f"""{p}:5: field 'value_size': expected non-negative integer, got "1.5\"""" in err
    assert f"{p}:2:" not in err


def test_nan_ts(cli, write, tailtune_home, seeded):
    p = write("ts.csv", "ts,key\n1,a\nnan,b\n")
    assert f"""{p}:3: field 'ts': expected a finite number, got "nan\"""" in _fails(cli, tailtune_home, seeded, p)


def test_duplicate_request_key(cli, write, tailtune_home, seeded):
    p = write("dup.csv", "request_id,ts,key\n0,1.0,a\n0,1.0,b\n0,1.0,a\n1,2.0,a\n")
    err = _fails(cli, tailtune_home, seeded, p)
    assert f"""{p}:4: field 'key': duplicate (request_id, key) = (0, "a")""" in err
    assert ":5:" not in err


def test_duplicate_across_chunks(tmp_path, settings):
    """The request left open at a chunk boundary is still checked for duplicates."""
    import numpy as np
    import pyarrow as pa

    from ingest.formats.base import Chunk
    from ingest.validate import ErrorSink, StreamValidator

    sink = ErrorSink("f", max_errors=5)
    v = StreamValidator(sink)
    b1 = pa.record_batch({"request_id": [0, 1], "ts": [1.0, 2.0], "key": ["a", "b"], "value_size": [None, None]})
    b2 = pa.record_batch({"request_id": [1, 2], "ts": [2.0, 3.0], "key": ["b", "c"], "value_size": [None, None]})
    v.check(b1, np.array([2, 3]))
    _, lines = v.check(b2, np.array([4, 5]))
    assert [str(p) for p in sink.problems] == ["f:4: field 'key': duplicate (request_id, key) = (1, \"b\")"]
    assert lines.tolist() == [5]
    assert v.stats.requests == 3 and v.stats.max_request_rows == 1
    del Chunk


def test_unsorted_rejected_with_first_offending_line(cli, write, tailtune_home, seeded):
    p = write("unsorted.csv", "ts,key\n1,a\n3,b\n2,c\n1,d\n")
    err = _fails(cli, tailtune_home, seeded, p)
    assert f"{p}:4: field 'ts': not sorted: ts 2.0 comes after ts 3.0 (line 3)" in err
    assert "--unsorted sort" in err


def test_rows_of_one_request_at_two_times(cli, write, tailtune_home, seeded):
    p = write("split.csv", "request_id,ts,key\n0,1.0,a\n0,2.0,b\n")
    err = _fails(cli, tailtune_home, seeded, p)
    assert f"{p}:3: field 'ts': request 0 already has ts 1.0; rows of one request share one ts" in err


def test_missing_required_column(cli, write, tailtune_home, seeded):
    p = write("nokey.csv", "ts,item,value_size\n1,a,3\n")
    err = _fails(cli, tailtune_home, seeded, p, "--format", "csv")
    assert f"{p}:1: field 'key': missing required column (header has: ts, item, value_size)" in err


def test_unknown_format(cli, write, tailtune_home, seeded):
    p = write("x.csv", GOOD)
    err = _fails(cli, tailtune_home, seeded, p, "--format", "xml")
    assert f"{p}: unknown format 'xml'" in err
    assert "known formats: auto, csv, tsv" in err


def test_undetectable_format(cli, write, tailtune_home, seeded):
    p = write("prose.txt", "hello world\nthis is not a trace\n")
    assert f"{p}:1: cannot detect the format" in _fails(cli, tailtune_home, seeded, p)


def test_max_errors_limits_the_list(cli, write, tailtune_home, seeded):
    body = "".join(f"{i},k{i},-1\n" for i in range(10))
    p = write("many.csv", "ts,key,value_size\n" + body)
    err = _fails(cli, tailtune_home, seeded, p, "--max-errors", "3")
    assert err.count("expected non-negative integer") == 3
    assert f"{p}:4: field 'value_size'" in err and f"{p}:5:" not in err
    assert "--max-errors 3" in err


def test_skip_policy_counts_in_manifest(cli, write, tailtune_home):
    p = write("skip.csv", "ts,key,value_size\n1,a,3\n2,b,-3\n3,c\n4,d,7\n")
    r = cli("ingest", str(p), "--on-error", "skip", "--json")
    assert r.exit_code == 0, r.stderr
    import json

    from ingest.store import DatasetStore

    info = DatasetStore().get(json.loads(r.stdout)["id"])
    errors = info.manifest["errors"]
    assert errors["policy"] == "skip" and errors["skipped_rows"] == 2
    assert errors["by_field"] == {"row": 1, "value_size": 1}
    assert info.read_table().column("key").to_pylist() == ["a", "d"]


def test_skip_policy_with_nothing_left(cli, write, tailtune_home):
    p = write("allbad.csv", "ts,key,value_size\n1,a,-1\n")
    r = cli("ingest", str(p), "--on-error", "skip")
    assert r.exit_code == 2
    assert f"{p}: no valid rows (1 skipped)" in r.stderr
    assert snapshot(tailtune_home) == []


def test_group_window_on_multiget_trace_is_refused(cli, write, tailtune_home, seeded):
    p = write("g.csv", GOOD)
    err = _fails(cli, tailtune_home, seeded, p, "--group-window-s", "1")
    assert "already has request ids" in err


def test_keys_bin_truncated(cli, write, tailtune_home, seeded):
    p = write("k.bin", (5).to_bytes(8, "big") + b"\x00\x01\x02")
    err = _fails(cli, tailtune_home, seeded, p, "--format", "keys-bin")
    assert f"{p}:2: field 'key': truncated record: 3 trailing byte(s)" in err


def test_request_id_reappearing_later(cli, write, tailtune_home, seeded):
    p = write("again.csv", "request_id,ts,key\n0,1.0,a\n1,2.0,b\n0,3.0,c\n")
    err = _fails(cli, tailtune_home, seeded, p)
    assert f"{p}:4: field 'request_id': request 0 appears again after other requests" in err


def test_bad_rows_in_a_compressed_header_less_trace(cli, write, tailtune_home, seeded):
    import bz2

    body = "20160201164604 a 5 m 1 1 PHONE 3\n\n20160201164605 b 5 m -7 1 PHONE 3\n20160201164606 c 5 m 1 1\n"
    p = write("photos.bz2", bz2.compress(body.encode()))
    err = _fails(cli, tailtune_home, seeded, p, "--format", "tencent-photo")
    assert f"{p}:2: expected 8 space-separated columns, got 1" in err
    assert f"""{p}:3: field 'value_size': expected non-negative integer, got "-7\"""" in err
    assert f"{p}:4: expected 8 space-separated columns, got 6" in err
