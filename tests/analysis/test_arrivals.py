"""Driver-side request tables (analysis.arrivals): hand-worked values, and equality with the Spark transforms
they replace for traces up to `Options.driver_requests` requests."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pandas as pd
import pytest

from analysis import arrivals, pipeline
from analysis import transforms as tr

# the hand trace's requests (tests/analysis/conftest.py): arrivals 0.0, 1.0, 2.5, 4.0 with 3, 1, 2, 1 keys
TS = np.array([0.0, 1.0, 2.5, 4.0])
SIZES = np.array([3, 1, 2, 1], dtype=np.int64)


def test_hand_worked_tables() -> None:
    pd.testing.assert_frame_equal(arrivals.size_histogram(SIZES), pd.DataFrame(
        {"size": np.array([1, 2, 3], dtype=np.int64), "requests": np.array([2, 1, 1], dtype=np.int64)}))
    # two 2-s windows: 0.0 and 1.0 in window 0; 2.5 and 4.0 (clamped from window 2) in window 1
    assert arrivals.window_index(TS, 0.0, 2.0, 2).tolist() == [0, 0, 1, 1]
    pd.testing.assert_frame_equal(arrivals.arrival_rate(TS, 0.0, 2.0, 2), pd.DataFrame({
        "window": np.array([0, 1], dtype=np.int32), "start": [0.0, 2.0],
        "requests": np.array([2, 2], dtype=np.int64), "rate": [1.0, 1.0]}))
    # gaps within the windows: 1.0 (window 0), 1.5 (window 1); the 1.5 s gap 1.0 → 2.5 crosses a boundary
    assert arrivals.gap_stats(TS[::-1].copy(), 0.0, 2.0, 2) == {"n": 2, "mean": 1.25, "std": 0.25, "p50": 1.0,
                                                                "p99": 1.5}
    # one window: gaps 1.0, 1.5, 1.5 → nearest-rank p50 = 2nd smallest = 1.5
    one = arrivals.gap_stats(TS, 0.0, 4.0, 1)
    assert (one["n"], one["p50"], one["p99"]) == (3, 1.5, 1.5)
    assert one["mean"] == pytest.approx(4 / 3)
    assert arrivals.gap_stats(np.array([7.0]), 7.0, 1.0, 1) == {"n": 0, "mean": None, "std": None, "p50": None,
                                                                "p99": None}


@pytest.mark.spark
@pytest.mark.parametrize("case", range(3))
def test_equal_to_the_spark_transforms(spark: Any, case: int) -> None:
    rng = random.Random(case)
    # coarse timestamps: ties within and across windows; windows [1, 3, 7][case] over 0..10
    rows = [(i, float(rng.randint(0, 40)) / 4, rng.randint(1, 4)) for i in range(200)]
    windows = [1, 3, 7][case]
    reqs = spark.createDataFrame(rows, "request_id long, ts double, size long")
    t0 = min(r[1] for r in rows)
    window_s = (max(r[1] for r in rows) - t0) / windows
    ts = np.array([r[1] for r in rows])
    sizes = np.array([r[2] for r in rows], dtype=np.int64)
    pd.testing.assert_frame_equal(arrivals.size_histogram(sizes), tr.size_histogram(reqs).toPandas(),
                                  check_exact=True)
    pd.testing.assert_frame_equal(arrivals.arrival_rate(ts, t0, window_s, windows),
                                  tr.arrival_rate(spark, reqs, t0, window_s, windows).toPandas(), check_exact=True)
    gaps = np.sort(tr.inter_arrivals(reqs, t0, window_s, windows).toPandas()["gap"].to_numpy())
    got = arrivals.gap_stats(ts, t0, window_s, windows)
    n = gaps.size
    assert got["n"] == n
    assert got["mean"] == pytest.approx(gaps.mean(), rel=1e-12)
    assert got["std"] == pytest.approx(gaps.std(), rel=1e-12)
    assert (got["p50"], got["p99"]) == (gaps[int(np.ceil(0.5 * n)) - 1], gaps[int(np.ceil(0.99 * n)) - 1])


@pytest.mark.spark
def test_pipeline_driver_and_spark_paths_agree(spark: Any) -> None:
    rng = random.Random(11)
    rows = [(r, float(r) / 7 + rng.choice([0.0, 0.001]), f"k{rng.randint(0, 30)}", rng.choice([10, 20, None]))
            for r in range(150) for _ in range(rng.randint(1, 4))]
    raw = spark.createDataFrame(rows, "request_id long, ts double, key string, value_size long")
    opts = pipeline.Options(fanout=False, slack_replay=False, windows=3, rate_windows=5, hot_n=3)
    steps: list[str] = []
    driver = pipeline.characterize(spark, raw, opts, on_step=steps.append)
    assert steps == list(pipeline.STEPS)  # every step announced once, in order (the CLI's progress bar)
    in_spark = pipeline.characterize(spark, raw,
                                     pipeline.Options(fanout=False, slack_replay=False, windows=3, rate_windows=5,
                                                      hot_n=3, driver_requests=0))
    for name in ("size_hist", "count_of_counts", "top_keys", "value_size_hist", "hot_sets", "rate"):
        pd.testing.assert_frame_equal(getattr(driver, name), getattr(in_spark, name), check_exact=True)
    assert driver.gaps["n"] == in_spark.gaps["n"]
    assert (driver.gaps["n"] or 0) > 100
    assert driver.gaps["mean"] == pytest.approx(in_spark.gaps["mean"], rel=1e-12)
    # 150-odd gaps: percentile_approx (accuracy 10 000) is exact at this size
    assert (driver.gaps["p50"], driver.gaps["p99"]) == (in_spark.gaps["p50"], in_spark.gaps["p99"])
