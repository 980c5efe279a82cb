"""The driver-side hot-set ranking (`pipeline._hot_from_counts`) equals the Spark one, ties and non-ASCII included."""

from __future__ import annotations

import random
from typing import Any

import pandas as pd
import pytest

from analysis import pipeline
from analysis import transforms as tr


@pytest.mark.parametrize("case", range(4))
def test_driver_ranking_equals_spark_ranking(spark: Any, case: int) -> None:
    rng = random.Random(case)
    rows = [(i, rng.uniform(0, 10), rng.choice("abcdefgé€z") * rng.randint(1, 2), None) for i in range(300)]
    df = tr.normalize(spark.createDataFrame(rows, "request_id long, ts double, key string, value_size long"))
    n = [1, 2, 3, 5][case]
    full = tr.hot_set_by_window(tr.window_key_counts(df, 0.0, 10 / 4, 4), n).toPandas()
    cand = tr.top_keys(tr.key_counts_by_window(df, 0.0, 10 / 4, 4), 1000, "per_window").toPandas()
    pd.testing.assert_frame_equal(pipeline._hot_from_counts(cand, 4, n), full)
    # too few candidates: the exactness check must fall back to counting every key
    opts = pipeline.Options(windows=4, hot_n=n, hot_candidates=1)
    pd.testing.assert_frame_equal(pipeline._hot_sets(spark, df, cand.head(n), len(cand), 0.0, 10 / 4, opts), full)
