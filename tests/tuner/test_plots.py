"""The latency CDF figure draws a few thousand exact points of a whole trace's CDF, dense in the tail."""

from __future__ import annotations

import io
import time

import numpy as np

from tuner import plots


def test_cdf_points_are_exact_ranks_dense_in_the_tail() -> None:
    lat = np.random.default_rng(0).lognormal(0.0, 1.0, 1_000_000)
    x, y = plots.cdf_points(lat)
    ref = np.sort(lat)
    assert x.size <= plots.CDF_POINTS + 2
    ranks = np.rint(y * lat.size).astype(np.int64) - 1
    assert np.array_equal(x, ref[ranks])  # every point lies on the empirical CDF
    assert ranks[0] == 0 and ranks[-1] == lat.size - 1  # minimum and maximum drawn
    assert np.all(np.diff(ranks) > 0)
    assert np.count_nonzero(ranks >= 0.999 * lat.size) >= 200  # p99.9 and beyond: hundreds of points
    assert np.count_nonzero(ranks >= 0.99 * lat.size) >= 600


def test_small_samples_are_drawn_whole() -> None:
    x, y = plots.cdf_points(np.array([3.0, 1.0, 2.0]))
    assert x.tolist() == [1.0, 2.0, 3.0] and y.tolist() == [1 / 3, 2 / 3, 1.0]


def test_cdf_figure_of_a_million_requests_is_quick() -> None:
    rng = np.random.default_rng(1)
    curves = {f"config {i}": rng.exponential(1.0 + i, 1_000_000) for i in range(3)}
    plots._plt()  # pyplot's import is not the figure's cost
    t0 = time.perf_counter()
    fig = plots.cdf_figure(curves)
    assert fig is not None
    fig.savefig(io.BytesIO(), format="png")
    assert time.perf_counter() - t0 < 10.0  # every point with legend "best": ≈ 20 s on a 2-core VM
    assert all(len(line.get_xdata()) <= plots.CDF_POINTS + 2 for line in fig.axes[0].get_lines())
