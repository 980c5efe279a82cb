"""`expected.error_bound` (tuner/error_bound.py): hand-worked combinations of the replay's interval, the
calibration's range and the sampling error."""

from __future__ import annotations

import pytest

from tuner.error_bound import combined_bound


def test_every_part_widens_the_bound() -> None:
    exp = {"p50_ms": 1.0, "p99_ms": 4.0, "ci": {"p99": 0.5},
           "calibration": {"service_time_mean_ms": [0.2, 0.4], "p50_ms": [0.8, 1.3], "p99_ms": [3.0, 6.0]}}
    b = combined_bound(exp, {"error_bound": {"p50_pct": 10.0, "p99_pct": 25.0}})
    assert b is not None
    # p99: min(4 − 0.5, 3.0) / 1.25 = 2.4; max(4 + 0.5, 6.0) × 1.25 = 7.5
    assert b["p99_ms"] == pytest.approx([2.4, 7.5])
    # p50: no replay interval; [0.8, 1.3] widened by 10 %
    assert b["p50_ms"] == pytest.approx([0.8 / 1.1, 1.3 * 1.1])
    assert b["parts"]["p99"] == {"replay_ci_ms": 0.5, "calibration_ms": [3.0, 6.0], "sampling_pct": 25.0}


def test_without_calibration_or_sampling_only_the_replay_interval_remains() -> None:
    b = combined_bound({"p50_ms": 1.0, "p99_ms": 4.0, "ci": {"p99": 0.5}}, None)
    assert b is not None
    assert b["p99_ms"] == pytest.approx([3.5, 4.5]) and b["p50_ms"] == pytest.approx([1.0, 1.0])
    assert b["parts"]["p99"]["calibration_ms"] is None
    # the calibration's range counts only where it reaches past the replay's interval
    narrow = combined_bound({"p99_ms": 4.0, "ci": {"p99": 0.5}, "calibration": {"p99_ms": [3.9, 4.1]}})
    assert narrow is not None and narrow["p99_ms"] == pytest.approx([3.5, 4.5])
    assert combined_bound({"p50_ms": 1.0}) is None
