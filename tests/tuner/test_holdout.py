"""The held-out split (tuner/holdout.py): by time, whole requests, in one streaming pass; a generated or CSV source
written whole once, never held beside a copy of a part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from base.settings import get_settings
from simulation.source import WorkloadSource
from tuner.holdout import split_source


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TAILTUNE_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


def _trace(path: Path) -> Path:
    # requests 0..9 at ts 0..9 s, request i with i % 3 + 1 keys (rows share their request's ts)
    ids, ts, keys = [], [], []
    for r in range(10):
        for k in range(r % 3 + 1):
            ids.append(r)
            ts.append(float(r))
            keys.append(f"k{r}-{k}")
    pq.write_table(pa.table({"request_id": pa.array(ids, pa.int64()), "ts": ts, "key": keys,
                             "value_size": [100] * len(ids)}), path)
    return path


def test_the_last_fraction_of_the_span_is_held_out_whole_requests(tmp_path: Path, settings: Any) -> None:
    src = WorkloadSource(trace=str(_trace(tmp_path / "t.parquet")))
    split = split_source(src, 0.2, settings, min_requests=1)
    assert split is not None
    # span 0..9 s: the cut at 7.2 s → requests 8 and 9 held out, 0..7 tuned on
    assert split.record == {"fraction": 0.2, "requests": 2, "tuned_on_requests": 8, "from_s": pytest.approx(7.2),
                            "to_s": 9.0}
    early = pq.read_table(split.early.trace)
    late = pq.read_table(split.late.trace)
    assert sorted(set(early.column("request_id").to_pylist())) == list(range(8))
    assert late.column("request_id").to_pylist() == [8, 8, 8, 9]
    assert early.num_rows + late.num_rows == 19
    # written once: a second split returns the same files and counts without rewriting them
    again = split_source(src, 0.2, settings, min_requests=1)
    assert again is not None and again.early == split.early and again.record == split.record
    # too short a held-out part: no split
    assert split_source(src, 0.2, settings, min_requests=3) is None


def test_a_generated_source_is_written_whole_once_then_split(settings: Any) -> None:
    src = WorkloadSource(profile="soundcloud", requests=2000, trace_seed=1)
    split = split_source(src, 0.25, settings, min_requests=10)
    assert split is not None
    wholes = list((settings.home_dir / "samples").glob("whole-*.parquet"))
    assert len(wholes) == 1
    whole = pq.read_table(wholes[0])
    assert split.record["requests"] + split.record["tuned_on_requests"] == 2000
    early, late = pq.read_table(split.early.trace), pq.read_table(split.late.trace)
    assert early.num_rows + late.num_rows == whole.num_rows
    assert max(early.column("ts").to_pylist()) < min(late.column("ts").to_pylist())


def test_no_timestamps_no_split(tmp_path: Path, settings: Any) -> None:
    path = tmp_path / "nots.parquet"
    pq.write_table(pa.table({"request_id": pa.array([0, 1], pa.int64()), "key": ["a", "b"],
                             "value_size": [1, 1]}), path)
    assert split_source(WorkloadSource(trace=str(path)), 0.2, settings, min_requests=1) is None
