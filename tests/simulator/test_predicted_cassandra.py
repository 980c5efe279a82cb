"""The pure helpers of validation/predicted_cassandra.py: loads from the saturation, errors, the goal's verdict and
the table (the script itself needs real Cassandra nodes and minutes)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from validation.predicted_cassandra import err_pct, loads_from, table_rows, to_markdown, verdict


def test_loads_are_fractions_of_the_saturation_lightest_first() -> None:
    light, heavy = loads_from(2000.0, [0.6, 0.2], keys=4)
    assert light.name == "20%" and (light.reads_per_s, light.rate) == pytest.approx((400.0, 100.0))
    assert heavy.name == "60%" and (heavy.reads_per_s, heavy.rate) == pytest.approx((1200.0, 300.0))
    for bad in ([1.0], [0.0]):
        with pytest.raises(ValueError, match="fraction"):
            loads_from(2000.0, bad, keys=4)
    with pytest.raises(ValueError, match="saturation"):
        loads_from(0.0, [0.5], keys=4)


def test_errors_and_the_goals_verdict() -> None:
    assert err_pct(1.1, 1.0) == pytest.approx(10.0) and err_pct(0.5, 1.0) == pytest.approx(-50.0)
    assert math.isnan(err_pct(1.0, 0.0))
    assert verdict(0.50, -14.9, 0.0) == "ok" and verdict(0.50, 16.0, 5.0) == "miss"
    assert verdict(0.50, 16.0, 30.0) == "noise"  # outside the goal, inside the runs' own range
    assert verdict(0.99, 24.0, 0.0) == "ok" and verdict(0.99, -26.0, 10.0) == "miss"
    assert verdict(0.95, 90.0, 0.0) == "—"  # no goal at p95


def _system() -> dict[str, Any]:
    runs = [{"load": "20%", "pct_ms": [1.0 + d, 2.0, 4.0 + 2 * d], "lag_ms": [0.1, 0.2, 0.3],
             "noise_ms": [0.3, 0.4, 0.5], "errors": 0, "unanswered": 0, "cpu_s": 1.0} for d in (0.0, 0.2, 0.4)]
    return {
        "system": "single", "runs": runs,
        "saturation": {"reads_per_s": 2000.0, "multigets_per_s": 500.0, "concurrency": 64,
                       "jvm_cpu_per_read_us": 250.0, "client_cpu_per_read_us": 130.0},
        "loads": [{"name": "20%", "reads_per_s": 400.0, "model_load": {"before": 1e-4, "after": 0.05},
                   "predicted": {"before": [[0.5, 1.0, 1.5]] * 2, "after": [[1.1, 2.0, 5.0], [1.3, 2.0, 7.0]]}}],
        "model": {"after": {"options": {"servers": 1, "slots": 32, "replication": 1}, "inputs": {
            "network": {"value": {"one_way_ms": 0.2}, "uncertainty": {"one_way_ms": [0.19, 0.21]}},
            "service_time": {"value": {"mean_ms": 0.3, "sigma": 0.5}, "uncertainty": {"mean_ms": [0.25, 0.35]},
                             "fit": {"error_pct": 3.0}}}}},
    }


def test_the_table_compares_seed_means_with_the_median_run() -> None:
    rows = table_rows({"systems": [_system()]})
    assert [r["q"] for r in rows] == [0.50, 0.95, 0.99]
    p50, _, p99 = rows
    assert p50["observed"] == pytest.approx(1.2) and p50["observed_range"] == pytest.approx([1.0, 1.4])
    assert p50["after"] == pytest.approx(1.2) and p50["err_after"] == pytest.approx(0.0)
    assert p50["err_before"] == pytest.approx(100 * (0.5 - 1.2) / 1.2) and p50["verdict"] == "ok"
    assert p99["observed"] == pytest.approx(4.4) and p99["after"] == pytest.approx(6.0)
    assert p99["err_after"] == pytest.approx(100 * 1.6 / 4.4) and p99["verdict"] == "miss"  # +36%, range 18%
    text = to_markdown({"systems": [_system()]})
    assert "| single | 20% (400) | p50 | 0.500 | 1.200 (1.100–1.300) | 1.200 (1.000–1.400) | -58% | +0% |" in text
    assert "network one way 0.200 ms [0.190, 0.210]" in text and "saturation 2000 partition reads/s" in text
