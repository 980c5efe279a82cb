"""The pipeline's per-window hot sets: counting candidate keys only must equal counting every key."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession

from analysis import pipeline
from analysis import transforms as tr

pytestmark = pytest.mark.spark


def _full(spark: SparkSession, rows: list[tuple[int, float, str]], n: int) -> tuple[pd.DataFrame, DataFrame]:
    df = tr.normalize(spark.createDataFrame([(r, t, k, None) for r, t, k in rows],
                                            "request_id long, ts double, key string, value_size long"))
    return tr.hot_set_by_window(tr.window_key_counts(df, 0.0, 1.0, 2), n).toPandas(), df


def _run(spark: SparkSession, rows: list[tuple[int, float, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    full, df = _full(spark, rows, 1)
    keys = tr.key_counts(df)
    cand = tr.top_keys(keys, 1).toPandas()  # hot_candidates × hot_n = 1 candidate key
    opts = pipeline.Options(windows=2, hot_n=1, hot_candidates=1)
    got = pipeline._hot_sets(spark, df, cand, keys.count(), 0.0, 1.0, opts)
    return got, full


def test_candidates_suffice_when_the_hot_key_dominates_every_window(spark: SparkSession) -> None:
    # a: 3 + 3 accesses; b, c once each → candidate {a}; non-candidates have ≤ 1 access < 3
    rows = [(i, 0.1, "a") for i in range(3)] + [(3, 0.2, "b")] + [(4 + i, 1.5, "a") for i in range(3)]
    rows += [(7, 1.6, "c")]
    got, full = _run(spark, rows)
    pd.testing.assert_frame_equal(got, full)
    assert list(got["key"]) == ["a", "a"]


def test_drifting_hot_set_falls_back_to_all_keys(spark: SparkSession) -> None:
    # window 0: a × 5; window 1: b × 2, a × 1 → candidate {a} only; b (2 accesses) beats a in window 1
    rows = [(i, 0.1, "a") for i in range(5)] + [(5, 1.2, "b"), (6, 1.3, "b"), (7, 1.4, "a")]
    got, full = _run(spark, rows)
    pd.testing.assert_frame_equal(got, full)
    assert list(got["key"]) == ["a", "b"]
