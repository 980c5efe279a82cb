from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from analysis import histstats as hs


def test_nearest_rank_quantiles() -> None:
    v, w = np.array([1, 2, 3, 4]), np.array([1, 1, 1, 1])
    assert hs.quantile(v, w, 0.5) == 2.0
    assert hs.quantile(v, w, 0.51) == 3.0
    assert hs.quantile(v, w, 1.0) == 4.0
    assert hs.quantile(np.array([10, 20]), np.array([9, 1]), 0.9) == 10.0
    assert hs.quantile(np.array([10, 20]), np.array([9, 1]), 0.91) == 20.0
    assert hs.quantile(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 0.5) is None


def test_skewness_matches_scipy_population_skewness() -> None:
    v, w = np.array([1, 2, 10]), np.array([3, 2, 1])
    assert hs.skewness(v, w) == pytest.approx(stats.skew(np.repeat(v, w), bias=True))
    assert hs.skewness(np.array([5]), np.array([4])) is None


def test_top_share_splits_the_boundary_class() -> None:
    # 200 items: 150 of size 1, 50 of size 10 → top 1% = 2 items of size 10 → 20 / 650
    assert hs.top_share(np.array([1, 10]), np.array([150, 50]), 0.01) == pytest.approx(20 / 650)
    # top 30% = 60 items: 50 × 10 + 10 × 1 = 510
    assert hs.top_share(np.array([1, 10]), np.array([150, 50]), 0.30) == pytest.approx(510 / 650)


def test_share_above_is_strict() -> None:
    assert hs.share_above(np.array([100, 200, 300]), np.array([3, 2, 1]), 200) == pytest.approx(1 / 6)


def test_largest_jump_picks_the_value_below_the_gap() -> None:
    # per-key sizes: 60% at 1 KB, 30% at 2 KB, 10% at 512 KB → the biggest relative jump is 2 KB → 512 KB
    v, w = np.array([1024, 2048, 524288]), np.array([6, 3, 1])
    assert hs.largest_jump(v, w) == 2048.0
    assert hs.largest_jump(np.array([7]), np.array([3])) is None
